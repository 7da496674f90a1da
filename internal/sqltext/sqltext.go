// Package sqltext loads the service's SQL statements from the .sql files a package embeds: one
// complete statement a file, with parameters ($1, ...) for what varies, as a reader can paste
// it into psql. No statement is assembled from Go strings: the rules statements share are SQL
// functions of the schema (migration 0013), and what differs between table forms lives in the
// schema or in a statement file of its own.
//
// A database layout other than the contract's (handeling.Layout) has a directory of its own,
// sql/<layout>/, holding the statements that read or write the handelingen there. A statement
// that touches only the service's own tables is written once, in sql/, and serves every layout:
// a layout's sessions find those tables through their search_path.
package sqltext

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Files are the statement files of a package. Get reads one; Unused lists those nobody read,
// for the package's tests.
type Files struct {
	fsys fs.FS
	mu   sync.Mutex
	used map[string]bool // paths under sql/ that Get returned
	// shared are, per layout directory, the names Get served from sql/ for lack of a file
	// of that layout.
	shared map[string][]string
}

// New returns the statement files under fsys (an embed.FS holding a directory sql/, and
// sql/<layout>/ for a layout's own statements).
func New(fsys fs.FS) *Files {
	return &Files{fsys: fsys, used: map[string]bool{}, shared: map[string][]string{}}
}

// Get returns the statement in sql/name. A missing file is a mistake in the build that every
// test shows at once: it panics.
func (f *Files) Get(name string) string { return f.GetIn("", name) }

// GetIn returns the statement name of layout directory dir: sql/dir/name where that file
// exists, else sql/name (dir "" is the contract layout: sql/name).
func (f *Files) GetIn(dir, name string) string {
	p := "sql/" + name
	if dir != "" {
		if own := path.Join("sql", dir, name); exists(f.fsys, own) {
			p = own
		} else {
			f.mu.Lock()
			f.shared[dir] = append(f.shared[dir], name)
			f.mu.Unlock()
		}
	}
	b, err := fs.ReadFile(f.fsys, p)
	if err != nil {
		panic(fmt.Sprintf("sqltext: %v", err))
	}
	f.mu.Lock()
	f.used[p] = true
	f.mu.Unlock()
	return strings.TrimSpace(string(b))
}

func exists(fsys fs.FS, p string) bool {
	_, err := fs.Stat(fsys, p)
	return err == nil
}

// Unused returns the files under sql/ and its layout directories that Get never read, sorted,
// as paths below sql/ (a layout's as dir/name).
func (f *Files) Unused() []string {
	var out []string
	f.mu.Lock()
	defer f.mu.Unlock()
	err := fs.WalkDir(f.fsys, "sql", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".sql") && !f.used[p] {
			out = append(out, strings.TrimPrefix(p, "sql/"))
		}
		return nil
	})
	if err != nil {
		return []string{err.Error()}
	}
	slices.Sort(out)
	return out
}

// contractTable finds a table of the contract layout (admhnd, admhnd_persoon) named without a
// schema where a statement reads or writes a table (after from, join, update, into, table, or
// as a regclass literal): what a statement shared with another layout must not do. A column
// of that name (kern.his_persafgeleidadministrati.admhnd) is not a match.
var contractTable = regexp.MustCompile(`(?i)(\b(from|join|update|into|table|only)\s+|')admhnd(_persoon)?($|[^_a-z0-9."])`)

// Misuse returns the statements of layout directory dir that name a contract table: its own
// files in sql/dir/, and those Get served to it from sql/ for lack of one (each of those needs
// a file of its own). Comments are left out of the check.
func (f *Files) Misuse(dir string) []string {
	f.mu.Lock()
	paths := []string{}
	for _, n := range f.shared[dir] {
		paths = append(paths, "sql/"+n)
	}
	f.mu.Unlock()
	own, _ := fs.Glob(f.fsys, path.Join("sql", dir, "*.sql"))
	paths = append(paths, own...)
	var out []string
	for _, p := range paths {
		b, err := fs.ReadFile(f.fsys, p)
		if err != nil {
			out = append(out, p+": "+err.Error())
			continue
		}
		if contractTable.MatchString(stripComments(string(b))) {
			out = append(out, strings.TrimPrefix(p, "sql/"))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// stripComments removes "--" comments (to the end of the line) outside string literals.
func stripComments(s string) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			inString = !inString
		case !inString && c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
