package handeling_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/brp/levering/handeling"
)

// The SQL literals are the statuses quoted, and NULL is TeLeveren both ways.
func TestStatusSQL(t *testing.T) {
	for lit, s := range map[string]handeling.Status{
		handeling.InLeveringSQL: handeling.InLevering, handeling.GeleverdSQL: handeling.Geleverd, handeling.FoutSQL: handeling.Fout,
	} {
		if lit != "'"+string(s)+"'" {
			t.Errorf("literal %s for status %q", lit, s)
		}
		if v, err := s.Value(); err != nil || v != string(s) {
			t.Errorf("%q.Value() = %v, %v", s, v, err)
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
	if got := handeling.BlocksSQL("$1"); got != "statuslev = 'in_levering' or ($1 and statuslev = 'fout' and vrijgegeven is null)" {
		t.Errorf("BlocksSQL: %s", got)
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
