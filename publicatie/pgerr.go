package publicatie

import (
	"database/sql"
	"errors"

	"github.com/lib/pq"
)

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

func isLockTimeout(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "55P03"
}
