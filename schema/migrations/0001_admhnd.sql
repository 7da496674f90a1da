-- The contract's tables (docs/contract.md section 1). Bijhouding may have created them already, so
-- every statement tolerates an existing object.
create table if not exists admhnd (
    id        bigint      primary key,
    soort     text        not null,
    tsreg     timestamptz not null,
    tslev     timestamptz null,
    statuslev text        null
        constraint admhnd_statuslev_check check (statuslev in ('in_levering', 'geleverd', 'fout'))
);

create table if not exists admhnd_persoon (
    admhnd_id  bigint not null references admhnd (id),
    persoon_id bigint not null,
    primary key (admhnd_id, persoon_id)
);

-- Columns of the service's own.
-- tspub: when the publisher last put the handeling on the publication queue (redelivery timeout).
-- foutreden: why a handeling ended in 'fout', for operators.
alter table admhnd add column if not exists tspub timestamptz null;
alter table admhnd add column if not exists foutreden text null;

-- The publisher's selection reads only open work; partial indexes keep its cost independent of
-- the delivered history. Built concurrently: bijhouding keeps registering meanwhile.
-- brp:outside-transaction
create index concurrently if not exists admhnd_te_leveren_idx on admhnd (tsreg, id) where statuslev is null;
create index concurrently if not exists admhnd_in_levering_idx on admhnd (id) where statuslev = 'in_levering';
create index concurrently if not exists admhnd_fout_idx on admhnd (id) where statuslev = 'fout';
create index concurrently if not exists admhnd_persoon_persoon_idx on admhnd_persoon (persoon_id, admhnd_id);
