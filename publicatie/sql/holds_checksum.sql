-- Count and xor of the ids of the unreleased fout handelingen, for the sweep.
select count(*), coalesce(bit_xor(id), 0) from admhnd where publicatie_unreleased_fout(statuslev, vrijgegeven)
