// Package setup is what both commands share at start: the environment (the contract's names,
// every setting declared once, every bad value reported with its variable; vars.go), the
// logger, the database wait, the loopback HTTP listener for status, health and metrics, and
// the start-up sequence of a long-running command (Start.Run).
package setup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/backoff"
	"github.com/brp/levering/internal/dbsession"
)

// Common holds the settings of both commands. The defaults in its tags are the commands' own
// (no package has them); the broker settings whose defaults package broker owns are
// BrokerVars.
type Common struct {
	DatabaseURL   DatabaseURL `envconfig:"BRP_DATABASE_URL" default:"postgres://postgres@127.0.0.1:55432/brp?sslmode=disable"`
	StompAddr     BrokerAddrs `envconfig:"BRP_STOMP_ADDR" default:"127.0.0.1:61613"`
	StompLogin    string      `envconfig:"BRP_STOMP_LOGIN"`
	StompPasscode string      `envconfig:"BRP_STOMP_PASSCODE"`
	StompHost     string      `envconfig:"BRP_STOMP_HOST"`
	StompTLS      Bool        `envconfig:"BRP_STOMP_TLS" default:"false"`
	StompTLSCA    string      `envconfig:"BRP_STOMP_TLS_CA"`
	StompTLSCert  string      `envconfig:"BRP_STOMP_TLS_CERT"`
	StompTLSKey   string      `envconfig:"BRP_STOMP_TLS_KEY"`
	// Layout is which tables hold the handelingen: contract or kern (docs/contract.md section 1).
	Layout    Layout    `envconfig:"BRP_DATABASE_LAYOUT" default:"contract"`
	LogFormat LogFormat `envconfig:"BRP_LOG_FORMAT" default:"auto"`
	LogLevel  LogLevel  `envconfig:"BRP_LOG_LEVEL" default:"info" max:"8"` // a slog level: error is 8
	// The bounds of every database session (package dbsession); 0 turns one off.
	StatementTimeout Duration `envconfig:"BRP_DATABASE_STATEMENT_TIMEOUT" default:"30s" max:"24h"`
	LockTimeout      Duration `envconfig:"BRP_DATABASE_LOCK_TIMEOUT" default:"5s" max:"1h"`
	IdleTimeout      Duration `envconfig:"BRP_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT" default:"10s" max:"24h"`
	TCPUserTimeout   Duration `envconfig:"BRP_TCP_USER_TIMEOUT" default:"20s" max:"1h"`
	// Secrets from files (a Kubernetes Secret mounted read-only), instead of the environment.
	DatabasePasswordFile string `envconfig:"BRP_DATABASE_PASSWORD_FILE"`
	StompPasscodeFile    string `envconfig:"BRP_STOMP_PASSCODE_FILE"`
}

// readSecrets puts the secrets of the *_FILE variables in their place: the password into the
// database URL (which must then carry none), the passcode beside the login.
func (c *Common) readSecrets() error {
	read := func(name, path string) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("%w: %s=%q: expected a readable file holding the secret: %v", ErrConfig, name, path, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if c.DatabasePasswordFile != "" {
		pw, err := read("BRP_DATABASE_PASSWORD_FILE", c.DatabasePasswordFile)
		if err != nil {
			return err
		}
		u, err := withPassword(string(c.DatabaseURL), pw)
		if err != nil {
			return fmt.Errorf("%w: BRP_DATABASE_URL, BRP_DATABASE_PASSWORD_FILE: %v", ErrConfig, err)
		}
		c.DatabaseURL = DatabaseURL(u)
	}
	if c.StompPasscodeFile != "" {
		if c.StompPasscode != "" {
			return fmt.Errorf("%w: BRP_STOMP_PASSCODE, BRP_STOMP_PASSCODE_FILE: expected one of them, not both", ErrConfig)
		}
		pc, err := read("BRP_STOMP_PASSCODE_FILE", c.StompPasscodeFile)
		if err != nil {
			return err
		}
		c.StompPasscode = pc
	}
	return nil
}

// withPassword adds pw to a database URL or key=value string that carries no password.
func withPassword(dsn, pw string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("expected a PostgreSQL URL")
		}
		if _, set := u.User.Password(); set {
			return "", errors.New("expected the password in one of them, not both")
		}
		u.User = url.UserPassword(u.User.Username(), pw)
		return u.String(), nil
	}
	if kvPassword.MatchString(dsn) {
		return "", errors.New("expected the password in one of them, not both")
	}
	return dsn + " password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'", nil
}

