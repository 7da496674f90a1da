-- Every round and every consumer batch finds a handeling's persons by admhnd_id. The contract's
-- key on admhnd_persoon (admhnd_id, persoon_id) gives that index; where bijhouding created the
-- table without a key (so a person may even be recorded twice for one handeling), build one,
-- concurrently: bijhouding keeps registering meanwhile. Where any valid index leads with
-- admhnd_id, nothing is built.
-- brp:outside-transaction
-- brp:only-if select not exists (select from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[0] where i.indrelid = 'admhnd_persoon'::regclass and i.indisvalid and a.attname = 'admhnd_id' and not exists (select from pg_class c where c.oid = i.indexrelid and c.relname = 'admhnd_persoon_admhnd_idx'))
create index concurrently if not exists admhnd_persoon_admhnd_idx on admhnd_persoon (admhnd_id, persoon_id);
