-- Lowers the transaction's idle_in_transaction_session_timeout to $1 ms where the session's is
-- longer or off (a leader frozen inside a round must not hold its row locks for longer), and
-- turns JIT compilation off for the round: its statements are short, but with large
-- handelingen (or statistics that think so) the intake's estimate passed jit_above_cost and
-- every round spent its time compiling a 1 ms query. The session's setting is read with
-- current_setting (its value with a unit, "10s", which reads as an interval), not from
-- pg_settings: that view builds a row for every setting of the server, a twelfth of the
-- leader's database time in a round beside a CPU hog (docs/performance.md).
select set_config('idle_in_transaction_session_timeout',
    (select case when s.ms = 0 then $1 else least(s.ms, $1) end
     from (select (extract(epoch from current_setting('idle_in_transaction_session_timeout')::interval) * 1000)::bigint as ms) s)::text, true),
    set_config('jit', 'off', true)
