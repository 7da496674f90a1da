-- What the leading publisher last counted held behind fout in its view, and when (migration
-- 0017): shown when counting it from the tables (held.sql) takes longer than the budget.
select held_handelingen, held_personen, held_counted_at from publicatie_state
