package levering

import "github.com/brp/levering/handeling"

// batchLocksSQL is a batch's first statement (handeling.TableLocksSQL): admhnd,
// publicatie_nakomer and levering_onderweg, which applySQL writes, locked in row exclusive
// mode before lockSQL and checkSQL read them, and the indexes of admhnd_persoon, which
// checkSQL reads, in the order a REINDEX takes them. A batch read admhnd (lockSQL's row locks take only a RowShareLock) and
// wrote it later: a REINDEX of admhnd that took its ShareLock in between deadlocked with it.
// It has no parameters and is never prepared: it must be planned each time.
//
// It also turns off Memoize for the batch's transaction: checkSQL probes admhnd once for each
// handeling of each person of the batch, by keys that never repeat within a person, so the
// cache only costs (a person with 10,000 handelingen: 35 against 22 ms a check, measured). A
// SET LOCAL here costs no round trip of its own; the prepared statements are planned (custom
// plans, then the generic one) in such transactions only.
var batchLocksSQL = "set local enable_memoize = off; " + handeling.TableLocksSQL("admhnd", "publicatie_nakomer", "levering_onderweg")
