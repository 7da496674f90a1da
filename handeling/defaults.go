package handeling

// The contract's defaults (docs/contract.md section 2). The packages' Configs take them for zero
// fields; the commands leave a field zero when its variable is unset, and --help shows them.
const (
	// PublicationQueue is where the publisher puts publications and consumers take them.
	PublicationQueue = "/queue/brp.levering.admhndpublicatie"
	// VerzendingQueue is where consumers put delivered handelingen for the afnemers.
	VerzendingQueue = "/queue/brp.levering.verzending"
	// DeadLetterQueue is where consumers set aside publications they cannot read.
	DeadLetterQueue = "/queue/brp.levering.admhndpublicatie.dlq"
	// Cluster is the polling cluster (lease) of a publisher that names none.
	Cluster = "default"
)

// InitieleVulling is the soort of an initial load: excluded by default, and left out of the
// publisher's selection index (schema migration 0006), so queries that write it in as a
// constant use that index.
const InitieleVulling = "GBA_INITIELE_VULLING"

// DefaultExcluded returns the soorten excluded when none are configured: {InitieleVulling}. A
// new slice every call, so no caller can change another's.
func DefaultExcluded() []string { return []string{InitieleVulling} }

// IsDefaultExcluded says whether excluded is exactly the default exclusion, for which
// queries have a form with the soort written in.
func IsDefaultExcluded(excluded []string) bool {
	return len(excluded) == 1 && excluded[0] == InitieleVulling
}

// NotifyChannel is the channel the schema's triggers NOTIFY when handelingen are inserted or
// change status (migration 0003), and operators' releases notify by hand: the publisher
// LISTENs on it.
const NotifyChannel = "brp_levering"

// MetricsNamespace prefixes every metric of the service (brp_levering_...).
const MetricsNamespace = "brp_levering"

// FoutPolicy says whether a handeling in fout holds back later handelingen of its persons.
type FoutPolicy string

const (
	// Strict (the default) holds later handelingen of a fout handeling's persons back until an
	// operator retries or releases it: per-person order is never broken silently.
	Strict FoutPolicy = "strict"
	// Skip lets later handelingen pass a fout one (what the BRP code does).
	Skip FoutPolicy = "skip"
)

// Valid says whether p is Strict or Skip.
func (p FoutPolicy) Valid() bool { return p == Strict || p == Skip }
