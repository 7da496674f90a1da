package publicatie

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// readCandidates returns up to limit handelingen still to be delivered (statuslev NULL, soort
// not excluded), oldest tsreg first, ties by id, each with all of its persons. The limit
// counts handelingen, so a multi-person handeling is never cut in half.
func readCandidates(ctx context.Context, tx *sqlx.Tx, excluded []string, limit int) ([]Candidate, error) {
	rows, err := tx.QueryContext(ctx, `
		with c as (
			select id, tsreg from admhnd
			where statuslev is null and soort <> all($1::text[])
			order by tsreg, id
			limit $2
		)
		select c.id, p.persoon_id
		from c left join admhnd_persoon p on p.admhnd_id = c.id
		order by c.tsreg, c.id, p.persoon_id`, pq.Array(excluded), limit)
	if err != nil {
		return nil, fmt.Errorf("read candidates: %w", err)
	}
	defer rows.Close()
	var out []Candidate
	for rows.Next() {
		var id int64
		var persoon sql.NullInt64
		if err := rows.Scan(&id, &persoon); err != nil {
			return nil, fmt.Errorf("read candidates: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].ID != id {
			out = append(out, Candidate{ID: id})
		}
		if persoon.Valid {
			last := &out[len(out)-1]
			last.Personen = append(last.Personen, persoon.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read candidates: %w", err)
	}
	return out, nil
}

// countInLevering counts the handelingen in flight.
func countInLevering(ctx context.Context, tx *sqlx.Tx) (int, error) {
	var n int
	if err := tx.GetContext(ctx, &n, `select count(*) from admhnd where statuslev = 'in_levering'`); err != nil {
		return 0, fmt.Errorf("count in_levering: %w", err)
	}
	return n, nil
}

// readBlocked returns the persons that may not receive a new handeling now: those with a
// handeling in levering and, under the strict policy, those with a fout handeling that no
// operator released.
func readBlocked(ctx context.Context, tx *sqlx.Tx, policy FoutPolicy) (map[int64]struct{}, error) {
	rows, err := tx.QueryContext(ctx, `
		select distinct p.persoon_id
		from admhnd a join admhnd_persoon p on p.admhnd_id = a.id
		where a.statuslev = 'in_levering' or ($1 and a.statuslev = 'fout' and a.vrijgegeven is null)`, policy == Strict)
	if err != nil {
		return nil, fmt.Errorf("read blocked persons: %w", err)
	}
	defer rows.Close()
	blocked := map[int64]struct{}{}
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("read blocked persons: %w", err)
		}
		blocked[p] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read blocked persons: %w", err)
	}
	return blocked, nil
}

// markInLevering sets the given handelingen in_levering where they are still NULL and returns
// the ids it changed. A handeling a consumer already finished (a copy from a round whose
// database commit failed) is not touched and must not be sent again.
func markInLevering(ctx context.Context, tx *sqlx.Tx, ids []int64) (map[int64]bool, error) {
	rows, err := tx.QueryContext(ctx, `
		update admhnd set statuslev = 'in_levering', tspub = now()
		where id = any($1) and statuslev is null
		returning id`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("mark in_levering: %w", err)
	}
	defer rows.Close()
	marked := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("mark in_levering: %w", err)
		}
		marked[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mark in_levering: %w", err)
	}
	return marked, nil
}
