-- An operator's retry of fout handeling $1: back to be delivered in its (tsreg, id) place.
update admhnd set statuslev = null, foutreden = null, vrijgegeven = null, tspub = null
where id = $1
