-- Sets the margin ($1 seconds), its bound ($2), the wait bound ($4) and the rate ($5) at which
-- the registration trigger samples leads, for $6 seconds from now. When the margin changes, it
-- keeps the lowest and the highest margin in force since the last change that is less than $3
-- seconds old, until $3 seconds from now (margins_until); a lowering leaves high_margin_until to
-- be dated by the next round ('infinity'), which sets it to its own start (after this commit). The
-- expressions read the row as it was.
update publicatie_state set
    low_margin = case when make_interval(secs => $1) = margin then low_margin
        else least(margin, make_interval(secs => $1), case when margins_until > now() then low_margin else margin end) end,
    high_margin = case when make_interval(secs => $1) = margin then high_margin
        else greatest(margin, make_interval(secs => $1), case when margins_until > now() then high_margin else margin end) end,
    margins_until = case when make_interval(secs => $1) = margin then margins_until
        else clock_timestamp() + make_interval(secs => $3) end,
    high_margin_until = case when make_interval(secs => $1) < margin then 'infinity'
        when high_margin_until = 'infinity' then now() else high_margin_until end,
    margin = make_interval(secs => $1), max_lead = make_interval(secs => $2), max_wait = make_interval(secs => $4),
    lead_sample_rate = $5, lead_sample_until = clock_timestamp() + make_interval(secs => $6)
