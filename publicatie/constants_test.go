package publicatie

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/schema"
)

// The constants that the service's SQL shares with Go are Go's: the definitions files write
// them as literals, so that a reader can paste each file into psql, and this test holds every
// such literal of both layouts against the Go constant (issue 50). A check that finds none in
// a layout fails too: the SQL changed its wording, and the check must follow it.
func TestDefinitionsUseGosConstants(t *testing.T) {
	t.Parallel()
	duration := func(d time.Duration) func(string) bool {
		return func(lit string) bool {
			got, err := time.ParseDuration(strings.ReplaceAll(lit, " ", ""))
			return err == nil && got == d
		}
	}
	number := func(n int) func(string) bool {
		return func(lit string) bool { return lit == strconv.Itoa(n) }
	}
	checks := []struct {
		name string
		re   *regexp.Regexp
		ok   func(string) bool
	}{
		{"MaxWriterLocks (the bulk writer's threshold)", regexp.MustCompile(`(?:registered|taken \+ linked) > (\d+)`), number(MaxWriterLocks)},
		{"writerKeyModulus (a person's lock key)", regexp.MustCompile(`% (\d+)\)::integer`), number(writerKeyModulus)},
		{"LateWriterGrace (how long the horizon holds any transaction)", regexp.MustCompile(`xact_start (?:<|>=) interval '([^']+)'`), duration(LateWriterGrace)},
		{"half LateWriterGrace (a late writer's first registration)", regexp.MustCompile(`clock_timestamp\(\) - now\(\) <?[<>]=? interval '([^']+)'`), duration(LateWriterGrace / 2)},
		{"DefaultMaxWait (MAXWAIT before a leader set it)", regexp.MustCompile(`coalesce\(max\(max_wait\), '([^']+)'\)`), duration(DefaultMaxWait)},
	}
	for _, l := range []handeling.Layout{handeling.Contract, handeling.Kern} {
		defs, err := schema.DefinitionsOf(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			found := 0
			for _, d := range defs {
				for _, m := range c.re.FindAllStringSubmatch(d.SQL, -1) {
					found++
					if !c.ok(m[1]) {
						t.Errorf("%s/%s writes %s as %q", l, d.Name, c.name, m[1])
					}
				}
			}
			if found == 0 {
				t.Errorf("%s: no definitions file writes %s: its check must follow the SQL", l, c.name)
			}
		}
	}
}
