package handeling

// BlocksSQL is the rule for a handeling that holds back its persons' later handelingen, as an
// SQL predicate on a row of admhnd (columns unqualified): it is in levering or, under the
// strict fout policy, in fout and not released by an operator. strict is an SQL boolean
// expression, usually a parameter ("$1"). The publisher's selection (publicatie) and the
// operator's blocked persons (operate) both read it from here, so the status page cannot
// disagree with the publisher.
//
// Each disjunct implies a partial index's predicate (admhnd_in_levering_idx, admhnd_fout_idx),
// so it is read through those two indexes (a BitmapOr, seen in EXPLAIN with 300,000 delivered
// rows), never the delivered history. operate used to write it as a union of two scans of
// one index each; the cost was the same there.
func BlocksSQL(strict string) string {
	return "statuslev = " + InLeveringSQL + " or (" + strict + " and statuslev = " + FoutSQL + " and vrijgegeven is null)"
}

// NotExcludedSQL is the predicate, on a row of admhnd, that its soort is not in the text
// array excluded (an SQL expression, usually a parameter "$1"). With "statuslev is null" it
// says a handeling is still to be delivered (the backlog).
func NotExcludedSQL(excluded string) string {
	return "soort <> all(" + excluded + "::text[])"
}

// NotExcludedDefaultSQL is NotExcludedSQL for the default exclusion with that soort written
// in: the predicate of index admhnd_te_leveren_zonder_iv_idx, so that also the generic plan of
// a prepared statement uses the index (with soort <> all($n) it sorted every candidate
// instead: measured). Use it when IsDefaultExcluded.
const NotExcludedDefaultSQL = "soort <> '" + InitieleVulling + "'"
