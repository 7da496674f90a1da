-- The publisher's shared state in one language (issue 50): publicatie_toestand, whose columns
-- mixed Dutch (marge, grens, laag, hoog, sinds, hoog_tot, slaapt, enig) with English (max_wait,
-- lead_sample_*, held_*), is publicatie_state with English names. sinds held an "until": it is
-- margins_until.
--
--   enig -> singleton, marge -> margin, grens -> max_lead, laag -> low_margin,
--   hoog -> high_margin, sinds -> margins_until, hoog_tot -> high_margin_until,
--   slaapt -> sleeping
--
-- The release before keeps running on this schema (docs/operations.md, Upgrade): a view under
-- the old name with the old column names (previous_release.sql, a definitions file) is what it
-- reads, updates and locks. It is created here too, in the rename's transaction, because the
-- functions of the release before name publicatie_toestand until migrate applies this
-- release's definitions, and a registration in between calls them. The view runs with its
-- caller's rights (security_invoker), and whoever had a right on the table gets it on the view:
-- nobody gains a right. The release after this one drops it.
--
-- What this release's definitions change: horizon.sql, registration.sql and status.sql read
-- the new names; previous_release.sql is new.

do $$
declare
    r record;
begin
    if to_regclass('publicatie_state') is not null then
        return;
    end if;
    alter table publicatie_toestand rename to publicatie_state;
    alter table publicatie_state rename column enig to singleton;
    alter table publicatie_state rename column marge to margin;
    alter table publicatie_state rename column grens to max_lead;
    alter table publicatie_state rename column laag to low_margin;
    alter table publicatie_state rename column hoog to high_margin;
    alter table publicatie_state rename column sinds to margins_until;
    alter table publicatie_state rename column hoog_tot to high_margin_until;
    alter table publicatie_state rename column slaapt to sleeping;
    create view publicatie_toestand with (security_invoker = true) as
        select singleton as enig, margin as marge, max_lead as grens, low_margin as laag,
               high_margin as hoog, margins_until as sinds, sleeping as slaapt, max_wait,
               high_margin_until as hoog_tot, lead_sample_rate, lead_sample_until,
               held_handelingen, held_personen, held_counted_at
        from publicatie_state;
    for r in
        select a.grantee::regrole::text as grantee, a.privilege_type
        from pg_class c, aclexplode(c.relacl) a
        where c.oid = 'publicatie_state'::regclass and a.grantee <> 0 and a.grantee <> c.relowner
            and a.privilege_type in ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
    loop
        execute format('grant %s on publicatie_toestand to %s', r.privilege_type, r.grantee);
    end loop;
end $$;
