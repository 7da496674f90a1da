package handeling

import (
	"database/sql/driver"
	"fmt"
)

// Status is a handeling's statuslev (docs/contract.md section 1). The four values are fixed by the
// contract; TeLeveren stands for NULL.
type Status string

// The statuses, in the order a handeling passes them.
const (
	// TeLeveren (NULL in the database): still to be delivered, unless its soort is excluded.
	TeLeveren Status = ""
	// InLevering: published, not yet confirmed by a consumer.
	InLevering Status = "in_levering"
	// Geleverd: delivered; tslev says when. The end for all but a retried fout.
	Geleverd Status = "geleverd"
	// Fout: a known error (foutreden says which). tslev stays NULL. An operator retries it
	// (back to TeLeveren) or releases it (vrijgegeven).
	Fout Status = "fout"
)

// FoutOvertaken is the foutreden a consumer gives a handeling of which a newer handeling of one
// of its persons was already delivered (bijhouding registered it, or its persons, late):
// delivered now, it would reach afnemers after that newer one. An operator decides; a retry
// delivers it all the same.
const FoutOvertaken = "ingehaald: een nieuwere handeling van een van zijn personen was al geleverd"

// FoutGeenPersonen is the foutreden a consumer gives a handeling without bijgehouden personen
// (a known error, docs/contract.md section 5).
const FoutGeenPersonen = "handeling heeft geen bijgehouden personen"

// Scan reads a statuslev column: NULL is TeLeveren, text is taken as it is (the contract's
// check constraint may be missing where bijhouding created the table).
func (s *Status) Scan(src any) error {
	switch x := src.(type) {
	case nil:
		*s = TeLeveren
	case string:
		*s = Status(x)
	case []byte:
		*s = Status(x)
	default:
		return fmt.Errorf("handeling: statuslev of type %T", src)
	}
	return nil
}

// Value writes s as a statuslev query argument: TeLeveren is NULL.
func (s Status) Value() (driver.Value, error) {
	if s == TeLeveren {
		return nil, nil
	}
	return string(s), nil
}
