-- Locks a batch's rows ($1) in id order, so that two workers holding copies of the same
-- handelingen cannot deadlock. It is a statement of its own: a statement's snapshot is taken
-- when it starts, and persons another transaction committed while this one waited for a row
-- (the insert's foreign key, or migration 0011's trigger, holds the handeling's row) must be
-- seen by the check that follows (check.sql).
select id from admhnd where id = any($1) order by id for update
