package schema

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/brp/levering/handeling"
)

// The grants files (grants/contract.sql, grants/kern.sql) are the one list of the rights the
// service's runtime role has: a DBA runs them with psql, and MissingRights reads the same
// files to check, at the start of every process, that the role it runs as has each of them.

// GrantsFile is the grants file of layout l, as a DBA runs it with psql.
func GrantsFile(l handeling.Layout) (string, error) {
	name := "grants/contract.sql"
	if l.Or() == handeling.Kern {
		name = "grants/kern.sql"
	}
	b, err := migrations.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("schema: %w", err)
	}
	return string(b), nil
}

// Right is one right of the runtime role: Privilege on the object of Kind named Object,
// limited to Column when that is set.
type Right struct {
	Privilege string // select, insert, update, delete, usage, execute
	Kind      string // table, sequence, function or schema
	Object    string // as the grants file names it; "" for a schema: the current schema
	Column    string
}

func (r Right) String() string {
	obj := r.Object
	if obj == "" {
		obj = "(the current schema)"
	}
	on := obj
	if r.Kind != "table" {
		on = r.Kind + " " + obj
	}
	if r.Column != "" {
		return fmt.Sprintf("%s (%s) on %s", r.Privilege, r.Column, on)
	}
	return fmt.Sprintf("%s on %s", r.Privilege, on)
}

var (
	serviceGrant = regexp.MustCompile(`(?is)^grant\s+(.+?)\s+on\s+(?:(sequence|function|schema)\s+)?(.+?)\s+to\s+:"service_role"$`)
	// The contract layout's schema is the current one, named by format() and \gexec.
	serviceSchemaGrant = regexp.MustCompile(`(?is)grant usage on schema %I to %I', current_schema\(\), :'service_role'`)
)

// ServiceRights are the rights the grants file of layout l gives the runtime role.
func ServiceRights(l handeling.Layout) ([]Right, error) {
	text, err := GrantsFile(l)
	if err != nil {
		return nil, err
	}
	var out []Right
	for _, st := range strings.Split(stripComments(text), ";") {
		// A \gexec ends a statement as ';' does: it is on the statement's last line.
		for _, part := range strings.Split(st, `\gexec`) {
			part = strings.TrimSpace(part)
			if serviceSchemaGrant.MatchString(part) {
				out = append(out, Right{Privilege: "usage", Kind: "schema"})
				continue
			}
			m := serviceGrant.FindStringSubmatch(strings.Join(strings.Fields(part), " "))
			if m == nil {
				continue
			}
			kind := strings.ToLower(m[2])
			if kind == "" {
				kind = "table"
			}
			for _, priv := range splitTop(m[1]) {
				name, cols, hasCols := strings.Cut(priv, "(")
				for _, obj := range splitTop(m[3]) {
					if !hasCols {
						out = append(out, Right{Privilege: strings.ToLower(strings.TrimSpace(name)), Kind: kind, Object: obj})
						continue
					}
					for _, c := range strings.Split(strings.TrimSuffix(strings.TrimSpace(cols), ")"), ",") {
						out = append(out, Right{Privilege: strings.ToLower(strings.TrimSpace(name)), Kind: kind, Object: obj, Column: strings.TrimSpace(c)})
					}
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("schema: the grants file of layout %s gives the service's role nothing", l.Or())
	}
	return out, nil
}

// splitTop splits s at the commas outside parentheses and trims the parts.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// The check of one right for the role of the session, by Right.Kind.
var rightSQL = map[string]string{
	"table":    `select has_table_privilege($1, $2)`,
	"column":   `select has_column_privilege($1, $3, $2)`,
	"sequence": `select has_sequence_privilege($1, $2)`,
	"function": `select has_function_privilege($1, $2)`,
	"schema":   `select has_schema_privilege(coalesce(nullif($1, ''), current_schema()), $2)`,
}

// MissingRights returns the rights of the grants file of layout l that the session's role
// (current_user) lacks: none for a superuser or the owner. Run it after Check: every object
// the file names exists then.
func MissingRights(ctx context.Context, db *sql.DB, l handeling.Layout) ([]Right, error) {
	rights, err := ServiceRights(l)
	if err != nil {
		return nil, err
	}
	var missing []Right
	for _, r := range rights {
		q, args := rightSQL[r.Kind], []any{r.Object, r.Privilege}
		if r.Column != "" {
			q, args = rightSQL["column"], []any{r.Object, r.Privilege, r.Column}
		}
		var ok bool
		if err := db.QueryRowContext(ctx, q, args...).Scan(&ok); err != nil {
			return nil, fmt.Errorf("schema: check the right %s: %w", r, err)
		}
		if !ok {
			missing = append(missing, r)
		}
	}
	return missing, nil
}
