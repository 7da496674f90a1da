package operate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// ErrUsage is wrapped by every usage error of CLI.Run: an unknown command, a bad flag, a missing,
// extra or malformed argument. Such an error's message names what was wrong and ends with the
// usage text; cmd/publicatie exits 2 on it.
var ErrUsage = errors.New("bad usage")

// usage is printed with usage errors and for -h.
const usage = `usage:
  publicatie status                                      the publication at a glance
  publicatie fout list [--limit N]                       fout handelingen, newest first (default 200)
  publicatie fout show ID                                reason, persons, history, what it holds back
  publicatie fout retry ID [--door NAME] [--note TEXT]   deliver it again, in its place
  publicatie fout release ID [--door NAME] [--note TEXT] let its persons' later handelingen pass it
  publicatie fout retry|release SELECTION [--dry-run] [--door NAME] [--note TEXT]
                                                         the same for every fout handeling selected
--door names who acts (recorded in admhnd_beheer); default $SUDO_USER, else $USER.
SELECTION is --all, or any of --reason TEXT (the foutreden contains it, in any case),
--since TIME and --until TIME (tsreg from, before; RFC 3339 or YYYY-MM-DD[THH:MM:SS], local
time), --person ID; together they narrow it. --dry-run says how many and which first, and
changes nothing. Each handeling gets its own audit row; the change goes in transactions of 1000.`

// CLI runs the operator commands of cmd/publicatie (status, fout list|show|retry|release)
// against one database and writes their results as text for a terminal. Text that comes from
// the database (soorten, reasons, names, notes) is written with control characters replaced
// by spaces, so that it cannot steer the terminal.
type CLI struct {
	// DB is the publication's database.
	DB *sqlx.DB
	// Config is the publisher's configuration: every command reads and writes the tables of
	// its Layout, and status and fout show judge backlog and blocked persons by its rules.
	Config OverviewConfig
	// Actor names who acts when retry or release is given no --door. cmd/publicatie passes
	// $SUDO_USER, else $USER, as the usage text says; empty, --door is required.
	Actor string
}

// Run runs one operator command; args are what follows "publicatie": "status", or "fout"
// with list, show, retry or release and their flags and ID (flags may stand before or after
// the ID). Its output goes to stdout. -h (or --help) writes the usage text to stdout and
// returns nil without running the command. A usage error wraps ErrUsage (a blank door
// ErrActorRequired as well) and nothing is read or changed; the errors of ReadOverview,
// ListFout, ShowFout, Retry and Release are returned as they are.
func (c CLI) Run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErr("no command")
	}
	switch args[0] {
	case "status":
		if _, err := parseArgs("status", args[1:], stdout, nil, 0); err != nil {
			return ignoreHelp(err)
		}
		o, err := ReadOverview(ctx, c.DB, c.Config)
		if err != nil {
			return err
		}
		writeStatus(stdout, o)
		return nil
	case "fout":
		if len(args) < 2 {
			return usageErr("fout: missing list, show, retry or release")
		}
		return c.fout(ctx, args[1], args[2:], stdout)
	}
	return usageErr("unknown command " + strconv.Quote(args[0]))
}

