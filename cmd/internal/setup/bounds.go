package setup

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// checkBounds enforces the bound of every numeric setting (an unset optional one has none to
// check): a count (max:"100000") or a duration (max:"1h"). A value past it would not fail at
// start but later, or never work (a prefetch of 2^63 is a channel that cannot be made): it is
// a bad value, exit 2 naming the variable.
func checkBounds(all []variable) error {
	for _, s := range all {
		fv := s.v
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		if !s.hasMax {
			continue
		}
		if d, err := time.ParseDuration(s.max); err == nil && fv.Kind() == reflect.Int64 {
			if got := time.Duration(fv.Int()); got > d {
				return fmt.Errorf("%w: %s=%s: expected at most %s", ErrConfig, s.name, got, d)
			}
			continue
		}
		n, err := strconv.ParseInt(s.max, 10, 64)
		if err != nil {
			return fmt.Errorf("setup: %s: bad max %q", s.name, s.max)
		}
		if got := fv.Int(); got > n {
			return fmt.Errorf("%w: %s=%d: expected at most %d", ErrConfig, s.name, got, n)
		}
	}
	return nil
}

// numeric reports whether a setting of type t (or what t points to) is numeric, so needs a
// bound (Unbounded).
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
