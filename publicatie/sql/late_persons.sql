-- Empties publicatie_laat_personen (persons added to a handeling after it was delivered,
-- migration 0011) and migration 0009's publicatie_ingehaald, and returns their handelingen.
with a as (delete from publicatie_laat_personen returning admhnd_id),
b as (delete from publicatie_ingehaald returning admhnd_id)
select admhnd_id from a union select admhnd_id from b order by 1
