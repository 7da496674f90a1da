package handeling_test

import (
	"slices"
	"testing"

	"github.com/brp/levering/handeling"
)

// A layout's parsing and what follows from it: its statement directory, its sessions'
// search_path and its default exclusion.
func TestLayout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in         string
		want       handeling.Layout
		dir, path  string
		excluded   []string
		bad, valid bool
	}{
		{in: "", want: handeling.Contract, excluded: []string{handeling.InitieleVulling}, valid: true},
		{in: "contract", want: handeling.Contract, excluded: []string{handeling.InitieleVulling}, valid: true},
		{in: "kern", want: handeling.Kern, dir: "kern", path: handeling.ServiceSchema,
			excluded: []string{handeling.KernInitieleVulling}, valid: true},
		{in: "Kern", bad: true},
		{in: "kernel", bad: true},
		{in: " kern", bad: true},
	} {
		l, err := handeling.ParseLayout(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseLayout(%q) = %q, want an error", tc.in, l)
			}
			if handeling.Layout(tc.in).Valid() {
				t.Errorf("Layout(%q).Valid() is true", tc.in)
			}
			continue
		}
		if err != nil || l != tc.want {
			t.Errorf("ParseLayout(%q) = %q, %v; want %q", tc.in, l, err, tc.want)
			continue
		}
		raw := handeling.Layout(tc.in) // the zero value behaves as Contract
		if raw.Valid() != tc.valid || raw.Or() != tc.want || raw.Dir() != tc.dir || raw.SearchPath() != tc.path ||
			!slices.Equal(raw.DefaultExcluded(), tc.excluded) || !raw.IsDefaultExcluded(tc.excluded) {
			t.Errorf("Layout(%q): valid %v, or %q, dir %q, search_path %q, excluded %v",
				tc.in, raw.Valid(), raw.Or(), raw.Dir(), raw.SearchPath(), raw.DefaultExcluded())
		}
	}
	if handeling.Kern.IsDefaultExcluded([]string{handeling.InitieleVulling}) {
		t.Error("the contract's excluded soort is the kern layout's default exclusion")
	}
}

// LoadPerLayout loads once per layout, and For serves the zero layout Contract's.
func TestLoadPerLayout(t *testing.T) {
	t.Parallel()
	calls := 0
	p := handeling.LoadPerLayout(func(l handeling.Layout) string { calls++; return string(l) })
	if calls != len(handeling.Layouts) || p.For("") != "contract" || p.For(handeling.Kern) != "kern" {
		t.Errorf("%d loads, For(\"\") %q, For(kern) %q", calls, p.For(""), p.For(handeling.Kern))
	}
}
