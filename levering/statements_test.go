package levering

import "testing"

// Every statement file in sql/ is one the package runs.
func TestEveryStatementFileIsUsed(t *testing.T) {
	if unused := statements.Unused(); len(unused) > 0 {
		t.Fatalf("statement files nobody reads: %v", unused)
	}
}
