package handeling

import "testing"

// Every statement file is one the package runs, and the kern layout's statements name the
// kern tables: a statement it shares with the contract layout touches only the service's own
// tables, and its own name no contract table. (An internal test: it cannot import brptest,
// which imports this package.)
func TestStatementFiles(t *testing.T) {
	if unused := files.Unused(); len(unused) > 0 {
		t.Errorf("statement files nobody reads: %v", unused)
	}
	if bad := files.Misuse(Kern.Dir()); len(bad) > 0 {
		t.Errorf("kern layout statements that name a contract table: %v", bad)
	}
}
