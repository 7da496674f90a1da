-- Lowers the transaction's idle_in_transaction_session_timeout to $1 ms where the session's is
-- longer or off (a leader frozen inside a round must not hold its row locks for longer), and
-- turns JIT compilation off for the round: its statements are short, but with large
-- handelingen (or statistics that think so) the intake's estimate passed jit_above_cost and
-- every round spent its time compiling a 1 ms query.
select set_config('idle_in_transaction_session_timeout',
    (select case when setting::bigint = 0 then $1 else least(setting::bigint, $1) end
     from pg_settings where name = 'idle_in_transaction_session_timeout')::text, true),
    set_config('jit', 'off', true)
