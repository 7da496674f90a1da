-- The contract layout's migration 0017 for the kern layout: what the leading publisher counts
-- held behind fout, for the status when counting from the tables takes too long.
do $$ begin if to_regclass('publicatie_state') is null then -- publicatie_toestand until migration 0009
alter table publicatie_toestand add column if not exists held_handelingen bigint not null default 0;
alter table publicatie_toestand add column if not exists held_personen bigint not null default 0;
alter table publicatie_toestand add column if not exists held_counted_at timestamptz null;
end if; end $$;