// fout runs "fout SUB ARGS...".
func (c CLI) fout(ctx context.Context, sub string, args []string, stdout io.Writer) error {
	name := "fout " + sub
	switch sub {
	case "list":
		limit := maxFouten
		if _, err := parseArgs(name, args, stdout, func(fs *flag.FlagSet) { fs.IntVar(&limit, "limit", limit, "most handelingen listed") }, 0); err != nil {
			return ignoreHelp(err)
		}
		if limit <= 0 {
			return usageErr(name + ": --limit must be positive")
		}
		fs, err := ListFout(ctx, c.DB, c.Config.Layout, limit)
		if err != nil {
			return err
		}
		writeFoutList(stdout, fs)
		return nil
	case "show":
		pos, err := parseArgs(name, args, stdout, nil, 1)
		if err != nil {
			return ignoreHelp(err)
		}
		id, err := parseID(name, pos[0])
		if err != nil {
			return err
		}
		d, err := ShowFout(ctx, c.DB, id, c.Config)
		if err != nil {
			return err
		}
		writeFoutDetail(stdout, d)
		return nil
	case "retry", "release":
		door := c.Actor
		var note, reason, since, until string
		var all, dryRun bool
		var person int64
		pos, err := parseArgsRange(name, args, stdout, func(fs *flag.FlagSet) {
			fs.StringVar(&door, "door", door, "who acts (default $SUDO_USER, else $USER)")
			fs.StringVar(&note, "note", "", "why (optional, recorded)")
			fs.BoolVar(&all, "all", false, "every fout handeling")
			fs.StringVar(&reason, "reason", "", "those whose foutreden contains TEXT")
			fs.StringVar(&since, "since", "", "those with tsreg at or after TIME")
			fs.StringVar(&until, "until", "", "those with tsreg before TIME")
			fs.Int64Var(&person, "person", 0, "those of persoon ID")
			fs.BoolVar(&dryRun, "dry-run", false, "say what would be done, change nothing")
		}, 0, 1)
		if err != nil {
			return ignoreHelp(err)
		}
		sel := Selection{All: all, Reason: reason, Person: person}
		if sel.Since, err = parseTime(name, "--since", since); err != nil {
			return err
		}
		if sel.Until, err = parseTime(name, "--until", until); err != nil {
			return err
		}
		bulk := sel.All || sel.Narrowed()
		switch {
		case len(pos) == 1 && (bulk || dryRun):
			return usageErr(name + ": give an ID or a selection (--all, --reason, --since, --until, --person), not both")
		case len(pos) == 0 && !bulk:
			return usageErr(name + ": want an ID, or a selection: --all, --reason, --since, --until or --person")
		case person < 0:
			return usageErr(name + ": --person must be a persoon id")
		}
		if strings.TrimSpace(door) == "" && !dryRun {
			return fmt.Errorf("%w: %s: --door NAME is required ($SUDO_USER and $USER are empty): %w", ErrUsage, name, ErrActorRequired)
		}
		if bulk {
			many := RetryMany
			if sub == "release" {
				many = ReleaseMany
			}
			res, err := many(ctx, c.DB, c.Config.Layout, sel, door, note, dryRun)
			if err != nil {
				return err
			}
			writeBulk(stdout, sub, sel, door, res)
			return nil
		}
		id, err := parseID(name, pos[0])
		if err != nil {
			return err
		}
		if sub == "retry" {
			if err := Retry(ctx, c.DB, c.Config.Layout, id, door, note); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "handeling %d retried by %s: it is te leveren again; the publisher delivers it in its place.\n", id, door)
			return nil
		}
		if err := Release(ctx, c.DB, c.Config.Layout, id, door, note); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "handeling %d released by %s: it stays fout; later handelingen of its persons may pass it now.\n", id, door)
		return nil
	}
	return usageErr("fout: unknown command " + strconv.Quote(sub) + " (want list, show, retry or release)")
}

// usageErr is a usage error saying msg, followed by the usage text.
func usageErr(msg string) error {
	return fmt.Errorf("%w: %s\n%s", ErrUsage, msg, usage)
}

// ignoreHelp turns -h (usage already printed) into success.
func ignoreHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// parseArgs parses flags wherever they stand ("retry 42 --door x" as well as "retry --door x
// 42") and wants exactly npos positional arguments. On -h it writes the usage text to stdout
// and returns flag.ErrHelp.
func parseArgs(name string, args []string, stdout io.Writer, flags func(*flag.FlagSet), npos int) ([]string, error) {
	return parseArgsRange(name, args, stdout, flags, npos, npos)
}

// parseArgsRange is parseArgs wanting lo to hi positional arguments.
func parseArgsRange(name string, args []string, stdout io.Writer, flags func(*flag.FlagSet), lo, hi int) ([]string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if flags != nil {
		flags(fs)
	}
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, usage)
			return nil, err
		}
		if err != nil {
			return nil, usageErr(name + ": " + err.Error())
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < lo || len(pos) > hi {
		if hi == 0 {
			return nil, usageErr(name + ": unexpected argument " + strconv.Quote(pos[0]))
		}
		want := strconv.Itoa(lo)
		if hi != lo {
			want = fmt.Sprintf("%d or %d", lo, hi)
		}
		return nil, usageErr(fmt.Sprintf("%s: want %s argument (ID), got %d", name, want, len(pos)))
	}
	return pos, nil
}

// timeForms are the forms --since and --until take: RFC 3339, or a local date and time.
var timeForms = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseTime reads the value of flag; "" is the zero time (no bound).
func parseTime(name, flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, f := range timeForms {
		if t, err := time.ParseInLocation(f, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageErr(fmt.Sprintf("%s: %s %q is not a time (RFC 3339, or YYYY-MM-DD[THH:MM[:SS]] local time)", name, flag, s))
}

// parseID reads a handeling id.
func parseID(name, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, usageErr(name + ": ID must be a handeling id (a number), not " + strconv.Quote(s))
	}
	return id, nil
}
