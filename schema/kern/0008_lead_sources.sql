-- The lead margin remembers each application server's clock: the contract layout's migration
-- 0021, on the service's tables in brp_levering. Its comment says why.

alter table publicatie_lead_samples add column if not exists source text;
alter table publicatie_nakomer add column if not exists bron text;
