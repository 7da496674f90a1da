-- Sets fout, with the reason $1, the handelingen still to be delivered ($2: the excluded
-- soorten) whose tsreg lies outside the accepted range, and returns their ids: two probes of
-- the index of open work, at its two ends ('-infinity' sorts first, 'infinity' last).
update admhnd set statuslev = 'fout', foutreden = $1
where publicatie_to_deliver(statuslev, soort, $2::text[]) and not publicatie_tsreg_accepted(tsreg)
returning id
