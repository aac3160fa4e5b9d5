package hedgesql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/dialerr"
	"github.com/tailcut/hedge/internal/rowscan"
)

// Read runs fn as a hedged read: fn is called once per copy, each with
// the database of the server chosen for it and the copy's context, and
// the first copy to succeed gives the result. op is the operation class
// (delay estimates and stats are kept per class: use a small fixed set of
// names). fn must be a read (see "Reads" in the package doc), honour its
// context, and keep everything it acquires inside the copy: read rows to
// the end and close them, end transactions, before it returns. A
// returned error that is an answer (see "Reads" in the package doc) or
// is marked hedge.Permanent ends the read with it; other errors fail the
// copy, and another copy goes at once.
//
// Read does not look at what fn sends: QueryRow and Collect check the
// SQL too.
func Read[T any](ctx context.Context, c *Client, op string, fn func(ctx context.Context, db *sql.DB) (T, error)) (T, error) {
	var zero T
	if c.gate.Closed() {
		return zero, ErrClosed
	}
	ans, err := hedge.Do(ctx, c.h, op, func(ctx context.Context, a hedge.Attempt) (answer[T], error) {
		return runCopy(ctx, c, a.Replica, fn)
	})
	if err != nil {
		return zero, err
	}
	c.servers[ans.server].Wins.Add(1)
	return ans.v, ans.err
}

// answer is what one copy returns: a value or an answer error, and the
// server it came from.
type answer[T any] struct {
	v      T
	err    error
	server int
}

// runCopy runs one copy of a read on server i.
func runCopy[T any](ctx context.Context, c *Client, i int, fn func(context.Context, *sql.DB) (T, error)) (answer[T], error) {
	if !c.gate.Enter() {
		return answer[T]{}, hedge.Permanent(ErrClosed)
	}
	defer c.gate.Leave()
	rs := &c.servers[i]
	rs.Copies.Add(1)
	rs.InFlight.Add(1)
	defer rs.InFlight.Add(-1)
	v, err := fn(ctx, c.dbs[i])
	if err == nil || ctx.Err() == nil && c.isAnswer(err) {
		return answer[T]{v: v, err: err, server: i}, nil
	}
	if ctx.Err() != nil {
		rs.Cancelled.Add(1)
	} else {
		rs.Failed.Add(1)
	}
	return answer[T]{server: i}, dialerr.Mark(err)
}

// isAnswer reports whether err, from a copy whose context is still live,
// is an answer that ends the read.
func (c *Client) isAnswer(err error) bool {
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.Is(err, errBadDest), isScanError(err):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return !c.unavailable(err)
}

// isScanError reports whether err is database/sql's error of a value that
// did not convert into its destination, or of a Scan given the wrong
// number of destinations: the caller's mistake, the same on every server.
func isScanError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "sql: Scan error on column") || strings.HasPrefix(msg, "sql: expected ")
}

// DefaultUnavailable is the rule Config.Unavailable replaces: it reports
// whether err says that its server, or the connection to it, cannot
// serve now: driver.ErrBadConn, sql.ErrConnDone, a network error, an
// unexpected end of the connection (io.EOF, io.ErrUnexpectedEOF), or an
// error with a SQLSTATE (a method SQLState() string) of class 08, 53, 57
// or 58, or 40001.
func DefaultUnavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &ne):
		return true
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		return unavailableState(st.SQLState())
	}
	return false
}

// unavailableState reports whether a SQLSTATE says "not this server, not
// now": a connection exception (08), insufficient resources (53),
// operator intervention (57), a system error (58), or a serialization
// failure (40001, what a hot standby reports when replay cancels a
// query).
func unavailableState(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", "53", "57", "58":
		return true
	}
	return code == "40001"
}

// Collect runs the query with args as a hedged read and returns its
// rows, each made by scan from the current row (a func calling
// rows.Scan). Each copy reads its rows to the end, checks rows.Err and
// closes them; only the winner's are kept. The operation class is the
// SQL text. query must be one read statement (ErrNotRead otherwise;
// see "Reads" in the package doc).
func Collect[T any](ctx context.Context, c *Client, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	if err := checkRead(query); err != nil {
		return nil, err
	}
	return Read(ctx, c, query, func(ctx context.Context, db *sql.DB) ([]T, error) {
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []T
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return out, rows.Close()
	})
}

// Row is the result of QueryRow: the query runs, hedged, when Scan is
// called.
type Row struct {
	c     *Client
	ctx   context.Context
	query string
	args  []any
}

// QueryRow returns a Row for the query with args, a hedged read run by
// Row.Scan, like sql.DB.QueryRowContext. The operation class is the SQL
// text.
func (c *Client) QueryRow(ctx context.Context, query string, args ...any) Row {
	return Row{c: c, ctx: ctx, query: query, args: args}
}

var errBadDest = errors.New("hedgesql: Row.Scan needs non-nil pointers")

// Scan runs the query and scans the first row's columns into dest, as
// sql.Row.Scan does; sql.ErrNoRows if there is none. Each copy scans into
// values of its own (new values of dest's element types), and only the
// winner's are copied into dest, on the caller's goroutine: dest must be
// non-nil pointers (*sql.RawBytes is refused, as sql.Row refuses it). A
// destination that holds state of its own beyond its value (a Scanner
// with a pointer inside) gets the winner's copy of that state.
func (r Row) Scan(dest ...any) error {
	if err := checkRead(r.query); err != nil {
		return err
	}
	types := make(rowscan.Types, len(dest))
	for i, d := range dest {
		t, ok := rowscan.ElemType(d)
		if d == nil || !ok {
			return fmt.Errorf("%w: dest[%d] is a %T", errBadDest, i, d)
		}
		if _, raw := d.(*sql.RawBytes); raw {
			return fmt.Errorf("%w: dest[%d] is a *sql.RawBytes, which holds the driver's memory only until the rows close; scan into a *[]byte", errBadDest, i)
		}
		types[i] = t
	}
	vals, err := Read(r.ctx, r.c, r.query, func(ctx context.Context, db *sql.DB) ([]reflect.Value, error) {
		ptrs, tmp := types.New()
		return ptrs, db.QueryRowContext(ctx, r.query, r.args...).Scan(tmp...)
	})
	if err != nil {
		return err
	}
	rowscan.Set(dest, vals)
	return nil
}
