-- What the release before this one reads under its own names (migration 0022): the publisher's
-- shared state as publicatie_toestand with its Dutch column names, so that during a rolling
-- upgrade the release before keeps running on this schema. With its caller's rights
-- (security_invoker): whoever may read or update it may do so on publicatie_state already.
-- The release after this one drops it.
create or replace view publicatie_toestand with (security_invoker = true) as
    select singleton as enig, margin as marge, max_lead as grens, low_margin as laag,
           high_margin as hoog, margins_until as sinds, sleeping as slaapt, max_wait,
           high_margin_until as hoog_tot, lead_sample_rate, lead_sample_until,
           held_handelingen, held_personen, held_counted_at
    from publicatie_state;
