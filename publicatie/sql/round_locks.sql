-- A round's first statement on a table (see handeling's doc on table locks): the tables the
-- round writes, locked in row exclusive mode before it reads any of them (admhnd first, then
-- the service's tables), and a planned read of admhnd_persoon, which locks its indexes by oid
-- as a REINDEX takes them. It runs unprepared.
-- admhnd is locked by planning an update of it (EXPLAIN runs nothing: no row, no trigger): the
-- planner takes the row exclusive lock on it and its indexes, which needs only the column
-- rights the service's role has (schema/grants), where LOCK TABLE needs a table-wide one.
explain update admhnd set statuslev = statuslev where false;
lock table publicatie_state, publicatie_ingehaald, publicatie_laat_personen, publicatie_herlees,
    publicatie_lead_samples, publicatie_fout_changes, publicatie_nakomer, admhnd_beheer in row exclusive mode;
select from admhnd_persoon where false
