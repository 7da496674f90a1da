package handeling

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// IDHeader is the header that carries a handeling's id on the publication and verzending
// queues: the afnemers' dedup key (CONTRACT.md section 3).
const IDHeader = "admhnd-id"

// IDHeaders returns a message's headers for handeling id: {IDHeader: id}.
func IDHeaders(id int64) map[string]string {
	return map[string]string{IDHeader: strconv.FormatInt(id, 10)}
}

// ParseID reads an IDHeader value: 0 when it is empty or not a number.
func ParseID(v string) int64 {
	id, _ := strconv.ParseInt(v, 10, 64)
	return id
}

// Publication is the body of a message on the publication queue (CONTRACT.md section 3):
// the handeling and all of its persons.
type Publication struct {
	ID       int64   `json:"id"`
	Personen []int64 `json:"personen"`
}

// ErrNoID is wrapped by DecodePublication's error for a body without an id.
var ErrNoID = errors.New("publication has no id")

// DecodePublication reads a publication body. A body that is not a JSON object of this form
// gives an error wrapping encoding/json's (whose messages may quote a value: a persoon id);
// one without "id" an error wrapping ErrNoID.
func DecodePublication(body []byte) (Publication, error) {
	// Publication with the id as a pointer, so that a missing (or null) id is nil. Not
	// Publication embedded: encoding/json would then name a misfit field
	// "Publication.personen" in its error, and that text is the brp-reason of a set-aside one.
	var p struct {
		ID       *int64  `json:"id"`
		Personen []int64 `json:"personen"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Publication{}, fmt.Errorf("decode publication: %w", err)
	}
	if p.ID == nil {
		return Publication{}, fmt.Errorf("decode publication: %w", ErrNoID)
	}
	return Publication{ID: *p.ID, Personen: p.Personen}, nil
}
