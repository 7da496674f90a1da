-- What the release before this one reads under its own names (kern migration 0009;
-- definitions/contract/previous_release.sql says why).
create or replace view brp_levering.publicatie_toestand with (security_invoker = true) as
    select singleton as enig, margin as marge, max_lead as grens, low_margin as laag,
           high_margin as hoog, margins_until as sinds, sleeping as slaapt, max_wait,
           high_margin_until as hoog_tot, lead_sample_rate, lead_sample_until,
           held_handelingen, held_personen, held_counted_at
    from brp_levering.publicatie_state;
