package rig

// The BRP kern layout (BRP_DATABASE_LAYOUT=kern) for the tests: the kern tables bijhouding
// writes, and a compatibility layer that shows them as the contract layout's tables.

// BijhoudingKern is the kern tables as a BRP database (release 58) has them, built from the
// facts of the kern schema (docs/contract.md, "The kern layout"; docs/kern.md): kern.admhnd with its
// static and reference tables, and kern.his_persafgeleidadministrati, the handelingen's
// persons. Column names, types, nullability, foreign keys and the indexes of kern.admhnd and
// kern.his_persafgeleidadministrati follow the facts; the index names are those of the BRP's
// generated DDL. kern.pers and kern.actie have only the columns the person link needs, and
// kern.actie an index on admhnd (ix_actie_admhnd) so the compatibility layer's deletes stay
// cheap. The reference tables hold a few rows for the tests: partij 1 and 2; the five static
// statuses; categories 1, 2 and 4; soorten 1 to 4 and 37 ('GBA - Initiële vulling', the one
// soort of category 4, the excluded one).
//
// Test-only: for CreateBareDB on an empty database (it runs in one Exec). Of the BRP's own
// checks it has those of the facts only (for example not its deferred trigger on
// his_persafgeleidadministrati's (pers, tsreg)).
const BijhoudingKern = `
create schema kern;

create table kern.partij (
	id   smallint    primary key,
	naam varchar(80) not null
);
insert into kern.partij (id, naam) values (1, 'Gemeente Testdorp'), (2, 'Gemeente Proefstad');

create table kern.statuslevadmhnd (
	id   smallint    primary key,
	naam varchar(80) not null
);
insert into kern.statuslevadmhnd (id, naam) values
	(1, 'Te leveren'), (2, 'Niet leveren'), (3, 'In levering'), (4, 'Geleverd'), (5, 'Fout');

create table kern.categorieadmhnd (
	id   smallint    primary key,
	naam varchar(80) not null
);
insert into kern.categorieadmhnd (id, naam) values
	(1, 'Actualisering'), (2, 'Correctie'), (4, 'GBA - Initiële vulling');

create table kern.srtadmhnd (
	id              smallint    primary key,
	naam            varchar(80) not null unique,
	categorieadmhnd smallint    not null references kern.categorieadmhnd,
	module          smallint    null,
	alias           varchar(80) null,
	koppelvlak      smallint    null
);
insert into kern.srtadmhnd (id, naam, categorieadmhnd) values
	(1, 'Verhuizing intergemeentelijk', 1),
	(2, 'Geboorte in Nederland', 1),
	(3, 'Voltrekking huwelijk in Nederland', 1),
	(4, 'Correctie adresgegevens', 2),
	(37, 'GBA - Initiële vulling', 4);

create sequence kern.seq_admhnd;
create table kern.admhnd (
	id                   bigint       primary key default nextval('kern.seq_admhnd'),
	srt                  smallint     not null references kern.srtadmhnd,
	partij               smallint     not null references kern.partij,
	toelichtingontlening varchar(400) null check (toelichtingontlening <> ''),
	tsreg                timestamptz  not null,
	tslev                timestamptz  null,
	statuslev            smallint     not null references kern.statuslevadmhnd
);
create index ix_admhnd_statuslev_inlevering on kern.admhnd (statuslev) where statuslev = 3;
create index ix_admhnd_statuslev_televeren on kern.admhnd (tsreg) where statuslev = 1;
create index ix_admhnd_tslev on kern.admhnd (tslev);
create index ix_admhnd_tsreg on kern.admhnd (tsreg);

create table kern.pers (
	id  bigint   primary key,
	srt smallint not null default 1
);

create sequence kern.seq_actie;
create table kern.actie (
	id     bigint      primary key default nextval('kern.seq_actie'),
	admhnd bigint      not null references kern.admhnd,
	tsreg  timestamptz not null
);
create index ix_actie_admhnd on kern.actie (admhnd);

create sequence kern.seq_his_persafgeleidadministrati;
create table kern.his_persafgeleidadministrati (
	id                          bigint      primary key default nextval('kern.seq_his_persafgeleidadministrati'),
	pers                        bigint      not null references kern.pers,
	tsreg                       timestamptz not null,
	actieinh                    bigint      not null references kern.actie,
	tsverval                    timestamptz null,
	actieverval                 bigint      null references kern.actie,
	nadereaandverval            varchar(1)  null check (nadereaandverval in ('O', 'S')),
	actievervaltbvlevmuts       bigint      null,
	indvoorkomentbvlevmuts      boolean     null,
	admhnd                      bigint      not null references kern.admhnd,
	tslaatstewijz               timestamptz not null,
	sorteervolgorde             smallint    not null,
	tslaatstewijzgbasystematiek timestamptz null
);
create index ix_his_persafgeleidadministrati_admhnd on kern.his_persafgeleidadministrati (admhnd);
create index uc_his_persafgeleidadministrati_pers_tsreg on kern.his_persafgeleidadministrati (pers, tsreg);
`

