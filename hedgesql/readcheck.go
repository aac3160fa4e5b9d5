package hedgesql

import (
	"errors"

	"github.com/tailcut/hedge/internal/sqlread"
)

// ErrNotRead is matched (errors.Is) by the error of QueryRow's Scan and
// of Collect when the SQL is not one read statement: it does not start
// with SELECT, WITH, VALUES, TABLE or SHOW, holds several statements,
// has a WITH that writes, or has a quote or comment not closed.
var ErrNotRead = errors.New("hedgesql: not a read")

// checkRead refuses SQL that is not one read statement, read as
// PostgreSQL reads it and also with a backslash escaping quotes (as MySQL
// does; see "Reads" in the package doc). It is a guard, not a proof: a
// SELECT may call a function that writes.
func checkRead(query string) error {
	return sqlread.Refuse(ErrNotRead, sqlread.Check(query, sqlread.Backslash), "Exec")
}
