package schema_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/schema"
)

// The grants files read as the rights the start check asks for: what the runtime role uses,
// and not what it must not have.
func TestServiceRights(t *testing.T) {
	for _, tc := range []struct {
		layout handeling.Layout
		has    []string
		hasNot []string
	}{
		{handeling.Contract,
			[]string{"usage on schema (the current schema)", "select on admhnd", "update (statuslev) on admhnd", "update (vrijgegeven) on admhnd",
				"insert on admhnd_beheer", "usage on sequence admhnd_beheer_id_seq", "update on publicatie_lease",
				"delete on publicatie_nakomer", "execute on function publicatie_sessions()"},
			[]string{"update on admhnd", "delete on admhnd_beheer", "update on admhnd_beheer", "delete on publicatie_lease", "update (soort) on admhnd"}},
		{handeling.Kern,
			[]string{"usage on schema kern", "usage on schema brp_levering", "select on kern.srtadmhnd", "update (tslev) on kern.admhnd",
				"insert on brp_levering.admhnd_beheer", "delete on brp_levering.admhnd_levering", "execute on function brp_levering.publicatie_sessions()"},
			[]string{"update on kern.admhnd", "delete on brp_levering.admhnd_beheer", "delete on brp_levering.publicatie_lease"}},
	} {
		t.Run(string(tc.layout), func(t *testing.T) {
			rights, err := schema.ServiceRights(tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rights {
				got = append(got, r.String())
			}
			for _, want := range tc.has {
				if !slices.Contains(got, want) {
					t.Errorf("missing %q in %v", want, got)
				}
			}
			for _, not := range tc.hasNot {
				if slices.Contains(got, not) {
					t.Errorf("the runtime role gets %q", not)
				}
			}
		})
	}
}

// MissingRights names exactly the grant a DBA left out.
func TestMissingRightsNamesTheGrant(t *testing.T) {
	t.Parallel()
	withRoles(t, func(t *testing.T, l handeling.Layout, db *sqlx.DB, roles brptest.Roles) {
		revoke, want := `revoke update (tspub) on admhnd from `, "update (tspub) on admhnd"
		if l == handeling.Kern {
			revoke, want = `revoke execute on function brp_levering.publicatie_sessions() from `, "execute on function brp_levering.publicatie_sessions()"
		}
		db.MustExec(revoke + roles.Service)
		missing, err := schema.MissingRights(context.Background(), sessionAs(t, roles.ServiceURL).DB, l)
		if err != nil || len(missing) != 1 || missing[0].String() != want {
			t.Fatalf("missing %v (%v), want [%s]", missing, err, want)
		}
	})
}
