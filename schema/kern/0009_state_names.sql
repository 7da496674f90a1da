-- The publisher's shared state in one language: the contract layout's migration 0022, on the
-- service's table in brp_levering. Its comment says why, and what the view under the old name
-- is for (definitions/kern/previous_release.sql).

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
