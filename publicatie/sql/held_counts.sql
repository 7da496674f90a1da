-- What the leader's view holds behind fout ($1 handelingen of $2 persons), for publicatie
-- status and the status page (migration 0017).
update publicatie_state set held_handelingen = $1, held_personen = $2, held_counted_at = now()
