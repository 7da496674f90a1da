-- Sets the margin ($1 seconds), its bound ($2), the wait bound ($4) and the rate ($5) at which
-- the registration trigger samples leads, for $6 seconds from now. When the margin changes, it
-- keeps the lowest and the highest margin in force since the last change that is less than $3
-- seconds old, until $3 seconds from now (sinds); a lowering leaves hoog_tot to be dated by
-- the next round ('infinity'), which sets it to its own start (after this commit). The
-- expressions read the row as it was.
update publicatie_toestand set
    laag = case when make_interval(secs => $1) = marge then laag
        else least(marge, make_interval(secs => $1), case when sinds > now() then laag else marge end) end,
    hoog = case when make_interval(secs => $1) = marge then hoog
        else greatest(marge, make_interval(secs => $1), case when sinds > now() then hoog else marge end) end,
    sinds = case when make_interval(secs => $1) = marge then sinds
        else clock_timestamp() + make_interval(secs => $3) end,
    hoog_tot = case when make_interval(secs => $1) < marge then 'infinity'
        when hoog_tot = 'infinity' then now() else hoog_tot end,
    marge = make_interval(secs => $1), grens = make_interval(secs => $2), max_wait = make_interval(secs => $4),
    lead_sample_rate = $5, lead_sample_until = clock_timestamp() + make_interval(secs => $6)
