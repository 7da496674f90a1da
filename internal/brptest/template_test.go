package brptest

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/brp/levering/internal/rig"
)

// A test's database is a copy of the process's template: migrated (the service's tables are
// there), its own (a write to it is not in the next test's), and the templates of ended
// processes of this host are dropped, those of running ones kept.
func TestDatabasesAreCopiesOfTheProcessTemplate(t *testing.T) {
	NeedsServices(t)
	ctx := context.Background()
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Skipf("cannot run true to get an ended process's pid: %v", err)
	}
	prefix := templatePrefix()
	gone, parent := prefix+strconv.Itoa(ended.Process.Pid)+"_text", prefix+strconv.Itoa(os.Getppid())+"_text"
	for _, n := range []string{gone, parent} {
		db, _, err := rig.CreateBareDB(ctx, DatabaseURL(), n, "")
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		t.Cleanup(func() { _ = rig.DropDB(ctx, DatabaseURL(), n) })
	}
	first, _ := DBWith(t, StatusText)
	first.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now())`)
	second, _ := DBWith(t, StatusText)
	var n int
	if err := second.Get(&n, `select count(*) from admhnd`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the second database holds %d handelingen of the first", n)
	}
	if err := second.Get(&n, `select count(*) from publicatie_state`); err != nil {
		t.Fatalf("the copy is not migrated: %v", err)
	}
	pruneTemplates(ctx, DatabaseURL())
	names, err := rig.DatabasesLike(ctx, DatabaseURL(), prefix+"%")
	if err != nil {
		t.Fatal(err)
	}
	own, err := template(DatabaseURL(), StatusText)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]bool{gone: false, parent: true, own: true} {
		if slices.Contains(names, n) != want {
			t.Errorf("%s exists: %v, want %v (templates: %v)", n, !want, want, names)
		}
	}
}
