-- The lead margin remembers each application server's clock (publicatie/lead.go, "sources"):
-- the registration trigger records with a lead where the registration came from, the client's
-- address and application_name, and the leader keeps the lowest lead each source showed in the
-- last minute. An application server whose clock is behind and that registers less often than
-- the margin's window of 5 s is no longer forgotten between its registrations, which ended
-- some of its handelingen fout ("ingehaald") when a newer one of their persons was delivered
-- first.
--
-- What this release's definitions change (registration.sql, and rules.sql's new
-- publicatie_lead_source, the source's text): the trigger fills these columns,
-- and records the lead of every registration above half the margin (and 50 ms), not only
-- those the sample rate picks. The release before reads neither column and runs unchanged.

alter table publicatie_lead_samples add column if not exists source text;
alter table publicatie_nakomer add column if not exists bron text;
