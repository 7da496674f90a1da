//go:build !linux

package tcp

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; keepalive still applies.
func setUserTimeout(uintptr, time.Duration) error { return nil }
