-- Operator actions on fout handelingen (retry, release), each recorded with who and when.
-- vrijgegeven: an operator released this fout handeling: under the strict policy it no longer
-- holds back later handelingen of its persons.
alter table admhnd add column if not exists vrijgegeven timestamptz null;

create table if not exists admhnd_beheer (
    id          bigserial   primary key,
    admhnd_id   bigint      not null references admhnd (id),
    actie       text        not null check (actie in ('retry', 'release')),
    door        text        not null,
    op          timestamptz not null default now(),
    toelichting text        null
);
-- brp:outside-transaction
create index concurrently if not exists admhnd_beheer_admhnd_idx on admhnd_beheer (admhnd_id);
