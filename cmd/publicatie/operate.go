package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/operate"
)

// errOperateUsage is wrapped by every usage error of the operator commands (exit code 2).
var errOperateUsage = errors.New("bad usage")

// operateUsage is printed with usage errors and for -h.
const operateUsage = `usage:
  publicatie status                                      the publication at a glance
  publicatie fout list [--limit N]                       fout handelingen, newest first (default 200)
  publicatie fout show ID                                reason, persons, history, what it holds back
  publicatie fout retry ID [--door NAME] [--note TEXT]   deliver it again, in its place
  publicatie fout release ID [--door NAME] [--note TEXT] let its persons' later handelingen pass it
--door names who acts (recorded in admhnd_beheer); default $SUDO_USER, else $USER.`

// operateCommand runs the operator commands: args are what follows "publicatie" ("status" or
// "fout ..."). Usage errors wrap errOperateUsage; -h prints the usage and returns nil.
func operateCommand(ctx context.Context, db *sqlx.DB, args []string, stdout io.Writer, cfg operate.OverviewConfig) error {
	if len(args) == 0 {
		return usageErr("no command")
	}
	switch args[0] {
	case "status":
		if _, err := parseArgs("status", args[1:], stdout, nil, 0); err != nil {
			return ignoreHelp(err)
		}
		o, err := operate.ReadOverview(ctx, db, cfg)
		if err != nil {
			return err
		}
		printStatus(stdout, o)
		return nil
	case "fout":
		if len(args) < 2 {
			return usageErr("fout: missing list, show, retry or release")
		}
		return foutCommand(ctx, db, args[1], args[2:], stdout, cfg)
	}
	return usageErr("unknown command " + strconv.Quote(args[0]))
}

func foutCommand(ctx context.Context, db *sqlx.DB, sub string, args []string, stdout io.Writer, cfg operate.OverviewConfig) error {
	name := "fout " + sub
	switch sub {
	case "list":
		limit := operate.MaxFouten
		if _, err := parseArgs(name, args, stdout, func(fs *flag.FlagSet) { fs.IntVar(&limit, "limit", limit, "most handelingen listed") }, 0); err != nil {
			return ignoreHelp(err)
		}
		if limit <= 0 {
			return usageErr(name + ": --limit must be positive")
		}
		fs, err := operate.ListFout(ctx, db, limit)
		if err != nil {
			return err
		}
		printFoutList(stdout, fs)
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
		d, err := operate.ShowFout(ctx, db, id, cfg)
		if err != nil {
			return err
		}
		printFoutDetail(stdout, d)
		return nil
	case "retry", "release":
		door := os.Getenv("SUDO_USER")
		if door == "" {
			door = os.Getenv("USER")
		}
		var note string
		pos, err := parseArgs(name, args, stdout, func(fs *flag.FlagSet) {
			fs.StringVar(&door, "door", door, "who acts (default $SUDO_USER, else $USER)")
			fs.StringVar(&note, "note", "", "why (optional, recorded)")
		}, 1)
		if err != nil {
			return ignoreHelp(err)
		}
		id, err := parseID(name, pos[0])
		if err != nil {
			return err
		}
		if strings.TrimSpace(door) == "" {
			return fmt.Errorf("%w: %s: --door NAME is required ($SUDO_USER and $USER are empty): %w", errOperateUsage, name, operate.ErrDoorRequired)
		}
		if sub == "retry" {
			if err := operate.Retry(ctx, db, id, door, note); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "handeling %d retried by %s: it is te leveren again; the publisher delivers it in its place.\n", id, door)
			return nil
		}
		if err := operate.Release(ctx, db, id, door, note); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "handeling %d released by %s: it stays fout; later handelingen of its persons may pass it now.\n", id, door)
		return nil
	}
	return usageErr("fout: unknown command " + strconv.Quote(sub) + " (want list, show, retry or release)")
}

func usageErr(msg string) error {
	return fmt.Errorf("%w: %s\n%s", errOperateUsage, msg, operateUsage)
}

