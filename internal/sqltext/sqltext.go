// Package sqltext loads the service's SQL statements from the .sql files a package embeds: one
// complete statement a file, with parameters ($1, ...) for what varies, as a reader can paste
// it into psql. No statement is assembled from Go strings: the rules statements share are SQL
// functions of the schema (migration 0013), and what differs between table forms lives in the
// schema or in a statement file of its own.
package sqltext

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
)

// Files are the statement files of a package. Get reads one; Unused lists those nobody read,
// for the package's tests.
type Files struct {
	fsys fs.FS
	mu   sync.Mutex
	used map[string]bool
}

// New returns the statement files under fsys (an embed.FS holding a directory sql/).
func New(fsys fs.FS) *Files {
	return &Files{fsys: fsys, used: map[string]bool{}}
}

// Get returns the statement in sql/name. A missing file is a mistake in the build that every
// test shows at once: it panics.
func (f *Files) Get(name string) string {
	b, err := fs.ReadFile(f.fsys, "sql/"+name)
	if err != nil {
		panic(fmt.Sprintf("sqltext: %v", err))
	}
	f.mu.Lock()
	f.used[name] = true
	f.mu.Unlock()
	return strings.TrimSpace(string(b))
}

// Unused returns the names of the files under sql/ that Get never read, sorted.
func (f *Files) Unused() []string {
	entries, err := fs.ReadDir(f.fsys, "sql")
	if err != nil {
		return []string{err.Error()}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sql") && !f.used[e.Name()] {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}
