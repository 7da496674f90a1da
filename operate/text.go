package operate

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/brp/levering/handeling"
)

// The text that CLI writes: the publication at a glance, the fout list and one fout handeling.

// tsFormat is how CLI writes a moment (in local time).
const tsFormat = "2006-01-02 15:04:05.000"

// writeStatus writes "publicatie status": the counts (what fout handelingen hold back, what is
// registered in the future among them), how long recent deliveries took, the oldest
// undelivered handeling and the first one in the future, the lease, and the first blocked
// persons and fout handelingen.
func writeStatus(w io.Writer, o Overview) {
	excluded := strings.Join(o.Excluded, ",")
	if excluded == "" {
		excluded = "none"
	}
	fmt.Fprintf(w, "publicatie status at %s (database clock)\ncluster %s, fout policy %s, excluded %s\n\n",
		o.GeneratedAt.Local().Format(tsFormat), o.Cluster, o.FoutPolicy, excluded)
	width := len(strconv.FormatInt(max(o.Backlog, o.InLevering, o.DeliveredLastMinute, o.Geleverd, o.Fout, o.HeldBehindFout, o.Future), 10))
	fmt.Fprintf(w, "backlog (te leveren)   %*d\n", width, o.Backlog)
	fmt.Fprintf(w, "in levering            %*d\n", width, o.InLevering)
	fmt.Fprintf(w, "delivered last minute  %*d  %s per minute, last 10 minutes\n", width, o.DeliveredLastMinute, sparkline(o.DeliveredPerMinute))
	budget := FormatAge(o.BudgetSeconds)
	if o.Geleverd >= 0 {
		fmt.Fprintf(w, "geleverd in total      %*d\n", width, o.Geleverd)
	} else {
		fmt.Fprintf(w, "geleverd in total      %*s  not counted: counting the history took over %s\n", width, "?", budget)
	}
	fmt.Fprintf(w, "fout                   %*d\n", width, o.Fout)
	switch held := ""; {
	case o.HeldCounted == HeldUnknown:
		fmt.Fprintf(w, "held behind fout       %*s  not counted: counting took over %s, and no publisher has counted them yet\n", width, "?", budget)
	default:
		if o.HeldBehindFout > 0 {
			held = fmt.Sprintf("  handeling(en) of %d person(s), also through multi-person handelingen", o.HeldBehindFoutPersonen)
		}
		if o.HeldCounted == HeldByLeader && o.HeldCountedAt != nil {
			held += fmt.Sprintf(" (the leading publisher's count, %s ago: counting them here took over %s)",
				FormatAge(o.GeneratedAt.Sub(*o.HeldCountedAt).Seconds()), budget)
		}
		fmt.Fprintf(w, "held behind fout       %*d%s\n", width, o.HeldBehindFout, held)
	}
	fmt.Fprintf(w, "in the future          %*d  tsreg over %s ahead of the database clock\n\n", width, o.Future, FormatAge(handeling.FutureSkew.Seconds()))
	if d := o.DeliveryDelay; d != nil {
		fmt.Fprintf(w, "delivery delay      p50 %s, p99 %s (registration to delivery, %d delivered in the last 5 minutes)\n",
			FormatAge(d.P50Seconds), FormatAge(d.P99Seconds), d.Deliveries)
	} else {
		fmt.Fprintln(w, "delivery delay      no deliveries in the last 5 minutes")
	}
	if h := o.Oldest; h != nil {
		state := "te leveren"
		if h.Statuslev == handeling.InLevering {
			state = "in levering"
		}
		fmt.Fprintf(w, "oldest undelivered  %d %s, registered %s, age %s, %s\n", h.ID, clean(h.Soort), h.Tsreg.Local().Format(tsFormat), FormatAge(h.AgeSeconds), state)
	} else {
		fmt.Fprintln(w, "oldest undelivered  none")
	}
	if f := o.FirstFuture; f != nil {
		fmt.Fprintf(w, "first in the future %d %s, registered %s, ahead %s: waits until then\n", f.ID, clean(f.Soort), f.Tsreg.Local().Format(tsFormat), FormatAge(f.AheadSeconds))
	}
	writeHorizon(w, o.Horizon)
	l := o.Lease
	switch {
	case l.HandedOver() && l.SecondsSinceActivity >= 0:
		fmt.Fprintf(w, "lease               nobody holds it: handed over %s ago at the end of epoch %d; the next publicatie to poll takes it\n",
			FormatAge(l.SecondsSinceActivity), l.Epoch)
	case l.HandedOver():
		fmt.Fprintf(w, "lease               nobody holds it: handed over at the end of epoch %d (when was not recorded); the next publicatie to poll takes it\n", l.Epoch)
	case l.Holder == "":
		fmt.Fprintln(w, "lease               nobody holds it, nor ever did (epoch 0)")
	default:
		fmt.Fprintf(w, "lease               %s leads, epoch %d, last activity %s\n", clean(l.Holder), l.Epoch, ago(l.SecondsSinceActivity))
	}

	const rows = 8
	if o.BlockedOmitted {
		fmt.Fprintf(w, "\nblocked persons: not listed (listing them took over %s; publicatie fout show ID says who waits)\n", budget)
	} else {
		fmt.Fprintf(w, "\nblocked persons: %d\n", o.BlockedTotal)
	}
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
		writeFoutTable(w, o.Fouten[:min(rows, len(o.Fouten))], 48)
		if o.Fout > rows {
			fmt.Fprintf(w, "  ... %d more: publicatie fout list\n", o.Fout-rows)
		}
		fmt.Fprintln(w, "\n  publicatie fout show ID | fout retry ID --door NAME | fout release ID --door NAME")
	}
}