// ignoreHelp turns -h (usage already printed) into success.
func ignoreHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// parseArgs parses flags wherever they stand ("retry 42 --door x" as well as "retry --door x
// 42") and wants exactly npos positional arguments.
func parseArgs(name string, args []string, stdout io.Writer, flags func(*flag.FlagSet), npos int) ([]string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if flags != nil {
		flags(fs)
	}
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, operateUsage)
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
	if len(pos) != npos {
		if npos == 0 {
			return nil, usageErr(name + ": unexpected argument " + strconv.Quote(pos[0]))
		}
		return nil, usageErr(fmt.Sprintf("%s: want %d argument (ID), got %d", name, npos, len(pos)))
	}
	return pos, nil
}

func parseID(name, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, usageErr(name + ": ID must be a handeling id (a number), not " + strconv.Quote(s))
	}
	return id, nil
}

const tsFormat = "2006-01-02 15:04:05.000"

func printStatus(w io.Writer, o operate.Overview) {
	excluded := strings.Join(o.Excluded, ",")
	if excluded == "" {
		excluded = "none"
	}
	fmt.Fprintf(w, "publicatie status at %s (database clock)\ncluster %s, fout policy %s, excluded %s\n\n",
		o.GeneratedAt.Local().Format(tsFormat), o.Cluster, o.FoutPolicy, excluded)
	width := len(strconv.FormatInt(max(o.Backlog, o.InLevering, o.DeliveredLastMinute, o.Geleverd, o.Fout), 10))
	fmt.Fprintf(w, "backlog (te leveren)   %*d\n", width, o.Backlog)
	fmt.Fprintf(w, "in levering            %*d\n", width, o.InLevering)
	fmt.Fprintf(w, "delivered last minute  %*d  %s per minute, last 10 minutes\n", width, o.DeliveredLastMinute, sparkline(o.DeliveredPerMinute))
	fmt.Fprintf(w, "geleverd in total      %*d\n", width, o.Geleverd)
	fmt.Fprintf(w, "fout                   %*d\n\n", width, o.Fout)
	if h := o.Oldest; h != nil {
		state := "te leveren"
		if h.Statuslev == "in_levering" {
			state = "in levering"
		}
		fmt.Fprintf(w, "oldest undelivered  %d %s, registered %s, age %s, %s\n", h.ID, clean(h.Soort), h.Tsreg.Local().Format(tsFormat), operate.FormatAge(h.AgeSeconds), state)
	} else {
		fmt.Fprintln(w, "oldest undelivered  none")
	}
	l := o.Lease
	switch {
	case l.Holder == "":
		fmt.Fprintf(w, "lease               nobody holds it (epoch %d, last activity %s)\n", l.Epoch, ago(l.SecondsSinceActivity))
	default:
		fmt.Fprintf(w, "lease               %s leads, epoch %d, last activity %s\n", clean(l.Holder), l.Epoch, ago(l.SecondsSinceActivity))
	}

	const rows = 8
	fmt.Fprintf(w, "\nblocked persons: %d\n", o.BlockedTotal)
	if len(o.Blocked) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PERSOON\tHELD BY\tWAITING\tWHY")
		for _, b := range o.Blocked[:min(rows, len(o.Blocked))] {
			fmt.Fprintf(tw, "  %d\t%d\t%d\t%s\n", b.PersoonID, b.BlockingID, b.Waiting, cut(b.Why, 70))
		}
		tw.Flush()
		if o.BlockedTotal > rows {
			fmt.Fprintf(w, "  ... %d more on the status page\n", o.BlockedTotal-rows)
		}
	}
	fmt.Fprintf(w, "\nfout handelingen: %d\n", o.Fout)
	if len(o.Fouten) > 0 {
		printFoutTable(w, o.Fouten[:min(rows, len(o.Fouten))], 48)
		if o.Fout > rows {
			fmt.Fprintf(w, "  ... %d more: publicatie fout list\n", o.Fout-rows)
		}
		fmt.Fprintln(w, "\n  publicatie fout show ID | fout retry ID --door NAME | fout release ID --door NAME")
	}
}

