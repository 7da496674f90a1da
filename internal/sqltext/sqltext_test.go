package sqltext

import (
	"slices"
	"testing"
	"testing/fstest"
)

func TestGetAndUnused(t *testing.T) {
	f := New(fstest.MapFS{
		"sql/a.sql":    {Data: []byte("select 1\n")},
		"sql/b.sql":    {Data: []byte("select 2")},
		"sql/note.txt": {Data: []byte("not a statement")},
	})
	if got := f.Get("a.sql"); got != "select 1" {
		t.Fatalf("Get(a.sql) = %q", got)
	}
	if got := f.Unused(); !slices.Equal(got, []string{"b.sql"}) {
		t.Fatalf("Unused = %v, want [b.sql]", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Get of a missing file did not panic")
		}
	}()
	f.Get("missing.sql")
}