// writeFoutList writes "publicatie fout list".
func writeFoutList(w io.Writer, fs []Fout) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "no handelingen in fout")
		return
	}
	writeFoutTable(w, fs, 100)
}

// writeBulk writes the result of "publicatie fout retry|release SELECTION".
func writeBulk(w io.Writer, actie string, sel Selection, door string, r BulkResult) {
	done := map[string]string{"retry": "retried", "release": "released"}[actie]
	if r.DryRun {
		fmt.Fprintf(w, "dry run: %s would be %s: %d (nothing changed)\n", clean(sel.String()), done, r.Selected)
	} else {
		fmt.Fprintf(w, "%s: %d of %d %s by %s, in %d transactions", clean(sel.String()), r.Done, r.Selected, done, clean(door), r.Batches)
		if r.Done < r.Selected {
			fmt.Fprintf(w, " (%d left fout or were released meanwhile)", r.Selected-r.Done)
		}
		fmt.Fprintln(w, ".")
		if actie == "retry" && r.Done > 0 {
			fmt.Fprintln(w, "They are te leveren again; the publisher delivers them in their places.")
		}
	}
	if len(r.First) == 0 {
		return
	}
	fmt.Fprintf(w, "the first %d by id (fout show ID for persons and history):\n", len(r.First))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tSOORT\tREGISTERED\tRELEASED\tREASON")
	for _, f := range r.First {
		released := "no"
		if f.Vrijgegeven != nil {
			released = "yes"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", f.ID, clean(f.Soort), f.Tsreg.Local().Format("2006-01-02 15:04:05"), released, cut(f.Foutreden, 60))
	}
	tw.Flush()
}

// writeFoutTable writes fout handelingen as a table, reasons cut to reasonWidth runes.
func writeFoutTable(w io.Writer, fs []Fout, reasonWidth int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tSOORT\tREGISTERED\tPERSONEN\tRELEASED\tREASON")
	for _, f := range fs {
		released, personen := "no", joinIDs(f.Personen, ",")
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

// writeFoutDetail writes "publicatie fout show ID".
func writeFoutDetail(w io.Writer, d FoutDetail) {
	status := string(d.Statuslev)
	if d.Statuslev == handeling.TeLeveren {
		status = "te leveren (NULL)"
	}
	personen := joinIDs(d.Personen, ",")
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
	if d.Statuslev == handeling.Fout {
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
		if a.Note != "" {
			note = ": " + clean(a.Note)
		}
		fmt.Fprintf(w, "  %s  %s by %s%s\n", a.At.Local().Format(tsFormat), a.Kind, clean(a.By), note)
	}
	if d.Statuslev == handeling.Fout {
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

// ago reads "3m05s ago", or "never" for a negative number of seconds.
func ago(seconds float64) string {
	if seconds < 0 {
		return "never"
	}
	return FormatAge(seconds) + " ago"
}

// sparkline draws ns as bars of eight heights, the largest full.
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

// writeHorizon writes what the publisher's horizon waits for: the margin and the oldest open
// transaction that holds it.
func writeHorizon(w io.Writer, hz Horizon) {
	fmt.Fprintf(w, "horizon             waits %s: lead margin %s (at most %s)", FormatAge(hz.WaitSeconds), FormatAge(hz.MarginSeconds), FormatAge(hz.MaxLeadSeconds))
	if t := hz.Holder; t != nil {
		fmt.Fprintf(w, ", open transaction pid %d %q, %s for %s, %s", t.PID, clean(t.ApplicationName), clean(t.State), FormatAge(t.AgeSeconds), t.Holding(hz.MaxWaitSeconds))
	} else {
		fmt.Fprint(w, ", no open transaction holds it")
	}
	fmt.Fprintln(w)
	if ow := hz.OpenWriters; ow.Transactions > 0 {
		fmt.Fprintf(w, "open writers        %d transactions linked handelingen to persons, %d persons' work waits for them, the oldest open %s\n",
			ow.Transactions, ow.Persons, FormatAge(ow.OldestSeconds))
	}
}
