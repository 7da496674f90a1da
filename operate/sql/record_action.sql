insert into admhnd_beheer (admhnd_id, actie, door, toelichting) values ($1, $2, $3, $4)
