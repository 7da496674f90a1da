-- The publisher's view of the work still to be delivered, kept by the leader in its rounds
-- (package publicatie, open.go). A round selects from it the handelingen that are the oldest
-- open one of every person they touch, however the other handelingen of those persons
-- interleave in tsreg.

-- One row per handeling taken in and not yet finished (geleverd, or a fout that no longer
-- holds its persons back). staat: wacht (to be published), gepubliceerd (published and not
-- finished: in levering, or a fout that holds its persons back), afgerond (a fout that no
-- longer holds anyone back; kept to notice an operator's retry). koppen counts the persons of
-- which it is the oldest open handeling: it is ready when koppen = personen.
create table if not exists publicatie_kandidaat (
    admhnd_id bigint      primary key,
    tsreg     timestamptz not null,
    personen  int         not null,
    koppen    int         not null default 0,
    staat     text        not null default 'wacht'
        constraint publicatie_kandidaat_staat_check check (staat in ('wacht', 'gepubliceerd', 'afgerond'))
);
create index if not exists publicatie_kandidaat_gereed_idx on publicatie_kandidaat (tsreg, admhnd_id)
    where staat = 'wacht' and koppen = personen;
create index if not exists publicatie_kandidaat_staat_idx on publicatie_kandidaat (admhnd_id)
    where staat <> 'wacht';

-- One row per person of an unfinished handeling. kop marks each person's head: its oldest open
-- handeling, or the one in flight.
create table if not exists publicatie_open (
    persoon_id bigint      not null,
    tsreg      timestamptz not null,
    admhnd_id  bigint      not null,
    kop        boolean     not null default false,
    primary key (persoon_id, tsreg, admhnd_id)
);
create index if not exists publicatie_open_admhnd_idx on publicatie_open (admhnd_id);
-- Each person's head, found without reading the person's queue: a round's work stays flat
-- however many handelingen wait behind the heads.
create index if not exists publicatie_open_kop_idx on publicatie_open (persoon_id) where kop;

-- How far the rounds have taken handelingen in (tsreg, admhnd_id: every handeling up to there,
-- and below the horizon of the round that took it, is in), and for which exclusion list and
-- fout policy the tables were built: another one rebuilds them.
create table if not exists publicatie_stand (
    id          int         primary key default 1 constraint publicatie_stand_een check (id = 1),
    tsreg       timestamptz not null default '-infinity',
    admhnd_id   bigint      not null default 0,
    fingerprint text        not null default ''
);
insert into publicatie_stand (id) values (1) on conflict do nothing;

-- Handelingen registered below the stand (a writer that stamped tsreg before its transaction
-- began, a clock behind the database's, admhnd emptied and filled again): recorded when they
-- are inserted, so that the next round takes them in before anything newer. The function
-- runs as its owner, so bijhouding's role needs no rights on the service's tables.
create table if not exists publicatie_nakomer (
    admhnd_id bigint primary key
);
create or replace function publicatie_nakomer_vastleggen() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_nakomer (admhnd_id)
    select n.id from nieuw n, publicatie_stand s
    where s.id = 1 and (n.tsreg, n.id) <= (s.tsreg, s.admhnd_id)
    on conflict do nothing;
    return null;
end $$;
drop trigger if exists admhnd_nakomer on admhnd;
create trigger admhnd_nakomer after insert on admhnd referencing new table as nieuw
    for each statement execute function publicatie_nakomer_vastleggen();
