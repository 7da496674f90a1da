-- Wake the publisher when work appears (bijhouding inserts) or a slot frees up (a consumer
-- sets geleverd or fout). Statement-level, so a bulk insert notifies once; PostgreSQL folds
-- identical notifications of one transaction into one.
create or replace function brp_levering_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('brp_levering', '');
    return null;
end $$;

drop trigger if exists admhnd_notify_insert on admhnd;
create trigger admhnd_notify_insert after insert on admhnd
    for each statement execute function brp_levering_notify();

drop trigger if exists admhnd_notify_status on admhnd;
create trigger admhnd_notify_status after update of statuslev on admhnd
    for each statement execute function brp_levering_notify();
