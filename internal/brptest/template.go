package brptest

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/brp/levering/internal/rig"
)

// A test process migrates one database per server and form, its template, and each test's
// database is a copy of it (rig.CloneDB): copying is cheaper than migrating, and a package's
// tests make hundreds of databases (docs/performance.md, "The full lane"). The templates of a
// process are named as processTempDir names its directories, tplbrp_<host>_<pid>_<form>, for
// the same reason: a test binary has no hook at its exit, so every template a process makes
// first drops those of this host's processes that have ended. <host> keeps a server
// shared by several machines from losing the templates of another machine's running tests.
var templates struct {
	sync.Mutex
	made map[templateKey]string
}

type templateKey struct{ server, form string }

// template returns the name of this process's template of form f on the server of serverURL,
// making it on first use.
func template(serverURL string, f Form) (string, error) {
	templates.Lock()
	defer templates.Unlock()
	k := templateKey{serverURL, f.Name}
	if name, ok := templates.made[k]; ok {
		return name, nil
	}
	ctx := context.Background()
	pruneTemplates(ctx, serverURL)
	// A template of this name is an ended process's whose pid this one has now: CreateDBIn
	// drops it first.
	name := templatePrefix() + strconv.Itoa(os.Getpid()) + "_" + f.Name
	db, _, err := rig.CreateDBIn(ctx, serverURL, name, f.DDL, f.Layout)
	if err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	if err := db.Close(); err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	if templates.made == nil {
		templates.made = map[templateKey]string{}
	}
	templates.made[k] = name
	return name, nil
}

// pruneTemplates drops the templates on the server of serverURL of this host's processes that
// are no longer running. It is best effort: a template it leaves costs a few MB.
func pruneTemplates(ctx context.Context, serverURL string) {
	prefix := templatePrefix()
	names, err := rig.DatabasesLike(ctx, serverURL, strings.ReplaceAll(prefix, "_", `\_`)+"%")
	if err != nil {
		return
	}
	for _, n := range names {
		if ended(strings.TrimPrefix(n, prefix), '_') {
			_ = rig.DropDB(ctx, serverURL, n)
		}
	}
}

// templatePrefix begins the names of this host's templates: tplbrp_<host>_.
func templatePrefix() string { return "tplbrp_" + hostTag() + "_" }

// hostTag is a short lower-case tag of this machine's host name.
func hostTag() string {
	h, _ := os.Hostname()
	s := fnv.New32a()
	_, _ = s.Write([]byte(h))
	return strconv.FormatUint(uint64(s.Sum32()%(36*36*36*36)), 36)
}
