package handeling

import "fmt"

// Layout says which tables hold the handelingen (docs/contract.md section 1,
// BRP_DATABASE_LAYOUT). The zero value is Contract.
type Layout string

const (
	// Contract is the contract's admhnd and admhnd_persoon, statuslev NULL or a name, with the
	// service's own columns and tables beside them in the same schema.
	Contract Layout = "contract"
	// Kern is the BRP kern schema as it is: kern.admhnd (statuslev codes 1-5, soort srt) and
	// kern.his_persafgeleidadministrati (a handeling's persons). The service writes only tslev
	// and statuslev there; its own tables and functions live in schema ServiceSchema.
	Kern Layout = "kern"
)

// ServiceSchema is the database schema of the service's own tables, functions and views in
// the Kern layout. Its sessions have it as their search_path.
const ServiceSchema = "brp_levering"

// ParseLayout reads a BRP_DATABASE_LAYOUT value; "" is Contract.
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case "", Contract:
		return Contract, nil
	case Kern:
		return Kern, nil
	default:
		return "", fmt.Errorf("%q: expected contract or kern", s)
	}
}

// Or returns l, or Contract when l is zero.
func (l Layout) Or() Layout {
	if l == "" {
		return Contract
	}
	return l
}

// Valid says whether l is zero, Contract or Kern.
func (l Layout) Valid() bool { return l == "" || l == Contract || l == Kern }

// Dir is the directory of the layout's own statement files under a package's sql/ (package
// sqltext): "" for Contract, whose statements are sql/ itself.
func (l Layout) Dir() string {
	if l.Or() == Contract {
		return ""
	}
	return string(l)
}

// SearchPath is the search_path of the layout's sessions: "" (the server's default) for
// Contract, ServiceSchema for Kern.
func (l Layout) SearchPath() string {
	if l.Or() == Contract {
		return ""
	}
	return ServiceSchema
}

// KernInitieleVulling is the kern's soort of an initial load (kern.srtadmhnd id 37), which
// bijhouding registers with status 2 (niet leveren).
const KernInitieleVulling = "GBA - Initiële vulling"

// DefaultExcluded returns the soorten excluded in layout l when none are configured, by the
// names a handeling's soort has there: {InitieleVulling} in the contract's tables, the kern's
// soort 37 by its naam. A new slice every call, so no caller can change another's.
func (l Layout) DefaultExcluded() []string {
	if l.Or() == Kern {
		return []string{KernInitieleVulling}
	}
	return DefaultExcluded()
}

// IsDefaultExcluded says whether excluded is exactly l's default exclusion, for which queries
// have a form with the soort written in.
func (l Layout) IsDefaultExcluded(excluded []string) bool {
	d := l.DefaultExcluded()
	return len(excluded) == 1 && excluded[0] == d[0]
}

// Layouts are every layout, in the order their statements are loaded.
var Layouts = []Layout{Contract, Kern}

// PerLayout holds one T for each of Layouts: a package's statements in each layout.
type PerLayout[T any] map[Layout]T

// LoadPerLayout calls load once for each of Layouts.
func LoadPerLayout[T any](load func(Layout) T) PerLayout[T] {
	p := PerLayout[T]{}
	for _, l := range Layouts {
		p[l] = load(l)
	}
	return p
}

// For returns the T of layout l (zero: Contract's).
func (p PerLayout[T]) For(l Layout) T { return p[l.Or()] }
