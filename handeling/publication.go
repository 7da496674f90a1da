package handeling

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// IDHeader is the header that carries a handeling's id on the publication and verzending
// queues: the afnemers' dedup key (docs/contract.md section 3).
const IDHeader = "admhnd-id"

// IDHeaders returns a message's headers for handeling id: {IDHeader: id}.
func IDHeaders(id int64) map[string]string {
	return map[string]string{IDHeader: strconv.FormatInt(id, 10)}
}

// ParseID reads an IDHeader value: 0 when it is empty or not a number (out of range too).
func ParseID(v string) int64 {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// Publication is the body of a message on the publication queue (docs/contract.md section 3):
// the handeling and all of its persons, and the handelingen that travel with it (a group).
type Publication struct {
	ID       int64   `json:"id"`
	Personen []int64 `json:"personen"`
	// Volgende are later handelingen of the same persons that travel with this one: each is
	// the oldest open one of each of its persons once those before it are delivered, in
	// delivery order (tsreg, id). A consumer delivers them all in one transaction and sends
	// their verzending messages in that order in one broker transaction. Empty for a
	// publication of one handeling, which is then what it always was.
	Volgende []Member `json:"volgende,omitempty"`
}

// Member is one handeling of a publication.
type Member struct {
	ID       int64   `json:"id"`
	Personen []int64 `json:"personen"`
}

// Members returns the publication's handelingen in delivery order: the first, then Volgende.
func (p Publication) Members() []Member {
	return append([]Member{{ID: p.ID, Personen: p.Personen}}, p.Volgende...)
}

// NewPublication returns the publication of members, in delivery order (at least one).
func NewPublication(members []Member) Publication {
	p := Publication{ID: members[0].ID, Personen: members[0].Personen}
	if len(members) > 1 {
		p.Volgende = members[1:]
	}
	return p
}

// ErrNoID is wrapped by DecodePublication's error for a body without an id, or with a member
// of volgende without one.
var ErrNoID = errors.New("publication has no id")

// DecodePublication reads a publication body. A body that is not a JSON object of this form
// gives an error wrapping encoding/json's (whose messages may quote a value: a persoon id);
// one without "id" (also in a member of volgende) an error wrapping ErrNoID.
func DecodePublication(body []byte) (Publication, error) {
	// The ids as pointers, so that a missing (or null) id is nil. Not Publication embedded:
	// encoding/json would then name a misfit field "Publication.personen" in its error, and
	// that text is the brp-reason of a set-aside one.
	type member struct {
		ID       *int64  `json:"id"`
		Personen []int64 `json:"personen"`
	}
	var p struct {
		ID       *int64   `json:"id"`
		Personen []int64  `json:"personen"`
		Volgende []member `json:"volgende"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Publication{}, fmt.Errorf("decode publication: %w", err)
	}
	if p.ID == nil {
		return Publication{}, fmt.Errorf("decode publication: %w", ErrNoID)
	}
	out := Publication{ID: *p.ID, Personen: p.Personen}
	for _, m := range p.Volgende {
		if m.ID == nil {
			return Publication{}, fmt.Errorf("decode publication: volgende: %w", ErrNoID)
		}
		out.Volgende = append(out.Volgende, Member{ID: *m.ID, Personen: m.Personen})
	}
	return out, nil
}
