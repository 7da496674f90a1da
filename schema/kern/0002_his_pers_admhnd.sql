-- A person's handelingen from the index (docs/kern.md). The consumer's check reads every
-- handeling of a batch's persons (and operate's held_back and overtaken those of one
-- handeling's persons): through kern's own (pers, tsreg) index each of a person's his rows
-- costs a heap fetch to learn its admhnd. With (pers, admhnd) the index answers (an index-only
-- scan: his rows are only inserted, so the visibility map covers all but the newest), at one
-- more index entry per his row that bijhouding inserts.
-- brp:outside-transaction
create index concurrently if not exists brp_levering_his_pers_idx on kern.his_persafgeleidadministrati (pers, admhnd);