var kvPassword = regexp.MustCompile(`(?i)(^|\s)password\s*=`)

// Session returns the bounds of command's database sessions.
func (c Common) Session(command string) dbsession.Settings {
	return dbsession.Settings{
		Command:                  command,
		StatementTimeout:         time.Duration(c.StatementTimeout),
		LockTimeout:              time.Duration(c.LockTimeout),
		IdleInTransactionTimeout: time.Duration(c.IdleTimeout),
		TCPUserTimeout:           time.Duration(c.TCPUserTimeout),
		SearchPath:               handeling.Layout(c.Layout).SearchPath(),
	}
}

// ErrConfig marks a bad environment value: the commands exit 2 on it.
var ErrConfig = errors.New("invalid configuration")

// Broker is cfg (what BrokerVars set in it: zero fields take package broker's defaults) with
// the broker settings: its nodes, credentials, TLS and the TCP user timeout.
func (c Common) Broker(cfg broker.Config) (broker.Config, error) {
	cfg.Addr, cfg.Login, cfg.Passcode, cfg.Host = string(c.StompAddr), c.StompLogin, c.StompPasscode, c.StompHost
	cfg.TCPUserTimeout = time.Duration(c.TCPUserTimeout)
	if (c.StompTLSCert == "") != (c.StompTLSKey == "") {
		return cfg, fmt.Errorf("%w: BRP_STOMP_TLS_CERT and BRP_STOMP_TLS_KEY: expected both (a client certificate and its key) or neither", ErrConfig)
	}
	if c.StompTLS || c.StompTLSCA != "" || c.StompTLSCert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.StompTLSCert != "" {
			cert, err := tls.LoadX509KeyPair(c.StompTLSCert, c.StompTLSKey)
			if err != nil {
				return cfg, fmt.Errorf("%w: BRP_STOMP_TLS_CERT=%q, BRP_STOMP_TLS_KEY=%q: expected readable PEM files of a client certificate and its key: %v",
					ErrConfig, c.StompTLSCert, c.StompTLSKey, err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if c.StompTLSCA != "" {
			pem, err := os.ReadFile(c.StompTLSCA)
			if err != nil {
				return cfg, fmt.Errorf("%w: BRP_STOMP_TLS_CA=%q: expected a readable PEM file with CA certificates: %v", ErrConfig, c.StompTLSCA, err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("%w: BRP_STOMP_TLS_CA=%q: expected a PEM file with certificates", ErrConfig, c.StompTLSCA)
			}
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

// Logger builds the process logger: JSON, or text when format is text or (auto) stderr is a
// terminal.
func (c Common) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.Level(c.LogLevel), ReplaceAttr: replaceAttr}
	text := c.LogFormat == "text"
	if c.LogFormat == "auto" {
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				text = true
			}
		}
	}
	if text {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// OpenDB opens the database with sessions bounded by s and waits, logging, until it answers
// or ctx ends. A first answer that says the setting can never work (permanentDBError) is an
// ErrConfig naming BRP_DATABASE_URL.
func OpenDB(ctx context.Context, url DatabaseURL, s dbsession.Settings, log *slog.Logger) (*sqlx.DB, error) {
	db, err := dbsession.Open(string(url), s)
	if err != nil {
		return nil, fmt.Errorf("%w: BRP_DATABASE_URL: %s", ErrConfig, dbsession.Redact(err.Error()))
	}
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(20)
	db.SetConnMaxIdleTime(5 * time.Minute)
	retry := backoff.New(200*time.Millisecond, 5*time.Second)
	var last error // the last failure before ctx ended: the ping that ctx cut off only says so
	for logged := false; ; {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = db.PingContext(pctx)
		cancel()
		if err == nil {
			if logged {
				log.Info("database available")
			}
			return db, nil
		}
		if ctx.Err() != nil {
			db.Close()
			if last == nil {
				last = err
			}
			return nil, fmt.Errorf("database not reachable (%w); last error: %s", ctx.Err(), dbsession.Redact(last.Error()))
		}
		last = err
		if !logged {
			if permanentDBError(err) {
				db.Close()
				return nil, fmt.Errorf("%w: BRP_DATABASE_URL: %s", ErrConfig, dbsession.Redact(err.Error()))
			}
			log.Warn("database unavailable, waiting", slog.Any("error", err))
			logged = true
		}
		_ = retry.Wait(ctx) // an ended ctx is seen after the next ping
	}
}

// checkBroker connects to the broker once at start: a broker that refuses the login (or the
// virtual host) is a setting that can never work, an ErrConfig naming the variables; a broker
// that is not there yet is left to the command, which waits for it.
func checkBroker(ctx context.Context, cfg broker.Config, log *slog.Logger) error {
	d, err := broker.NewDialer(cfg)
	if err != nil {
		return fmt.Errorf("%w: BRP_STOMP_ADDR: %v", ErrConfig, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a refusal comes at once
	defer cancel()
	c, err := d.Dial(ctx)
	switch {
	case err == nil:
		c.Disconnect()
	case errors.Is(err, broker.ErrRefused):
		return fmt.Errorf("%w: BRP_STOMP_LOGIN, BRP_STOMP_PASSCODE, BRP_STOMP_HOST: %s", ErrConfig, dbsession.Redact(err.Error()))
	default:
		log.Warn("broker unavailable at start, waiting", slog.Any("error", err))
	}
	return nil
}

// permanentDBError tells, for the first connection of a process, a setting that can never
// work (no such database or role, a refused password, a bad sslmode, an unreadable or wrong
// certificate) from a database that is merely not there yet (refused, unreachable, starting
// up, a DNS name not yet known), which is waited for. Only the first attempt is judged: once
// a setting has worked, every failure is waited out.
func permanentDBError(err error) bool {
	var pe *pq.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case "3D000", // invalid_catalog_name: no such database
			"28000", // invalid_authorization_specification: no such role, or pg_hba refuses
			"28P01": // invalid_password
			return true
		}
		return false
	}
	var pathErr *fs.PathError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr x509.CertificateInvalidError
	if errors.As(err, &pathErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &certErr) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "sslmode") || strings.Contains(msg, "SSL is not enabled on the server") ||
		strings.Contains(msg, "certificate") || strings.Contains(msg, "private key")
}

// Main is a command's main: it runs run under SIGINT and SIGTERM (they end its context) on
// one thread (oneThread), prints its error, with no secret in it, as "command: error" on
// stderr, and exits with code(err).
func Main(command string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error, code func(error) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	oneThread()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", command, dbsession.Redact(err.Error()))
	}
	os.Exit(code(err))
}

// oneThread makes the Go runtime run Go code on one OS thread at a time, unless the
// GOMAXPROCS environment variable says otherwise. Both commands mostly wait for the database
// and the broker; with more threads every hand-over between goroutines (frame reader, worker,
// writer) wakes another thread, and those wake-ups cost more CPU than the parallelism gains
// (the benchmark, 4 consumer processes on 2 CPUs: about a fifth less CPU in the consumers and
// 5% more throughput). mutatielevering scales out by running more processes.
func oneThread() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
