-- The contract layout's migration 0017 for the kern layout: what the leading publisher counts
-- held behind fout, for the status when counting from the tables takes too long.
alter table publicatie_toestand add column if not exists held_handelingen bigint not null default 0;
alter table publicatie_toestand add column if not exists held_personen bigint not null default 0;
alter table publicatie_toestand add column if not exists held_counted_at timestamptz null;
