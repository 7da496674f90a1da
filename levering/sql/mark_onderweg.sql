-- Records the handelingen ($1) a batch is about to send to the verzending queue (migration
-- 0012), committed on a connection of its own before the send: should the batch not commit
-- after its broker commit, the record says a copy of them may be out. apply.sql removes it
-- with the commit that sets them geleverd.
insert into levering_onderweg (admhnd_id) select unnest($1::bigint[]) on conflict do nothing
