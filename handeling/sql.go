package handeling

import (
	"strconv"
	"time"
)

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
	return "statuslev = " + InLeveringSQL + " or (" + strict + " and " + UnreleasedFoutSQL + ")"
}

// UnreleasedFoutSQL is the predicate, on a row of admhnd, of a fout handeling no operator
// released: under the strict policy it blocks its persons (BlocksSQL, ReadHeld).
const UnreleasedFoutSQL = "statuslev = " + FoutSQL + " and vrijgegeven is null"

// NotExcludedSQL is the predicate, on a row of admhnd, that its soort is not in the text
// array excluded (an SQL expression, usually a parameter "$1"). With "statuslev is null" it
// says a handeling is still to be delivered (the backlog).
func NotExcludedSQL(excluded string) string {
	return "soort <> all(" + excluded + "::text[])"
}

// ToDeliverSQL is the predicate, on an unqualified row of admhnd, that the handeling is still
// to be delivered (the backlog): statuslev NULL and its soort not in the text array excluded.
func ToDeliverSQL(excluded string) string {
	return "statuslev is null and " + NotExcludedSQL(excluded)
}

// NotExcludedDefaultSQL is NotExcludedSQL for the default exclusion with that soort written
// in: the predicate of index admhnd_te_leveren_zonder_iv_idx, so that also the generic plan of
// a prepared statement uses the index (with soort <> all($n) it sorted every candidate
// instead: measured). Use it when IsDefaultExcluded.
const NotExcludedDefaultSQL = "soort <> '" + InitieleVulling + "'"

// The accepted range of tsreg: TsregFrom <= tsreg < TsregUntil. A tsreg outside it ('-infinity',
// 'infinity', a date before year 1 or from the year 10,000 on, or the first and last day of
// the calendar, where time zones would carry it across) cannot be ordered or encoded
// meaningfully (a verzending's tsreg is RFC 3339: years 0000-9999): such a handeling is set
// fout at the publisher's intake with FoutTsreg, never published, and blocks its persons as
// any fout does.
var (
	TsregFrom  = time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	TsregUntil = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// TsregAcceptedSQL is the predicate, on a row of admhnd, that its tsreg is in the accepted
// range (the same bounds as TsregFrom and TsregUntil, written in).
const TsregAcceptedSQL = "(tsreg >= '0001-01-02 00:00:00+00' and tsreg < '9999-12-31 00:00:00+00')"

// FoutTsreg is the foutreden of a handeling whose tsreg lies outside the accepted range.
const FoutTsreg = "tsreg buiten het geaccepteerde bereik [0001-01-02, 9999-12-31): niet te ordenen of te leveren"

// TsregAcceptedOn is TsregAcceptedSQL on the tsreg column col (qualified: "a.tsreg").
func TsregAcceptedOn(col string) string {
	return "(" + col + " >= '0001-01-02 00:00:00+00' and " + col + " < '9999-12-31 00:00:00+00')"
}

// TsregShownOn is the tsreg column col for display: inside the accepted range it is itself,
// outside it is clamped to the range's ends, so that a handeling refused for its tsreg
// ('-infinity', a date before year 1) can be listed and its age computed (lib/pq and JSON
// cannot carry those values).
func TsregShownOn(col string) string {
	return "greatest(least(" + col + ", '9999-12-30 23:59:59+00'::timestamptz), '0001-01-02 00:00:00+00'::timestamptz)"
}

// FutureSkew is how far a handeling's tsreg may lie ahead of the database clock before it
// counts as registered in the future (FutureSQL): counted, logged and alerted on. The
// contract's normal case is a tsreg a little before its transaction's start, from a clock that
// may differ from the database's by some hundreds of milliseconds; 5 s is ten times that, so
// the normal case never counts, and short enough that a handeling that would wait 5 s or more
// (the publisher takes a handeling only once its tsreg has passed) is seen.
const FutureSkew = 5 * time.Second

// FutureSQL is the predicate, on a row of admhnd, that its tsreg lies more than FutureSkew
// ahead of the database clock (now(), the transaction's start). A range on tsreg: with the
// predicate of the index of open work it reads only that index's end.
var FutureSQL = "tsreg > now() + interval '" + strconv.FormatInt(FutureSkew.Milliseconds(), 10) + " milliseconds'"
