package setup

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// checkBounds enforces the max tag of every numeric setting in cfg (a pointer to a struct with
// envconfig tags, embedded structs included; a bound pointer counts as its value): a count
// (max:"100000") or a duration (max:"1h"). A value past it would not fail at start but later,
// or never work (a prefetch of 2^63 is a channel that cannot be made): it is a bad value,
// exit 2 naming the variable.
func checkBounds(cfg any) error {
	for f, fv := range variables(reflect.ValueOf(cfg).Elem()) {
		max, ok := f.Tag.Lookup("max")
		name := f.Tag.Get("envconfig")
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		if !ok {
			continue
		}
		if d, err := time.ParseDuration(max); err == nil && fv.Kind() == reflect.Int64 {
			if got := time.Duration(fv.Int()); got > d {
				return fmt.Errorf("%w: %s=%s: expected at most %s", ErrConfig, name, got, d)
			}
			continue
		}
		n, err := strconv.ParseInt(max, 10, 64)
		if err != nil {
			return fmt.Errorf("setup: %s: bad max tag %q", name, max)
		}
		if got := fv.Int(); got > n {
			return fmt.Errorf("%w: %s=%d: expected at most %d", ErrConfig, name, got, n)
		}
	}
	return nil
}

// numeric reports whether a setting of type t (or what t points to) is numeric, so needs a
// max tag (TestEveryNumericSettingHasABound).
func numeric(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// Unbounded names the numeric settings of cfg (a pointer to a struct with envconfig tags)
// that have no max tag: each must have one.
func Unbounded(cfg any) []string {
	var out []string
	for f := range variables(reflect.ValueOf(cfg).Elem()) {
		if _, ok := f.Tag.Lookup("max"); !ok && numeric(f.Type) {
			out = append(out, f.Tag.Get("envconfig"))
		}
	}
	return out
}
