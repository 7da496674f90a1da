// Package tcp dials the service's TCP connections (broker and database) so that a peer that
// vanishes without closing the socket (a network partition, a host that is gone) is noticed
// within a stated time instead of Linux's default of two hours and more.
package tcp

import (
	"net"
	"syscall"
	"time"
)

// Dialer returns a dialer whose connections send keepalive probes after userTimeout/4 of
// silence, every userTimeout/4, and give up after three unanswered ones; and whose data may
// stay unacknowledged for at most userTimeout (TCP_USER_TIMEOUT, Linux) before the kernel
// drops the connection. Zero turns both off (the system defaults apply). Neither notices a
// frozen peer whose kernel still answers (SIGSTOP, a paused process): that takes application
// heart-beats or timeouts.
func Dialer(userTimeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if userTimeout <= 0 {
		return d
	}
	probe := KeepAliveInterval(userTimeout)
	d.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: probe, Interval: probe, Count: KeepAliveCount}
	d.Control = func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = setUserTimeout(fd, userTimeout) }); err != nil {
			return err
		}
		return serr
	}
	return d
}

// KeepAliveCount is how many keepalive probes may go unanswered.
const KeepAliveCount = 3

// KeepAliveInterval is the idle time before the first keepalive probe and between probes for
// userTimeout: a quarter of it, at least a second, so that a silent peer is dropped after
// about userTimeout.
func KeepAliveInterval(userTimeout time.Duration) time.Duration {
	return max(userTimeout/(KeepAliveCount+1), time.Second)
}
