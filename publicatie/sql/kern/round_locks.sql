-- round_locks.sql on the kern layout: the tables the round writes, locked in row exclusive
-- mode before it reads any of them (kern.admhnd first, then the service's tables), and a
-- planned read of kern.his_persafgeleidadministrati, which locks its indexes by oid as a
-- REINDEX takes them. It runs unprepared. kern.admhnd is locked by planning an update of it,
-- as in the contract layout: the service's role has only update (statuslev, tslev) there.
explain update kern.admhnd set statuslev = statuslev where false;
lock table admhnd_levering, publicatie_state, publicatie_ingehaald, publicatie_laat_personen,
    publicatie_herlees, publicatie_lead_samples, publicatie_fout_changes, publicatie_nakomer, admhnd_beheer in row exclusive mode;
select from kern.his_persafgeleidadministrati where false
