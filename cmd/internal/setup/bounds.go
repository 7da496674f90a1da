package setup

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// checkBounds enforces the max tag of every numeric setting in cfg (a pointer to a struct with
// envconfig tags, embedded structs included): a count (max:"100000") or a duration
// (max:"1h"). A value past it would not fail at start but later, or never work (a prefetch of
// 2^63 is a channel that cannot be made): it is a bad value, exit 2 naming the variable.
func checkBounds(cfg any) error {
	return boundsOf(reflect.ValueOf(cfg).Elem())
}

func boundsOf(v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && fv.Kind() == reflect.Struct {
			if err := boundsOf(fv); err != nil {
				return err
			}
			continue
		}
		max, ok := f.Tag.Lookup("max")
		name := f.Tag.Get("envconfig")
		if !ok || name == "" {
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

// Numeric reports whether a field of a settings struct is numeric, so needs a max tag
// (TestEveryNumericSettingHasABound).
func Numeric(f reflect.StructField) bool {
	switch f.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// Unbounded names the numeric settings of cfg (a struct with envconfig tags) that have no max
// tag: each must have one.
func Unbounded(cfg any) []string {
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if _, ok := f.Tag.Lookup("max"); !ok && f.Tag.Get("envconfig") != "" && Numeric(f) {
				out = append(out, f.Tag.Get("envconfig"))
			}
		}
	}
	walk(reflect.TypeOf(cfg))
	return out
}
