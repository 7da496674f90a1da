package handeling

import (
	"context"
	"fmt"

	"github.com/lib/pq"
)

// Held is what unreleased fout handelingen hold back under the strict policy (ReadHeld).
type Held struct {
	// Handelingen counts the handelingen still to be delivered that the publisher cannot
	// publish because of them, also through multi-person handelingen.
	Handelingen int64
	// Personen counts the distinct persons of those handelingen: who waits.
	Personen int64
}

// ReadHeld counts, in one statement, every handeling held back behind a fout: the number the
// publisher actually holds back under the strict policy (strict false, the skip policy: none),
// on the tables of layout l. excluded are the soorten not delivered, by the names they have in
// l; they never hold anyone.
//
// The rule is the publisher's. A person of an unreleased fout handeling is blocked (BlocksSQL:
// the publisher blocks persons, not places), so every open handeling of that person is held:
// still to be delivered (statuslev NULL; kern: 1) and its soort not excluded. A held handeling
// heads the queue of each of its persons and is not published, so it holds every later (tsreg,
// id) open handeling of each of them, and so on. Handelingen in levering are not counted: they
// are published, and what they hold up they hold up as in levering (the blocked persons show
// it).
//
// held.sql walks this as a recursion over persons, keeping for each only the earliest place
// from which it is held: a person is expanded again only when a place earlier than its known
// one is found, and a handeling's persons are read once per step however many held persons
// share it. Each step reads the handelingen of the persons it expands through admhnd_persoon's
// persoon index (kern: kern.his_persafgeleidadministrati's (pers, tsreg) index), so the cost
// grows with the held persons' handelingen, not with the table. Measured: a fout of 50,000
// persons followed by two more handelingen of all of them, 1.7 s; the common case (a fout, a
// few multi-person handelingen, their persons' queues) a few milliseconds.
func ReadHeld(ctx context.Context, q RowQueryer, l Layout, excluded []string, strict bool) (Held, error) {
	var h Held
	if !strict {
		return h, nil
	}
	if err := q.QueryRowContext(ctx, statementsFor(l).heldSQL, pq.Array(excluded)).Scan(&h.Handelingen, &h.Personen); err != nil {
		return Held{}, fmt.Errorf("read held behind fout: %w", err)
	}
	return h, nil
}