// KernCompat is a compatibility layer, for tests only, that lets the tests written against
// the contract layout's admhnd and admhnd_persoon run unchanged on a kern database: views
// public.admhnd and public.admhnd_persoon over the kern tables (see BijhoudingKern) and the
// service's brp_levering.admhnd_levering, with INSTEAD OF row triggers that write what a
// test inserts, updates or deletes through them to those tables. Run it after the service's
// kern migration, which creates brp_levering.admhnd_levering.
//
// public.admhnd(id, soort, tsreg, tslev, statuslev, tspub, foutreden, vrijgegeven) shows a
// soort's naam (soort 37 as 'GBA_INITIELE_VULLING', the contract layout's excluded soort) and
// the status as the contract layout's text: 1 and 2 as NULL (status 2, niet leveren, is the
// excluded soort's, never touched), 3 'in_levering', 4 'geleverd', 5 'fout'. An insert makes
// 'GBA_INITIELE_VULLING' soort 37 with status 2, as bijhouding registers it, and any other
// name the soort of that naam, added (id 1000 and up, category 1) when there is none; NULL
// status is 1; partij is 1; a NULL id takes nextval('kern.seq_admhnd'). tspub, foutreden and
// vrijgegeven go to brp_levering.admhnd_levering. An update writes kern.admhnd only when one
// of its columns changes (a status 2 stays 2 when the new status is NULL) and upserts
// admhnd_levering when one of its columns changes. A delete removes the handeling's his rows,
// its acties (reopening the his rows they ended), its admhnd_levering row and the handeling.
//
// public.admhnd_persoon(admhnd_id, persoon_id) is the distinct (admhnd, pers) of
// kern.his_persafgeleidadministrati. An insert adds kern.pers when missing, a kern.actie of the
// handeling and a his row (tsreg and tslaatstewijz the handeling's tsreg), and ends the
// person's open his row of another handeling with that actie. It fails as the contract's
// table does: 23505 (admhnd_persoon_pkey) for a pair that exists, 23503
// (admhnd_persoon_admhnd_id_fkey) for a missing handeling; the duplicate check is a query, so
// two transactions adding the same pair at once both succeed. A delete removes the pair's his
// rows.
//
// What the layer cannot do: INSERT ... ON CONFLICT on these views (PostgreSQL does not support
// it on a view with INSTEAD OF triggers: with a conflict target the statement fails, 42P10;
// a bare ON CONFLICT DO NOTHING is accepted but suppresses nothing, the trigger's 23505 comes
// through), TRUNCATE (42809: truncate the kern tables and admhnd_levering instead), and an UPDATE's or DELETE's re-check of its WHERE against a row a
// concurrent transaction changed (a view has no row locks: the trigger acts on the row as the
// statement's snapshot saw it). The triggers run with the rights of the session that writes
// through the views.
const KernCompat = `
create sequence public.kern_compat_seq_srtadmhnd as smallint start 1000 minvalue 1000 maxvalue 32767;

-- The soort names the tests and the load generator use, known in advance: a name added on
-- first use is an uncommitted row of kern.srtadmhnd until that registration commits, and a
-- second transaction registering the same name waits for it (a test that holds a bijhouding
-- transaction open beside another would hang).
insert into kern.srtadmhnd (id, naam, categorieadmhnd)
select nextval('public.kern_compat_seq_srtadmhnd'), n, 1
from unnest(array['VERHUIZING', 'GEBOORTE', 'HUWELIJK', 'NAAMSWIJZIGING', 'OVERLIJDEN', 'ANDERE_SOORT',
	'NIEUW', 'klaar', 'x']) as n;

-- The srt of a contract soort name: 37 for GBA_INITIELE_VULLING, else the soort of that naam,
-- added when missing (on conflict: two sessions may add the same name at once).
create function public.kern_compat_srt(p_soort text) returns smallint language plpgsql as $$
declare
	v_srt smallint;
begin
	if p_soort is null then
		raise exception using errcode = 'not_null_violation', table = 'admhnd', column = 'soort',
			message = 'null value in column "soort" of relation "admhnd" violates not-null constraint';
	end if;
	if p_soort = 'GBA_INITIELE_VULLING' then
		return 37;
	end if;
	select id into v_srt from kern.srtadmhnd where naam = p_soort;
	if found then
		return v_srt;
	end if;
	insert into kern.srtadmhnd (id, naam, categorieadmhnd)
		values (nextval('public.kern_compat_seq_srtadmhnd'), p_soort, 1)
		on conflict (naam) do nothing
		returning id into v_srt;
	if v_srt is null then
		select id into v_srt from kern.srtadmhnd where naam = p_soort;
	end if;
	return v_srt;
end $$;

-- The kern status code of a contract status: NULL is 1 (2 when niet_leveren).
create function public.kern_compat_statuslev(p_status text, p_niet_leveren boolean) returns smallint
language plpgsql immutable as $$
begin
	if p_status is null then
		return case when p_niet_leveren then 2 else 1 end;
	elsif p_status = 'in_levering' then
		return 3;
	elsif p_status = 'geleverd' then
		return 4;
	elsif p_status = 'fout' then
		return 5;
	end if;
	raise exception using errcode = 'check_violation', table = 'admhnd', constraint = 'admhnd_statuslev_check',
		message = 'new row for relation "admhnd" violates check constraint "admhnd_statuslev_check"',
		detail = format('statuslev %L is not NULL, in_levering, geleverd or fout.', p_status);
end $$;

-- Over kern.admhnd alone, the other tables' columns as scalar subqueries: a test's
-- "select ... from admhnd ... for update" (a consumer holding a row) locks the kern.admhnd row
-- and nothing else (a join would lock the soort's row for every handeling of that soort, and
-- an outer join cannot be locked at all).
create view public.admhnd as
select a.id,
	case when a.srt = 37 then 'GBA_INITIELE_VULLING'
		else (select s.naam::text from kern.srtadmhnd s where s.id = a.srt) end as soort,
	a.tsreg,
	a.tslev,
	case a.statuslev when 3 then 'in_levering' when 4 then 'geleverd' when 5 then 'fout' end as statuslev,
	(select l.tspub from brp_levering.admhnd_levering l where l.admhnd_id = a.id) as tspub,
	(select l.foutreden from brp_levering.admhnd_levering l where l.admhnd_id = a.id) as foutreden,
	(select l.vrijgegeven from brp_levering.admhnd_levering l where l.admhnd_id = a.id) as vrijgegeven
from kern.admhnd a;

create function public.kern_compat_admhnd_insert() returns trigger language plpgsql as $$
declare
	v_srt smallint;
begin
	v_srt := public.kern_compat_srt(new.soort);
	if new.id is null then
		new.id := nextval('kern.seq_admhnd');
	end if;
	insert into kern.admhnd (id, srt, partij, tsreg, tslev, statuslev)
		values (new.id, v_srt, 1, new.tsreg, new.tslev, public.kern_compat_statuslev(new.statuslev, v_srt = 37));
	if new.tspub is not null or new.foutreden is not null or new.vrijgegeven is not null then
		insert into brp_levering.admhnd_levering (admhnd_id, tspub, foutreden, vrijgegeven)
			values (new.id, new.tspub, new.foutreden, new.vrijgegeven)
			on conflict (admhnd_id) do update
			set tspub = excluded.tspub, foutreden = excluded.foutreden, vrijgegeven = excluded.vrijgegeven;
	end if;
	return new;
end $$;

create function public.kern_compat_admhnd_update() returns trigger language plpgsql as $$
declare
	k kern.admhnd%rowtype;
	v_srt smallint;
	v_status smallint;
begin
	if new.id is distinct from old.id then
		raise exception using errcode = 'feature_not_supported',
			message = 'kern compat: the id of a handeling cannot change';
	end if;
	select * into k from kern.admhnd where id = old.id;
	v_srt := k.srt;
	if new.soort is distinct from old.soort then
		v_srt := public.kern_compat_srt(new.soort);
	end if;
	if new.statuslev is null and k.statuslev = 2 then
		v_status := 2;
	else
		v_status := public.kern_compat_statuslev(new.statuslev, false);
	end if;
	if (v_srt, new.tsreg, new.tslev, v_status) is distinct from (k.srt, k.tsreg, k.tslev, k.statuslev) then
		update kern.admhnd set srt = v_srt, tsreg = new.tsreg, tslev = new.tslev, statuslev = v_status
			where id = old.id;
	end if;
	if (new.tspub, new.foutreden, new.vrijgegeven) is distinct from (old.tspub, old.foutreden, old.vrijgegeven) then
		insert into brp_levering.admhnd_levering (admhnd_id, tspub, foutreden, vrijgegeven)
			values (old.id, new.tspub, new.foutreden, new.vrijgegeven)
			on conflict (admhnd_id) do update
			set tspub = excluded.tspub, foutreden = excluded.foutreden, vrijgegeven = excluded.vrijgegeven;
	end if;
	return new;
end $$;

create function public.kern_compat_admhnd_delete() returns trigger language plpgsql as $$
begin
	-- Reopen the persons' his rows that this handeling's acties ended.
	update kern.his_persafgeleidadministrati h set tsverval = null, actieverval = null
		where h.actieverval in (select a.id from kern.actie a where a.admhnd = old.id) and h.admhnd <> old.id;
	delete from kern.his_persafgeleidadministrati where admhnd = old.id;
	delete from kern.actie where admhnd = old.id;
	delete from brp_levering.admhnd_levering where admhnd_id = old.id;
	delete from kern.admhnd where id = old.id;
	return old;
end $$;

create trigger kern_compat_admhnd_insert instead of insert on public.admhnd
	for each row execute function public.kern_compat_admhnd_insert();
create trigger kern_compat_admhnd_update instead of update on public.admhnd
	for each row execute function public.kern_compat_admhnd_update();
create trigger kern_compat_admhnd_delete instead of delete on public.admhnd
	for each row execute function public.kern_compat_admhnd_delete();

create view public.admhnd_persoon as
select distinct admhnd as admhnd_id, pers as persoon_id
from kern.his_persafgeleidadministrati;

create function public.kern_compat_admhnd_persoon_insert() returns trigger language plpgsql as $$
declare
	v_tsreg timestamptz;
	v_actie bigint;
begin
	if new.admhnd_id is null or new.persoon_id is null then
		raise exception using errcode = 'not_null_violation', table = 'admhnd_persoon',
			column = case when new.admhnd_id is null then 'admhnd_id' else 'persoon_id' end,
			message = format('null value in column "%s" of relation "admhnd_persoon" violates not-null constraint',
				case when new.admhnd_id is null then 'admhnd_id' else 'persoon_id' end);
	end if;
	if exists (select 1 from kern.his_persafgeleidadministrati where admhnd = new.admhnd_id and pers = new.persoon_id) then
		raise exception using errcode = 'unique_violation', table = 'admhnd_persoon', constraint = 'admhnd_persoon_pkey',
			message = 'duplicate key value violates unique constraint "admhnd_persoon_pkey"',
			detail = format('Key (admhnd_id, persoon_id)=(%s, %s) already exists.', new.admhnd_id, new.persoon_id);
	end if;
	select tsreg into v_tsreg from kern.admhnd where id = new.admhnd_id;
	if not found then
		raise exception using errcode = 'foreign_key_violation', table = 'admhnd_persoon',
			constraint = 'admhnd_persoon_admhnd_id_fkey',
			message = 'insert or update on table "admhnd_persoon" violates foreign key constraint "admhnd_persoon_admhnd_id_fkey"',
			detail = format('Key (admhnd_id)=(%s) is not present in table "admhnd".', new.admhnd_id);
	end if;
	insert into kern.pers (id) values (new.persoon_id) on conflict do nothing;
	insert into kern.actie (admhnd, tsreg) values (new.admhnd_id, v_tsreg) returning id into v_actie;
	update kern.his_persafgeleidadministrati set tsverval = v_tsreg, actieverval = v_actie
		where pers = new.persoon_id and tsverval is null and admhnd <> new.admhnd_id;
	insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
		values (new.persoon_id, v_tsreg, v_actie, new.admhnd_id, v_tsreg, 1);
	return new;
end $$;

create function public.kern_compat_admhnd_persoon_delete() returns trigger language plpgsql as $$
begin
	delete from kern.his_persafgeleidadministrati where admhnd = old.admhnd_id and pers = old.persoon_id;
	return old;
end $$;

create trigger kern_compat_admhnd_persoon_insert instead of insert on public.admhnd_persoon
	for each row execute function public.kern_compat_admhnd_persoon_insert();
create trigger kern_compat_admhnd_persoon_delete instead of delete on public.admhnd_persoon
	for each row execute function public.kern_compat_admhnd_persoon_delete();
`
