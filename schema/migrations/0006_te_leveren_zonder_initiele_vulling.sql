-- Handelingen of the excluded soort GBA_INITIELE_VULLING (an initial load: possibly millions)
-- stay NULL forever. In admhnd_te_leveren_idx they sit in front of all real work, and every
-- round would walk past them. With the default exclusion the planner uses this index instead
-- (it proves soort <> all('{GBA_INITIELE_VULLING}') implies the predicate), which leaves them out.
-- brp:outside-transaction
create index concurrently if not exists admhnd_te_leveren_zonder_iv_idx on admhnd (tsreg, id)
    where statuslev is null and soort <> 'GBA_INITIELE_VULLING';