func printFoutList(w io.Writer, fs []operate.Fout) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "no handelingen in fout")
		return
	}
	printFoutTable(w, fs, 100)
}

func printFoutTable(w io.Writer, fs []operate.Fout, reasonWidth int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tSOORT\tREGISTERED\tPERSONEN\tRELEASED\tREASON")
	for _, f := range fs {
		released, personen := "no", operate.JoinIDs(f.Personen, ",")
		if f.Vrijgegeven != nil {
			released = "yes"
		}
		if personen == "" {
			personen = "-"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", f.ID, clean(f.Soort), f.Tsreg.Local().Format("2006-01-02 15:04:05"),
			cut(personen, 24), released, cut(f.Foutreden, reasonWidth))
	}
	tw.Flush()
}

func printFoutDetail(w io.Writer, d operate.FoutDetail) {
	status := d.Statuslev
	if status == "" {
		status = "te leveren (NULL)"
	}
	personen := operate.JoinIDs(d.Personen, ",")
	if personen == "" {
		personen = "none"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "handeling\t%d\n", d.ID)
	fmt.Fprintf(tw, "soort\t%s\n", clean(d.Soort))
	fmt.Fprintf(tw, "registered\t%s\n", d.Tsreg.Local().Format(tsFormat))
	fmt.Fprintf(tw, "status\t%s\n", status)
	fmt.Fprintf(tw, "personen\t%s\n", personen)
	if d.Foutreden != "" {
		fmt.Fprintf(tw, "reason\t%s\n", clean(d.Foutreden))
	}
	if d.Statuslev == "fout" {
		released := "no"
		if d.Vrijgegeven != nil {
			released = d.Vrijgegeven.Local().Format(tsFormat)
		}
		fmt.Fprintf(tw, "released\t%s\n", released)
	}
	fmt.Fprintf(tw, "holds back\t%d waiting handeling(en)\n", d.HeldBackTotal)
	tw.Flush()
	for _, h := range d.HeldBack[:min(10, len(d.HeldBack))] {
		fmt.Fprintf(w, "  %d %s, registered %s\n", h.ID, clean(h.Soort), h.Tsreg.Local().Format(tsFormat))
	}
	if d.HeldBackTotal > 10 {
		fmt.Fprintf(w, "  ... %d more\n", d.HeldBackTotal-10)
	}
	fmt.Fprintf(w, "\nhistory (%d)\n", len(d.Audit))
	for _, a := range d.Audit {
		note := ""
		if a.Toelichting != "" {
			note = ": " + clean(a.Toelichting)
		}
		fmt.Fprintf(w, "  %s  %s by %s%s\n", a.Op.Local().Format(tsFormat), a.Actie, clean(a.Door), note)
	}
	if d.Statuslev == "fout" {
		fmt.Fprintln(w, "\ncommands")
		if d.Overtaken > 0 {
			fmt.Fprintf(w, "  note: %d later handeling(en) of its persons are already in levering or geleverd;\n  a retry delivers this one after them.\n", d.Overtaken)
		}
		fmt.Fprintf(w, "  publicatie fout retry %d --door NAME --note TEXT\n", d.ID)
		if d.Vrijgegeven == nil {
			fmt.Fprintf(w, "  publicatie fout release %d --door NAME --note TEXT\n", d.ID)
		}
	}
}

func ago(seconds float64) string {
	if seconds < 0 {
		return "never"
	}
	return operate.FormatAge(seconds) + " ago"
}

func sparkline(ns []int64) string {
	const bars = "▁▂▃▄▅▆▇█"
	levels := []rune(bars)
	var m int64 = 1
	for _, n := range ns {
		m = max(m, n)
	}
	var b strings.Builder
	for _, n := range ns {
		b.WriteRune(levels[n*int64(len(levels)-1)/m])
	}
	return b.String()
}

// clean keeps text from the database from steering the terminal: control characters become
// spaces.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// cut cleans s and shortens it to n runes.
func cut(s string, n int) string {
	r := []rune(clean(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}
