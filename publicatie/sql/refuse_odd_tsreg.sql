-- Sets fout, with the reason $1, the handelingen still to be delivered ($2: the excluded
-- soorten) whose tsreg lies outside the accepted range, and returns their ids: two probes of the
-- index of open work, at its two ends ('-infinity' sorts first, 'infinity' last). Written as one
-- condition, "not publicatie_tsreg_accepted(tsreg)", the planner walked all open work through
-- that index and filtered it when its statistics said it was nearly empty. The update finds the
-- rows by their ids (an array, an InitPlan) and checks the rule again on each;
-- "(array[statuslev])[1]" (statuslev of its own type, text or a bijhouding's enum, in a form the
-- planner does not simplify) keeps it from matching the index of open work there.
update admhnd set statuslev = 'fout', foutreden = $1
where id = any(array(
        select id from admhnd where statuslev is null and tsreg < publicatie_tsreg_from()
        union all
        select id from admhnd where statuslev is null and tsreg >= publicatie_tsreg_until()))
  and publicatie_to_deliver((array[statuslev])[1], soort, $2::text[]) and not publicatie_tsreg_accepted(tsreg)
returning id
