-- Verzendingen that may be on the verzending queue while their handeling is still in levering.
-- A consumer sends a batch's verzending messages before it commits the batch: a consumer killed
-- between its broker commit and its database commit (or whose database is lost then) leaves a
-- first copy out for a handeling the database has back in levering, and a late arrival of an
-- older handeling of its persons must then not be delivered after it. So the consumer records
-- the handelingen it is about to send, committed before its broker commit, and removes them in
-- the transaction that sets them geleverd. A record that stays says a copy may be out: the
-- handeling is delivered again however it is checked, and an older handeling of its persons is
-- overtaken (docs/robustness.md, Order at the consumer).
--
-- The release before neither writes nor reads it (docs/operations.md, Upgrade).

create table if not exists levering_onderweg (
    admhnd_id bigint      primary key,
    sinds     timestamptz not null default now()
);
