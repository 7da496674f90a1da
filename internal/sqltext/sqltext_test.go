package sqltext

import (
	"slices"
	"testing"
	"testing/fstest"
)

func TestGetAndUnused(t *testing.T) {
	f := New(fstest.MapFS{
		"sql/a.sql":      {Data: []byte("select 1\n")},
		"sql/b.sql":      {Data: []byte("select 2")},
		"sql/c.sql":      {Data: []byte("select 3")},
		"sql/note.txt":   {Data: []byte("not a statement")},
		"sql/kern/a.sql": {Data: []byte("select 11")},
		"sql/kern/d.sql": {Data: []byte("select 14")},
	})
	if got := f.Get("a.sql"); got != "select 1" {
		t.Fatalf("Get(a.sql) = %q", got)
	}
	if got := f.GetIn("kern", "a.sql"); got != "select 11" {
		t.Fatalf("GetIn(kern, a.sql) = %q, want the layout's own", got)
	}
	if got := f.GetIn("kern", "c.sql"); got != "select 3" {
		t.Fatalf("GetIn(kern, c.sql) = %q, want the shared one", got)
	}
	if got := f.Unused(); !slices.Equal(got, []string{"b.sql", "kern/d.sql"}) {
		t.Fatalf("Unused = %v, want [b.sql kern/d.sql]", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Get of a missing file did not panic")
		}
	}()
	f.Get("missing.sql")
}

func TestMisuse(t *testing.T) {
	f := New(fstest.MapFS{
		"sql/lease.sql":    {Data: []byte("-- reads admhnd? no: only the lease\nselect holder from publicatie_lease")},
		"sql/beheer.sql":   {Data: []byte("select admhnd_id from admhnd_beheer")},
		"sql/open.sql":     {Data: []byte("select id from admhnd where statuslev is null")},
		"sql/persons.sql":  {Data: []byte("select persoon_id from admhnd_persoon")},
		"sql/kerntab.sql":  {Data: []byte("select id from kern.admhnd")},
		"sql/literal.sql":  {Data: []byte("select 'admhnd'::regclass")},
		"sql/kern/own.sql": {Data: []byte("select id from kern.admhnd")},
		"sql/kern/bad.sql": {Data: []byte("select id from admhnd")},
		"sql/kern/col.sql": {Data: []byte("select pers from kern.his_persafgeleidadministrati where admhnd = 1")},
	})
	for _, n := range []string{"lease.sql", "beheer.sql", "open.sql", "persons.sql", "kerntab.sql", "literal.sql"} {
		f.GetIn("kern", n)
	}
	f.GetIn("kern", "own.sql")
	f.GetIn("kern", "col.sql")
	want := []string{"kern/bad.sql", "literal.sql", "open.sql", "persons.sql"}
	if got := f.Misuse("kern"); !slices.Equal(got, want) {
		t.Fatalf("Misuse = %v, want %v", got, want)
	}
}
