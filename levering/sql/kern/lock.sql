-- lock.sql on the kern layout: locks a batch's rows ($1) in id order (see lock.sql of the
-- contract layout). A his row inserted for one of them (its foreign key holds the handeling's
-- row) is seen by the check that follows.
select id from kern.admhnd where id = any($1) order by id for update
