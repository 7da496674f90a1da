-- refuse_odd_tsreg.sql on the kern layout: sets fout (5), with the reason $1 in
-- admhnd_levering, the handelingen still to be delivered ($2: the excluded soorten by naam)
-- whose tsreg lies outside the accepted range, and returns their ids. Two probes of an index of
-- open work, at its two ends: written as one condition, "not publicatie_tsreg_accepted(tsreg)",
-- the planner walked all open work through kern's (tsreg) where statuslev = 1 and filtered it,
-- every round. The update finds the rows by their ids (an array, an InitPlan) and checks the rule
-- again on each; "statuslev + 0" keeps the planner from matching the index of open work there.
with o as (
    select id from kern.admhnd where statuslev = 1 and tsreg < publicatie_tsreg_from()
    union all
    select id from kern.admhnd where statuslev = 1 and tsreg >= publicatie_tsreg_until()
), f as (
    update kern.admhnd set statuslev = 5
    where id = any(array(select id from o))
      and publicatie_to_deliver((statuslev + 0)::smallint, srt, (select publicatie_srt_ids($2::text[])))
      and not publicatie_tsreg_accepted(tsreg)
    returning id
), r as (
    insert into admhnd_levering (admhnd_id, foutreden) select id, $1::text from f
    on conflict (admhnd_id) do update set foutreden = excluded.foutreden
)
select id from f
