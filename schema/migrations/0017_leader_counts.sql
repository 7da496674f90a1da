-- What the leading publisher counts held behind fout in its view of open work (issue 49):
-- publicatie status and the status page show it when counting from the tables takes longer
-- than their budget (100,000 handelingen held: seconds on a busy machine). The leader writes it
-- in a round when it changed, at most once a second (publicatie.Publisher.reportHeld).
do $$ begin if to_regclass('publicatie_state') is null then -- publicatie_toestand until migration 0022
alter table publicatie_toestand add column if not exists held_handelingen bigint not null default 0;
alter table publicatie_toestand add column if not exists held_personen bigint not null default 0;
alter table publicatie_toestand add column if not exists held_counted_at timestamptz null;
end if; end $$;
