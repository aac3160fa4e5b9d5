package hedgepgx

import (
	"errors"

	"github.com/tailcut/hedge/internal/sqlread"
)

// ErrNotRead is matched (errors.Is) by the error of a hedged read whose
// SQL is not one read statement: it does not start with SELECT, WITH,
// VALUES, TABLE or SHOW, holds several statements, has a WITH that
// writes, or has a quote or comment not closed.
var ErrNotRead = errors.New("hedgepgx: not a read")

// checkRead refuses SQL that is not one read statement (see "Reads" in
// the package doc). It is a guard, not a proof: a SELECT may call a
// function that writes.
func checkRead(sql string) error {
	return sqlread.Refuse(ErrNotRead, sqlread.Check(sql), "Exec or ExecLSN")
}
