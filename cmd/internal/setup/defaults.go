package setup

import (
	"fmt"
	"reflect"
)

// DefaultsDiffer compares the defaults that the environment struct cfg (a struct or a pointer
// to one, embedded structs included) writes in its struct tags with want (variable ->
// default) and returns one line per variable that differs. The commands' tests check with it
// that the literals Go needs in tags are the contract's defaults (package handeling).
func DefaultsDiffer(cfg any, want map[string]string) []string {
	got := map[string]string{}
	addDefaults(reflect.Indirect(reflect.ValueOf(cfg)).Type(), got)
	var out []string
	for v, w := range want {
		if got[v] != w {
			out = append(out, fmt.Sprintf("%s defaults to %q, want %q", v, got[v], w))
		}
	}
	return out
}

func addDefaults(t reflect.Type, out map[string]string) {
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			addDefaults(f.Type, out)
			continue
		}
		if d, ok := f.Tag.Lookup("default"); ok {
			out[f.Tag.Get("envconfig")] = d
		}
	}
}
