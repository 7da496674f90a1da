package broker

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/brp/levering/internal/setting"
)

// Config says how to reach the broker.
type Config struct {
	// Addr is host:port of the broker's STOMP listener, or a comma-separated list of them:
	// the nodes of a master/slave pair or of a network of brokers, tried in turn (Dialer).
	// Required.
	Addr string
	// RandomStart makes a Dialer start at a random node of Addr instead of the first, so that
	// the processes of one command spread over a network of brokers. Either way a Dialer
	// then stays with the node that answered until its connection is lost.
	RandomStart bool
	// Login and Passcode are the broker credentials; empty means none.
	Login, Passcode string
	// Host is the STOMP virtual host; empty means the broker's default.
	Host string
	// TLS, when non-nil, wraps the connection in TLS. Without a ServerName, each node's
	// certificate is checked against that node's host.
	TLS *tls.Config
	// HeartBeat is the STOMP heart-beat interval promised in both directions: this side
	// writes at least every HeartBeat/2 and drops a connection on which the broker sent
	// nothing for 3 x HeartBeat; ActiveMQ and RabbitMQ drop a client that sent nothing for
	// 3 x HeartBeat (measured; conformance_test.go). So either side notices a frozen or
	// cut-off peer within 3 x HeartBeat. Zero takes DefaultHeartBeat; negative turns
	// heart-beats off (then only TCP keepalive notices a dead peer, and a frozen one never).
	HeartBeat time.Duration
	// OpTimeout bounds every wait for the broker: dialling, a receipt, a commit, a socket
	// write. Default DefaultOpTimeout.
	OpTimeout time.Duration
	// TCPUserTimeout drops a connection whose data stays unacknowledged, or whose peer stays
	// silent, for about this long (package tcp). Zero leaves the system defaults.
	TCPUserTimeout time.Duration
}

// DefaultOpTimeout is Config.OpTimeout's default.
const DefaultOpTimeout = 30 * time.Second

// DefaultHeartBeat is Config.HeartBeat's default: a frozen consumer's publications go back to
// the queue within 15 s.
const DefaultHeartBeat = 5 * time.Second

// errConfig is returned for an invalid Config.
var errConfig = errors.New("broker: invalid config")

// WithDefaults returns c with every zero field set to its default, as NewDialer uses it.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.HeartBeat == 0 {
		c.HeartBeat = DefaultHeartBeat
	}
}

func (c Config) validate() error {
	if _, err := ParseAddrs(c.Addr); err != nil {
		return setting.Invalid(errConfig, "Addr", c.Addr, "%v", err)
	}
	return c.validateSettings()
}

// validateSettings checks every field but Addr.
func (c Config) validateSettings() error {
	switch {
	case c.OpTimeout < 0 || c.OpTimeout > MaxOpTimeout:
		return setting.Invalid(errConfig, "OpTimeout", c.OpTimeout, "expected a duration of at most %v", MaxOpTimeout)
	case c.TCPUserTimeout < 0:
		return setting.Invalid(errConfig, "TCPUserTimeout", c.TCPUserTimeout, "expected a positive duration")
	case c.HeartBeat > 0 && c.HeartBeat < MinHeartBeat || c.HeartBeat > MaxHeartBeat:
		return setting.Invalid(errConfig, "HeartBeat", c.HeartBeat, "expected off or a duration from %v to %v", MinHeartBeat, MaxHeartBeat)
	}
	return nil
}

// Validate reports the first field of c (with its defaults) that a Dialer would refuse, as a
// *setting.Error naming the field. An empty Addr passes here: a package's Config holds a
// broker Config it dials later, and NewDialer refuses it then.
func (c Config) Validate() error {
	c.setDefaults()
	if c.Addr == "" {
		return c.validateSettings()
	}
	return c.validate()
}

// The bounds of Config's durations: a heart-beat below MinHeartBeat is refused by brokers
// (ActiveMQ Artemis raises it); beyond the maxima a dead broker would go unnoticed too long.
const (
	MinHeartBeat = 500 * time.Millisecond
	MaxHeartBeat = 10 * time.Minute
	MaxOpTimeout = 10 * time.Minute
)
