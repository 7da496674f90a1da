package levering

import "github.com/brp/levering/handeling"

// batchLocksSQL is a batch's first statement (handeling.TableLocksSQL): admhnd,
// publicatie_nakomer and levering_onderweg, which applySQL writes, locked in row exclusive
// mode before lockSQL and checkSQL read them, and the indexes of admhnd_persoon, which
// checkSQL reads, in the order a REINDEX takes them. A batch read admhnd (lockSQL's row locks take only a RowShareLock) and
// wrote it later: a REINDEX of admhnd that took its ShareLock in between deadlocked with it.
// It has no parameters and is never prepared: it must be planned each time.
var batchLocksSQL = handeling.TableLocksSQL("admhnd", "publicatie_nakomer", "levering_onderweg")
