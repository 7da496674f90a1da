package publicatie

import (
	"errors"
	"fmt"
	"testing"
)

// Round failures are attributed to the dependency that failed, and only to it: an error of
// the publisher itself (a hook, an encoding) is neither the broker's nor the database's.
func TestRoundFailuresNameTheirDependency(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{dbErr(errors.New("relation admhnd does not exist")), "database"},
		{fmt.Errorf("round: %w", brokerErr(errors.New("connection refused"))), "broker"},
		{fmt.Errorf("encode publication 7: %w", errors.New("unsupported value")), "publicatie"},
	} {
		if got := dependency(c.err); got != c.want {
			t.Errorf("dependency(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
