package dbsession_test

import (
	"strings"
	"testing"

	"github.com/brp/levering/internal/dbsession"
)

func TestRedactRemovesEveryPassword(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://brp:s3cret@db:5432/brp?sslmode=verify-full":       "postgres://brp:xxxxx@db:5432/brp?sslmode=verify-full",
		`parse "postgres://brp:s3cret@db:notaport/brp": invalid port`: `parse "postgres://brp:xxxxx@db:notaport/brp": invalid port`,
		"host=db user=brp password=s3cret dbname=brp":                 "host=db user=brp password=xxxxx dbname=brp",
		"host=db password = 's3 cret\\'x' dbname=brp":                 "host=db password = xxxxx dbname=brp",
		"PASSWORD=s3cret":                          "PASSWORD=xxxxx",
		"postgres://brp@db/brp":                    "postgres://brp@db/brp",
		"stomp: ERROR frame: login failed for brp": "stomp: ERROR frame: login failed for brp",
	} {
		if got := dbsession.Redact(in); got != want || strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
