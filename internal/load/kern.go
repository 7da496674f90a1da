package load

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// InsertIn registers hs as bijhouding does on layout l: Insert on the contract's tables,
// InsertKern on the kern tables themselves.
func InsertIn(ctx context.Context, db *sqlx.DB, l handeling.Layout, hs []Handeling) error {
	if l.Or() == handeling.Kern {
		return InsertKern(ctx, db, hs)
	}
	return Insert(ctx, db, hs)
}

// The statements of InsertKern, on the kern tables of rig.BijhoudingKern.
const (
	// kernSoortenSQL adds the soorten Generate uses that kern.srtadmhnd lacks (ids from 900,
	// category Actualisering): a BRP database has its own, this is for a test database.
	kernSoortenSQL = `insert into kern.srtadmhnd (id, naam, categorieadmhnd)
select 900 + n.i, n.naam, 1
from unnest($1::text[]) with ordinality as n(naam, i)
where not exists (select from kern.srtadmhnd s where s.naam = n.naam)
on conflict do nothing`
	// kernHandelingenSQL registers handelingen as bijhouding does: status 1, the excluded
	// soort ($4) as soort 37 in status 2 (niet leveren).
	kernHandelingenSQL = `insert into kern.admhnd (id, srt, partij, tsreg, statuslev)
select h.id, case when h.soort = $4 then 37 else s.id end, 1, h.tsreg, case when h.soort = $4 then 2 else 1 end
from unnest($1::bigint[], $2::text[], $3::timestamptz[]) as h(id, soort, tsreg)
left join kern.srtadmhnd s on s.naam = h.soort`
	kernPersonenSQL = `insert into kern.pers (id) select distinct unnest($1::bigint[]) on conflict do nothing`
	// kernHisSQL gives every handeling an actie and a his row per person.
	kernHisSQL = `with a as (
    insert into kern.actie (admhnd, tsreg)
    select id, tsreg from unnest($1::bigint[], $2::timestamptz[]) as x(id, tsreg)
    returning id, admhnd, tsreg
)
insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
select p.pers, a.tsreg, a.id, a.admhnd, a.tsreg, 1
from a join unnest($3::bigint[], $4::bigint[]) as p(admhnd, pers) on p.admhnd = a.admhnd`
)

// InsertKern is Insert on the BRP kern tables (rig.BijhoudingKern), as bijhouding writes them:
// kern.admhnd in status 1 (ExcludedSoort as soort 37 in status 2, niet leveren), kern.pers
// where new, a kern.actie per handeling and a kern.his_persafgeleidadministrati row per person,
// in transactions of 5,000 handelingen. A soort is the kern.srtadmhnd of that naam, added
// (ids from 900) when missing.
func InsertKern(ctx context.Context, db *sqlx.DB, hs []Handeling) error {
	if _, err := db.ExecContext(ctx, kernSoortenSQL, pq.Array(soorten)); err != nil {
		return fmt.Errorf("load: kern soorten: %w", err)
	}
	for start := 0; start < len(hs); start += 5000 {
		batch := hs[start:min(start+5000, len(hs))]
		ids := make([]int64, len(batch))
		names := make([]string, len(batch))
		tsregs := make([]time.Time, len(batch))
		var pa, pp []int64
		for i, h := range batch {
			ids[i], names[i], tsregs[i] = h.ID, h.Soort, h.Tsreg
			for _, p := range h.Personen {
				pa, pp = append(pa, h.ID), append(pp, p)
			}
		}
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return fmt.Errorf("load: begin: %w", err)
		}
		for _, st := range []struct {
			what string
			sql  string
			args []any
		}{
			{"kern.admhnd", kernHandelingenSQL, []any{pq.Array(ids), pq.Array(names), pq.Array(tsregs), ExcludedSoort}},
			{"kern.pers", kernPersonenSQL, []any{pq.Array(pp)}},
			{"kern.his_persafgeleidadministrati", kernHisSQL, []any{pq.Array(ids), pq.Array(tsregs), pq.Array(pa), pq.Array(pp)}},
		} {
			if _, err := tx.ExecContext(ctx, st.sql, st.args...); err != nil {
				tx.Rollback() //nolint:errcheck // the error is the statement's
				return fmt.Errorf("load: insert %s: %w", st.what, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("load: commit: %w", err)
		}
	}
	return nil
}
