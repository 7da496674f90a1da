package handeling_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/brp/levering/handeling"
)

// Scan and Value: NULL is TeLeveren both ways, text is taken as it is.
func TestStatusScanValue(t *testing.T) {
	for _, st := range []handeling.Status{handeling.InLevering, handeling.Geleverd, handeling.Fout} {
		if v, err := st.Value(); err != nil || v != string(st) {
			t.Errorf("%q.Value() = %v, %v", st, v, err)
		}
	}
	if v, err := handeling.TeLeveren.Value(); err != nil || v != nil {
		t.Errorf("TeLeveren.Value() = %v, %v; want NULL", v, err)
	}
	var s handeling.Status = handeling.Fout
	if err := s.Scan(nil); err != nil || s != handeling.TeLeveren {
		t.Errorf("Scan(NULL) = %q, %v", s, err)
	}
	if err := s.Scan([]byte("geleverd")); err != nil || s != handeling.Geleverd {
		t.Errorf("Scan(geleverd) = %q, %v", s, err)
	}
	if err := s.Scan(7); err == nil {
		t.Error("Scan(7) succeeded")
	}
}

// A publication encodes as the contract says, and decoding tells a missing id from bad JSON.
func TestPublication(t *testing.T) {
	body, err := json.Marshal(handeling.Publication{ID: 5, Personen: []int64{1, 2}})
	if err != nil || string(body) != `{"id":5,"personen":[1,2]}` {
		t.Fatalf("encoded %s, %v", body, err)
	}
	p, err := handeling.DecodePublication(body)
	if err != nil || p.ID != 5 || !slices.Equal(p.Personen, []int64{1, 2}) {
		t.Fatalf("decoded %+v, %v", p, err)
	}
	for _, b := range []string{`{"personen":[1]}`, `{"id":null}`} {
		if _, err := handeling.DecodePublication([]byte(b)); !errors.Is(err, handeling.ErrNoID) {
			t.Errorf("%s: %v, want ErrNoID", b, err)
		}
	}
	var te *json.UnmarshalTypeError
	if _, err := handeling.DecodePublication([]byte(`{"id":1,"personen":["x"]}`)); !errors.As(err, &te) || te.Field != "personen" {
		t.Errorf("a misfit person: %v, want a type error naming field personen", err)
	}
}

func TestDefaults(t *testing.T) {
	d := handeling.DefaultExcluded()
	if !handeling.IsDefaultExcluded(d) || handeling.IsDefaultExcluded(nil) || handeling.IsDefaultExcluded([]string{"X", handeling.InitieleVulling}) {
		t.Error("IsDefaultExcluded")
	}
	d[0] = "changed"
	if handeling.DefaultExcluded()[0] != handeling.InitieleVulling {
		t.Error("DefaultExcluded shares its slice")
	}
	if !handeling.Strict.Valid() || !handeling.Skip.Valid() || handeling.FoutPolicy("").Valid() {
		t.Error("FoutPolicy.Valid")
	}
}

// The rules in Go, case by case (rules_test.go holds them equal to the schema's functions).
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		s                             handeling.Status
		released, strict              bool
		blocks, unreleased, toDeliver bool
	}{
		{handeling.TeLeveren, false, true, false, false, true},
		{handeling.InLevering, false, true, true, false, false},
		{handeling.InLevering, false, false, true, false, false},
		{handeling.Geleverd, false, true, false, false, false},
		{handeling.Fout, false, true, true, true, false},
		{handeling.Fout, false, false, false, true, false},
		{handeling.Fout, true, true, false, false, false},
	} {
		if got := handeling.Blocks(tc.s, tc.released, tc.strict); got != tc.blocks {
			t.Errorf("Blocks(%q, released %v, strict %v) = %v", tc.s, tc.released, tc.strict, got)
		}
		if got := handeling.UnreleasedFout(tc.s, tc.released); got != tc.unreleased {
			t.Errorf("UnreleasedFout(%q, %v) = %v", tc.s, tc.released, got)
		}
		if got := handeling.ToDeliver(tc.s, "VERHUIZING", handeling.DefaultExcluded()); got != tc.toDeliver {
			t.Errorf("ToDeliver(%q) = %v", tc.s, got)
		}
	}
	if handeling.ToDeliver(handeling.TeLeveren, handeling.InitieleVulling, handeling.DefaultExcluded()) ||
		!handeling.ToDeliver(handeling.TeLeveren, handeling.InitieleVulling, []string{}) {
		t.Error("ToDeliver of the excluded soort")
	}
	for ts, want := range map[time.Time]bool{
		handeling.TsregFrom: true, handeling.TsregFrom.Add(-time.Nanosecond): false,
		handeling.TsregUntil: false, handeling.TsregUntil.Add(-time.Nanosecond): true,
		time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC): true, {}: false,
	} {
		if got := handeling.TsregAccepted(ts); got != want {
			t.Errorf("TsregAccepted(%v) = %v", ts, got)
		}
	}
}

// Publications encode as the contract says, a group with its later members in "volgende", and
// decode back to the same members; the admhnd-id header parses back to its id.
func TestPublicationRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []handeling.Member
		body    string
	}{
		{"one handeling", []handeling.Member{{ID: 5, Personen: []int64{1, 2}}}, `{"id":5,"personen":[1,2]}`},
		{"without persons", []handeling.Member{{ID: 6}}, `{"id":6,"personen":null}`},
		{"a group", []handeling.Member{{ID: 5, Personen: []int64{1}}, {ID: 9, Personen: []int64{1, 3}}},
			`{"id":5,"personen":[1],"volgende":[{"id":9,"personen":[1,3]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := json.Marshal(handeling.NewPublication(tc.members))
			if err != nil || string(body) != tc.body {
				t.Fatalf("encoded %s (%v), want %s", body, err, tc.body)
			}
			p, err := handeling.DecodePublication(body)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Members()
			if !slices.EqualFunc(got, tc.members, func(a, b handeling.Member) bool {
				return a.ID == b.ID && slices.Equal(a.Personen, b.Personen)
			}) {
				t.Fatalf("decoded %+v, want %+v", got, tc.members)
			}
			h := handeling.IDHeaders(tc.members[0].ID)
			if handeling.ParseID(h[handeling.IDHeader]) != tc.members[0].ID {
				t.Fatalf("header %v", h)
			}
		})
	}
	for _, bad := range []string{"", "x", "-1", "1.5", "99999999999999999999"} {
		if id := handeling.ParseID(bad); id > 0 && bad != "-1" {
			t.Errorf("ParseID(%q) = %d", bad, id)
		}
	}
}
