package handeling

import (
	"slices"
	"time"
)

// The rules on a handeling's status that the parts share, in Go. The statements apply the same
// rules through the schema's SQL functions (migration 0013: publicatie_to_deliver,
// publicatie_unreleased_fout, publicatie_blocks, publicatie_tsreg_accepted); rules_test.go
// compares each with its function on generated cases.

// ToDeliver says whether a handeling is still to be delivered (the backlog): TeLeveren and its
// soort not excluded.
func ToDeliver(s Status, soort string, excluded []string) bool {
	return s == TeLeveren && !slices.Contains(excluded, soort)
}

// UnreleasedFout says whether a handeling is in fout and no operator released it: under the
// strict policy it holds back its persons.
func UnreleasedFout(s Status, released bool) bool {
	return s == Fout && !released
}

// Blocks says whether a handeling holds back its persons' later handelingen as the publisher
// and the consumers see it: in levering or, under the strict policy, an unreleased fout. (One
// still to be delivered holds them back by being older: that is the order, not this rule.)
func Blocks(s Status, released, strict bool) bool {
	return s == InLevering || strict && UnreleasedFout(s, released)
}

// The accepted range of tsreg: TsregFrom <= tsreg < TsregUntil. A tsreg outside it ('-infinity',
// 'infinity', a date before year 1 or from the year 10,000 on, or the first and last day of
// the calendar, where time zones would carry it across) cannot be ordered or encoded
// meaningfully (a verzending's tsreg is RFC 3339: years 0000-9999): such a handeling is set
// fout at the publisher's intake with FoutTsreg, never published, and blocks its persons as
// any fout does. The schema's publicatie_tsreg_from and publicatie_tsreg_until are the same.
var (
	TsregFrom  = time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	TsregUntil = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// TsregAccepted says whether tsreg lies in the accepted range.
func TsregAccepted(tsreg time.Time) bool {
	return !tsreg.Before(TsregFrom) && tsreg.Before(TsregUntil)
}

// FoutTsreg is the foutreden of a handeling whose tsreg lies outside the accepted range.
const FoutTsreg = "tsreg buiten het geaccepteerde bereik [0001-01-02, 9999-12-31): niet te ordenen of te leveren"

// FutureSkew is how far a handeling's tsreg may lie ahead of the database clock before it
// counts as registered in the future: counted, logged and alerted on. The contract's normal
// case is a tsreg a little before its transaction's start, from a clock that may differ from
// the database's by some hundreds of milliseconds; 5 s is ten times that, so the normal case
// never counts, and short enough that a handeling that would wait 5 s or more (the publisher
// takes a handeling only once its tsreg has passed) is seen. The statements take it as a
// parameter.
const FutureSkew = 5 * time.Second
