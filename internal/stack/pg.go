package stack

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"
)

// pgUser is the OS user that runs PostgreSQL (initdb and postgres refuse root) and the
// database's superuser; the database is brp, trusted on loopback.
const pgUser = "postgres"

const pgWait = 30 * time.Second

// pgBinDir is the newest /usr/lib/postgresql/<version>/bin with initdb, pg_ctl and postgres.
func pgBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if exists(filepath.Join(dirs[i], "initdb")) && exists(filepath.Join(dirs[i], "pg_ctl")) && exists(filepath.Join(dirs[i], "postgres")) {
			return dirs[i], nil
		}
	}
	return "", errors.New("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// pgServer is one PostgreSQL server: the primary (dir pg) or the standby (dir pg-standby).
type pgServer struct {
	s    *stack
	base string
	port int
}

func (s *stack) primary() *pgServer {
	return &pgServer{s: s, base: filepath.Join(s.cfg.RunDir, "pg"), port: s.cfg.PGPort}
}

func (s *stack) standby() *pgServer {
	return &pgServer{s: s, base: filepath.Join(s.cfg.RunDir, "pg-standby"), port: s.cfg.StandbyPort}
}

func (p *pgServer) data() string    { return filepath.Join(p.base, "data") }
func (p *pgServer) logPath() string { return filepath.Join(p.base, "log", "postgres.log") }

// cmd runs a PostgreSQL program as the postgres OS user when root (initdb and postgres refuse
// root); otherwise as the caller.
func (p *pgServer) cmd(ctx context.Context, program string, args ...string) *exec.Cmd {
	bin, _ := pgBinDir()
	name := filepath.Join(bin, program)
	if os.Geteuid() == 0 {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", pgUser, "--", name}, args...)...)
	}
	return exec.CommandContext(ctx, name, args...)
}

func (p *pgServer) pgctl(ctx context.Context, args ...string) error {
	out, err := p.cmd(ctx, "pg_ctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (p *pgServer) running() bool {
	if _, err := pgBinDir(); err != nil || !exists(filepath.Join(p.data(), "PG_VERSION")) {
		return false
	}
	return p.cmd(context.Background(), "pg_ctl", "status", "-D", p.data()).Run() == nil
}

func (p *pgServer) ready() bool {
	return p.cmd(context.Background(), "pg_isready", "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-U", pgUser, "-d", "postgres").Run() == nil
}

// own gives paths to the postgres user when root.
func own(paths ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(pgUser)
	if err != nil {
		return fmt.Errorf("OS user %s does not exist (is the postgresql package installed?): %w", pgUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, path := range paths {
		if err := os.Chown(path, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// writeOwned writes a file the postgres user owns.
func writeOwned(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	return own(path)
}

// reachParents makes every parent of p.base searchable by others, so that the postgres user
// can reach it.
func (p *pgServer) reachParents() error {
	if os.Geteuid() != 0 {
		return nil
	}
	for d := filepath.Dir(p.base); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			p.s.logf("chmod o+x %s (so that %s can reach %s)", d, pgUser, p.base)
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepare makes the data directory (initdb when it holds no cluster) and writes the
// settings, rewritten on every start so that a changed port takes effect.
func (p *pgServer) prepare(ctx context.Context) error {
	sock, logDir := filepath.Join(p.base, "socket"), filepath.Dir(p.logPath())
	for _, d := range []string{p.base, p.data(), sock, logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := own(p.base, p.data(), sock, logDir); err != nil {
		return err
	}
	if err := p.reachParents(); err != nil {
		return err
	}
	if err := os.Chmod(p.data(), 0o700); err != nil {
		return err
	}
	if !exists(filepath.Join(p.data(), "PG_VERSION")) {
		if entries, _ := os.ReadDir(p.data()); len(entries) > 0 {
			return fmt.Errorf("%s is not empty but holds no cluster (no PG_VERSION); remove it and retry", p.data())
		}
		p.s.logf("postgres: initdb %s", p.data())
		out, err := p.cmd(ctx, "initdb", "-D", p.data(), "--auth=trust", "-U", pgUser, "-E", "UTF8", "--locale=C").CombinedOutput()
		if err != nil {
			return fmt.Errorf("initdb failed: %w\n%s", err, out)
		}
		f, err := os.OpenFile(filepath.Join(p.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString("\n# Settings of scripts/services.sh (rewritten on every start).\ninclude_if_exists = 'brp-dev.conf'\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return writeOwned(filepath.Join(p.data(), "brp-dev.conf"), fmt.Sprintf(`# Written by scripts/services.sh; changes are overwritten.
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 200
fsync = %[3]s
# up-pg-standby writes synchronous replication here (primary only); down-pg-standby removes it.
include_if_exists = 'brp-replication.conf'
`, p.port, sock, onOff(!p.s.cfg.PGNotDurable)))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

var addrInUse = regexp.MustCompile(`Address already in use`)

func (p *pgServer) start(ctx context.Context) error {
	if _, err := pgBinDir(); err != nil {
		return err
	}
	if p.running() {
		p.s.logf("postgres: already running on 127.0.0.1:%d", p.port)
	} else {
		if portOpen(p.port) {
			return fmt.Errorf("port 127.0.0.1:%d is taken by another process; stop it or set BRP_DEV_PG_PORT", p.port)
		}
		if err := p.prepare(ctx); err != nil {
			return err
		}
		p.s.logf("postgres: starting on 127.0.0.1:%d (log: %s)", p.port, p.logPath())
		// The port lies in Linux's ephemeral range (32768-60999): a closed outgoing connection
		// that used it as its local port holds it in TIME_WAIT for up to 60 s, and postgres
		// cannot bind it meanwhile. Wait that out instead of failing.
		deadline := time.Now().Add(75 * time.Second)
		for {
			from := size(p.logPath())
			err := p.pgctl(ctx, "start", "-D", p.data(), "-l", p.logPath(), "-w", "-t", strconv.Itoa(int(pgWait.Seconds())), "-s")
			if err == nil {
				break
			}
			if time.Now().Before(deadline) && logged(p.logPath(), from, addrInUse) {
				p.s.logf("postgres: port %d is still held by a closed connection (TIME_WAIT); retrying", p.port)
				time.Sleep(2 * time.Second)
				continue
			}
			return fmt.Errorf("postgres did not start: %w%s", err, tail(p.logPath(), 30))
		}
	}
	err := waitFor(ctx, pgWait, p.ready, func() error {
		if !p.running() {
			return errors.New("postgres is not running")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres does not answer on 127.0.0.1:%d: %w%s", p.port, err, tail(p.logPath(), 30))
	}
	if err := p.ensureDB(ctx); err != nil {
		return err
	}
	p.s.logf("postgres: ready, %s", DatabaseURL(p.port))
	return nil
}

// ensureDB creates the brp database when missing (not on a standby, which copies it).
func (p *pgServer) ensureDB(ctx context.Context) error {
	db, err := sql.Open("postgres", fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", pgUser, p.port))
	if err != nil {
		return err
	}
	defer db.Close()
	var exists, recovering bool
	if err := db.QueryRowContext(ctx, `select exists (select from pg_database where datname = 'brp'), pg_is_in_recovery()`).Scan(&exists, &recovering); err != nil {
		return fmt.Errorf("postgres on port %d: %w", p.port, err)
	}
	if exists || recovering {
		return nil
	}
	p.s.logf("postgres: createdb brp")
	if _, err := db.ExecContext(ctx, `create database brp owner `+pq.QuoteIdentifier(pgUser)); err != nil {
		return fmt.Errorf("create database brp: %w", err)
	}
	return nil
}

func (p *pgServer) stop(ctx context.Context) error {
	if !p.running() {
		p.s.logf("postgres: not running")
		return nil
	}
	p.s.logf("postgres: stopping")
	if err := p.pgctl(ctx, "stop", "-D", p.data(), "-m", "fast", "-w", "-t", "60", "-s"); err != nil {
		p.s.logf("postgres: fast shutdown timed out, using immediate")
		if err := p.pgctl(ctx, "stop", "-D", p.data(), "-m", "immediate", "-w", "-t", "30", "-s"); err != nil {
			return fmt.Errorf("postgres did not stop: %w%s", err, tail(p.logPath(), 30))
		}
	}
	p.s.logf("postgres: stopped")
	return nil
}

// primarySync sets the primary's synchronous_standby_names (sync: '*', else ”), or removes
// the setting (remove), and reloads it if it runs.
func (s *stack) primarySync(ctx context.Context, sync, remove bool) error {
	p := s.primary()
	conf := filepath.Join(p.data(), "brp-replication.conf")
	if remove {
		if err := os.Remove(conf); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	} else {
		names := ""
		if sync {
			names = "*"
		}
		if err := writeOwned(conf, fmt.Sprintf("# Written by scripts/services.sh up-pg-standby.\nsynchronous_standby_names = '%s'\n", names)); err != nil {
			return err
		}
	}
	if p.running() {
		return p.pgctl(ctx, "reload", "-D", p.data(), "-s")
	}
	return nil
}

// standbyStart starts the standby: a copy of the primary taken with pg_basebackup (through
// ReplicationAddr), streaming from there; then tells the primary whether to wait for it.
func (s *stack) standbyStart(ctx context.Context) error {
	sb := s.standby()
	if !sb.running() && !exists(filepath.Join(sb.data(), "PG_VERSION")) {
		if err := os.MkdirAll(sb.data(), 0o700); err != nil {
			return err
		}
		if err := own(sb.base, sb.data()); err != nil {
			return err
		}
		host, port, _ := strings.Cut(s.cfg.ReplicationAddr, ":")
		s.logf("postgres standby: pg_basebackup from %s", s.cfg.ReplicationAddr)
		out, err := sb.cmd(ctx, "pg_basebackup", "-h", host, "-p", port, "-U", pgUser, "-D", sb.data(), "-R", "-X", "stream", "-c", "fast").CombinedOutput()
		if err != nil {
			return fmt.Errorf("pg_basebackup failed (is the primary running?): %w\n%s", err, out)
		}
		_ = os.Remove(filepath.Join(sb.data(), "brp-replication.conf"))
		_ = os.Remove(filepath.Join(sb.data(), "postmaster.pid"))
	}
	if err := sb.start(ctx); err != nil {
		return err
	}
	if err := s.primarySync(ctx, !s.cfg.PGAsync, false); err != nil {
		return err
	}
	s.logf("postgres standby: streaming from %s, synchronous %v", s.cfg.ReplicationAddr, !s.cfg.PGAsync)
	return nil
}

// standbyStop stops the standby and removes its copy; the primary no longer waits for it.
func (s *stack) standbyStop(ctx context.Context) error {
	sb := s.standby()
	if exists(sb.base) {
		if err := sb.stop(ctx); err != nil {
			return err
		}
		if err := os.RemoveAll(sb.base); err != nil {
			return err
		}
	}
	if exists(filepath.Join(s.primary().data(), "brp-replication.conf")) {
		return s.primarySync(ctx, false, true)
	}
	return nil
}

// promote makes the standby a primary and waits until it accepts writes.
func (s *stack) promote(ctx context.Context) error {
	sb := s.standby()
	if !sb.running() {
		return errors.New("postgres standby: not running (up-pg-standby starts it)")
	}
	db, err := sql.Open("postgres", fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", pgUser, sb.port))
	if err != nil {
		return err
	}
	defer db.Close()
	var recovering bool
	if err := db.QueryRowContext(ctx, `select pg_is_in_recovery()`).Scan(&recovering); err != nil {
		return fmt.Errorf("postgres standby: %w", err)
	}
	if recovering {
		if err := sb.pgctl(ctx, "promote", "-D", sb.data(), "-w", "-t", strconv.Itoa(int(pgWait.Seconds())), "-s"); err != nil {
			return fmt.Errorf("postgres standby: promotion failed (see %s): %w", sb.logPath(), err)
		}
	}
	s.logf("postgres standby: promoted; primary on 127.0.0.1:%d", sb.port)
	return nil
}
