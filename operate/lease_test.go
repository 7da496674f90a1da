package operate_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/operate"
)

// What publicatie status and the status page say of the lease in each of its states, as the
// publisher leaves the row (publicatie/lease.go). After a clean handover (release: no holder,
// the heartbeat at the hand-over) they said "last activity never"; now they say when it was
// handed over, and that the next publicatie to poll takes it.
func TestLeaseStatesShown(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	srv, _ := servePages(t, db, nil)
	activity := regexp.MustCompile(`<dt>Last activity</dt><dd>(.*?)</dd>`)
	pageAge := regexp.MustCompile(`\b\d+(ms|s|m\d\ds|h\d\dm|d\d\dh) ago`)
	for _, c := range []struct {
		name, row  string // row: the lease row's values (holder, epoch, heartbeat); "" none
		text, page string
	}{
		{"no row", "",
			"lease               nobody holds it, nor ever did (epoch 0)", "never"},
		{"never held", `'', 0, '-infinity'`,
			"lease               nobody holds it, nor ever did (epoch 0)", "never"},
		{"handed over", `'', 7, now() - interval '90 seconds'`,
			"lease               nobody holds it: handed over AGE ago at the end of epoch 7; the next publicatie to poll takes it",
			"handed over AGE at the end of epoch 7: the next publicatie to poll takes it"},
		{"handed over by an earlier release", `'', 4, '-infinity'`,
			"lease               nobody holds it: handed over at the end of epoch 4 (when was not recorded); the next publicatie to poll takes it",
			"handed over (when was not recorded) at the end of epoch 4: the next publicatie to poll takes it"},
		{"held", `'host-b-7', 8, now() - interval '2 seconds'`,
			"lease               host-b-7 leads, epoch 8, last activity AGE ago", "AGE"},
		{"held, silent", `'host-b-7', 8, now() - interval '40 seconds'`,
			"lease               host-b-7 leads, epoch 8, last activity AGE ago", `AGE <span class="badge warn">silent</span>`},
	} {
		sqlExec(t, db, `delete from publicatie_lease`)
		if c.row != "" {
			sqlExec(t, db, `insert into publicatie_lease (cluster, holder, epoch, heartbeat) values ('default', `+c.row+`)`)
		}
		out := masked(mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status"))
		if !strings.Contains(out, "\n"+c.text+"\n") {
			t.Errorf("%s: publicatie status says\n%s\nwant the line\n%s", c.name, out, c.text)
		}
		_, body := get(t, srv.URL+"/")
		if m := activity.FindStringSubmatch(body); m == nil || pageAge.ReplaceAllString(m[1], "AGE") != c.page {
			t.Errorf("%s: the status page's last activity %q, want %q", c.name, m, c.page)
		}
	}
}
