package hedgepgx

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/dialerr"
	"github.com/tailcut/hedge/internal/rowscan"
)

// errNowhere is the error of a copy that had no eligible server left to
// go to, once the other copies of its read had all ended.
var errNowhere = errors.New("hedgepgx: no other server may serve this read (WithMinLSN, Config.MaxLag)")

// Read runs fn as a hedged read: fn is called once per copy, each with
// the copy's context and a connection of the pool of the server chosen
// for it, and the first copy to succeed gives the result. op is the
// operation class (delay estimates and stats are kept per class: use a
// small fixed set of names). fn must be a read (see "Reads" in the
// package doc), honour its context, and keep everything it acquires
// inside the copy: read rows to the end and end transactions before it
// returns. The connection goes back to its pool when fn returns; do not
// keep it. A returned error ends the read with that error if it is an
// answer a server gave (any SQLSTATE but those that say the server cannot
// serve now), pgx.ErrNoRows or a scan error, or is marked hedge.Permanent;
// other errors (the connection failed, the pool is closed) fail the copy,
// and another copy goes at once.
//
// With a minimum position (WithMinLSN), a copy on a replica first reads
// the replica's position on the connection it hands to fn, a round trip
// of its own, and goes elsewhere if the replica is behind (see "Lag and
// consistency" in the package doc).
//
// Read does not look at what fn sends: Collect, CollectOne, QueryRow and
// ExecRead check the SQL too.
func Read[T any](ctx context.Context, c *Client, op string, fn func(ctx context.Context, conn *pgxpool.Conn) (T, error)) (T, error) {
	return read(ctx, c, op, func(ctx context.Context, i int, conn *pgxpool.Conn, need LSN) (T, error) {
		if need != 0 {
			var pos *string
			var iso string
			if err := conn.QueryRow(ctx, checkSQL).Scan(&pos, &iso); err != nil {
				var zero T
				return zero, err
			}
			if err := c.caughtUp(i, pos, need); err != nil {
				var zero T
				return zero, err
			}
		}
		return fn(ctx, conn)
	})
}

// copyFunc runs one copy of a read on conn, a connection to server i,
// after checking on conn that the server has replayed up to need, when
// need is not 0.
type copyFunc[T any] func(ctx context.Context, i int, conn *pgxpool.Conn, need LSN) (T, error)

// read is Read for a copyFunc: the read methods all run through it.
func read[T any](ctx context.Context, c *Client, op string, fn copyFunc[T]) (T, error) {
	var zero T
	if c.gate.Closed() {
		return zero, ErrClosed
	}
	min := MinLSN(ctx)
	set, err := c.eligible(min)
	if err != nil {
		return zero, err
	}
	if bits.OnesCount64(set) == 1 {
		// One server may serve it: send it there once (counted in
		// hedge.Stats.Unhedgeable).
		ctx = hedge.NotIdempotent(ctx)
	}
	cs := &call{set: set, min: min}
	ans, err := hedge.Do(ctx, c.h, op, func(ctx context.Context, a hedge.Attempt) (answer[T], error) {
		return runCopy(ctx, c, cs, a, fn)
	})
	if err != nil {
		return zero, err
	}
	c.reps[ans.replica].Wins.Add(1)
	return ans.v, ans.err
}

// behindError is the error of a copy whose server, checked on the copy's
// own connection, had not replayed up to the read's minimum position. It
// matches ErrNotCaughtUp.
type behindError struct {
	server  int
	at, min LSN
}

func (e *behindError) Error() string {
	return fmt.Sprintf("hedgepgx: server %d had replayed only up to %v, short of the read's minimum position %v (it restarted or fell behind since its position was read), and no other server of the read was left: retry the read later, or read from the primary",
		e.server, e.at, e.min)
}

func (e *behindError) Unwrap() error { return ErrNotCaughtUp }

// caughtUp checks pos, server i's position read on a copy's connection,
// against need: nil if the server has replayed that far, a behindError
// otherwise (the known position is lowered to pos, so that reads that
// need more go elsewhere).
func (c *Client) caughtUp(i int, pos *string, need LSN) error {
	r := &c.reps[i]
	if pos == nil {
		return &behindError{server: i, min: need}
	}
	l, err := ParseLSN(*pos)
	if err != nil {
		return err
	}
	if l < need {
		r.lower(l)
		return &behindError{server: i, at: l, min: need}
	}
	r.observe(l)
	return nil
}

// answer is what one copy returns: a value or an answer error, and the
// server it came from.
type answer[T any] struct {
	v       T
	err     error
	replica int
}

// call is the state of one read shared by its copies: the servers it may
// go to and those already holding a copy.
type call struct {
	min     LSN // the read's minimum position, 0 for none
	mu      sync.Mutex
	set     uint64 // eligible servers
	used    uint64 // servers given a copy
	running int
	idle    chan struct{} // closed when running drops to 0
}

// take returns the server for a copy the Hedger sent to want: want
// itself if it is eligible and holds no copy of the read, else the
// eligible server without one that has the fewest copies in flight, or
// -1 when there is none.
func (cs *call) take(c *Client, want int) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	free := cs.set &^ cs.used
	i := -1
	if want >= 0 && free&(1<<want) != 0 {
		i = want
	} else {
		for free != 0 {
			j := bits.TrailingZeros64(free)
			free &^= 1 << j
			if i < 0 || c.reps[j].InFlight.Load() < c.reps[i].InFlight.Load() {
				i = j
			}
		}
	}
	if i >= 0 {
		cs.used |= 1 << i
		cs.running++
	}
	return i
}

func (cs *call) done() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.running--
	if cs.running == 0 && cs.idle != nil {
		close(cs.idle)
		cs.idle = nil
	}
}

// whenIdle returns a channel closed once no copy of the read runs on a
// server.
func (cs *call) whenIdle() <-chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ch := make(chan struct{})
	if cs.running == 0 {
		close(ch)
	} else if cs.idle == nil {
		cs.idle = ch
	} else {
		ch = cs.idle
	}
	return ch
}

// runCopy runs one copy of a read. The Hedger chose a.Replica from every
// server; a server the read may not go to (it is not known to have
// replayed to the read's minimum position, or lags beyond MaxLag) or that
// already holds a copy is replaced by an eligible one (counted in
// Redirected). A copy with nowhere to go sends nothing: it waits until
// the read ends or its other copies have all ended, and fails then. On a
// server other than the primary, a read with a minimum position is
// checked on the copy's connection: a server found behind has its answer
// dropped, and the copy moves on to another eligible server that holds
// no copy (the primary, if none else), as a redirect; with none left, it
// fails as hedge.NotSent.
func runCopy[T any](ctx context.Context, c *Client, cs *call, a hedge.Attempt, fn copyFunc[T]) (answer[T], error) {
	if !c.gate.Enter() {
		return answer[T]{}, hedge.Permanent(ErrClosed)
	}
	defer c.gate.Leave()
	want := a.Replica
	var behind error
	for {
		i := cs.take(c, want)
		if i < 0 {
			if behind != nil {
				return answer[T]{}, hedge.NotSent(behind)
			}
			select {
			case <-ctx.Done():
				return answer[T]{}, ctx.Err()
			case <-cs.whenIdle():
				return answer[T]{}, errNowhere
			}
		}
		ans, err := runOn(ctx, c, cs, i, i != a.Replica, fn)
		var be *behindError
		if !errors.As(err, &be) {
			return ans, err
		}
		behind, want = err, -1
	}
}

// runOn runs one copy of a read on server i, which cs.take gave it.
func runOn[T any](ctx context.Context, c *Client, cs *call, i int, redirected bool, fn copyFunc[T]) (answer[T], error) {
	defer cs.done()
	rs := &c.reps[i]
	rs.Copies.Add(1)
	if redirected {
		rs.redirected.Add(1)
	}
	rs.InFlight.Add(1)
	defer rs.InFlight.Add(-1)
	need := cs.min
	if i == c.primary {
		need = 0 // the primary has every commit
	}
	v, err := withConn(ctx, c.pools[i], func(conn *pgxpool.Conn) (T, error) {
		return fn(ctx, i, conn, need)
	})
	if err == nil || isAnswer(err) {
		return answer[T]{v: v, err: err, replica: i}, nil
	}
	var behind *behindError
	if errors.As(err, &behind) {
		rs.behind.Add(1)
		return answer[T]{replica: i}, err
	}
	if ctx.Err() != nil {
		rs.Cancelled.Add(1)
	} else {
		rs.Failed.Add(1)
	}
	return answer[T]{replica: i}, dialerr.Mark(err)
}

// withConn runs fn with a connection of p, released when fn returns.
func withConn[T any](ctx context.Context, p *pgxpool.Pool, fn func(*pgxpool.Conn) (T, error)) (T, error) {
	conn, err := p.Acquire(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	defer conn.Release()
	return fn(conn)
}

// statement is a read's single statement, run on a connection on its
// own (plain) or read from a batch that a check runs ahead of (batched).
type statement[T any] struct {
	plain   func(ctx context.Context, conn *pgxpool.Conn) (T, error)
	batched func(br pgx.BatchResults) (T, error)
}

// runChecked runs st on conn. With need not 0, it runs checkSQL ahead of
// it, in the same round trip (a batch: one implicit transaction), and
// gives the statement's result only if the server had replayed up to
// need. At read committed, PostgreSQL's default, the statement's snapshot
// is taken after the check, so it sees every commit the check saw. At a
// stricter level both share the check's snapshot, taken before the
// position was read: the statement's result is dropped and it runs again
// on its own, in a transaction of its own, after the check.
func runChecked[T any](ctx context.Context, c *Client, i int, conn *pgxpool.Conn, need LSN, sql string, args []any, st statement[T]) (T, error) {
	var zero T
	if need == 0 {
		return st.plain(ctx, conn)
	}
	b := &pgx.Batch{}
	b.Queue(checkSQL)
	b.Queue(sql, args...)
	br := conn.SendBatch(ctx, b)
	var pos *string
	var iso string
	err := br.QueryRow().Scan(&pos, &iso)
	if err == nil {
		err = c.caughtUp(i, pos, need)
	}
	if err != nil || iso != "read committed" {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return zero, err
		}
		return st.plain(ctx, conn)
	}
	v, err := st.batched(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		return zero, cerr
	}
	return v, err
}

// rowsStatement is the statement sql with args whose rows collect reads.
func rowsStatement[T any](sql string, args []any, collect func(pgx.Rows) (T, error)) statement[T] {
	return statement[T]{
		plain: func(ctx context.Context, conn *pgxpool.Conn) (T, error) {
			rows, err := conn.Query(ctx, sql, args...)
			if err != nil {
				var zero T
				return zero, err
			}
			return collect(rows)
		},
		batched: func(br pgx.BatchResults) (T, error) {
			rows, err := br.Query()
			if err != nil {
				if rows != nil {
					rows.Close()
				}
				var zero T
				return zero, err
			}
			return collect(rows)
		},
	}
}

// scanFirst scans the first row of rows into dest and closes them, as
// pgx.Row.Scan does: pgx.ErrNoRows if there is none.
func scanFirst(rows pgx.Rows, dest ...any) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// isAnswer reports whether err is an answer any server would give, which
// ends the read, rather than a failure of this server or connection.
func isAnswer(err error) bool {
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, errBadDest) {
		return true
	}
	var scan pgx.ScanArgError
	if errors.As(err, &scan) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return !replicaState(pe.Code)
	}
	return false
}

// replicaState reports whether a SQLSTATE says "not this server, not
// now": a connection exception (08), insufficient resources (53, such as
// too many connections), operator intervention (57: shutdown, cannot
// connect now, a cancelled statement, a statement timeout), a system
// error (58), or a serialization failure (40001, what a hot standby
// reports when replay cancels a query that conflicts with it).
// read_only_sql_transaction (25006) is an answer: a statement that a
// standby refused as a write must not be tried on the primary.
func replicaState(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", "53", "57", "58":
		return true
	}
	return code == "40001"
}

// Collect runs the query sql with args as a hedged read and returns its
// rows, each made by fn (pgx.RowTo, pgx.RowToStructByName, ...), as
// pgx.CollectRows does. Each copy reads its rows to the end on its own
// connection and returns it to its pool; only the winner's are kept. The
// operation class is the SQL text. sql must be one read statement
// (ErrNotRead otherwise; see "Reads" in the package doc).
func Collect[T any](ctx context.Context, c *Client, fn pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	if err := checkRead(sql); err != nil {
		return nil, err
	}
	st := rowsStatement(sql, args, func(rows pgx.Rows) ([]T, error) { return pgx.CollectRows(rows, fn) })
	return read(ctx, c, sql, func(ctx context.Context, i int, conn *pgxpool.Conn, need LSN) ([]T, error) {
		return runChecked(ctx, c, i, conn, need, sql, args, st)
	})
}

// CollectOne is Collect for the first row: pgx.ErrNoRows when there is
// none (an answer: the read ends with it), as pgx.CollectOneRow.
func CollectOne[T any](ctx context.Context, c *Client, fn pgx.RowToFunc[T], sql string, args ...any) (T, error) {
	if err := checkRead(sql); err != nil {
		var zero T
		return zero, err
	}
	st := rowsStatement(sql, args, func(rows pgx.Rows) (T, error) { return pgx.CollectOneRow(rows, fn) })
	return read(ctx, c, sql, func(ctx context.Context, i int, conn *pgxpool.Conn, need LSN) (T, error) {
		return runChecked(ctx, c, i, conn, need, sql, args, st)
	})
}

// ExecRead runs sql as a hedged read and returns its command tag,
// discarding any rows (a SELECT of a function for its result code, a
// check). The operation class is the SQL text. It is not for writes:
// those go through Exec.
func (c *Client) ExecRead(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := checkRead(sql); err != nil {
		return pgconn.CommandTag{}, err
	}
	st := statement[pgconn.CommandTag]{
		plain: func(ctx context.Context, conn *pgxpool.Conn) (pgconn.CommandTag, error) {
			return conn.Exec(ctx, sql, args...)
		},
		batched: func(br pgx.BatchResults) (pgconn.CommandTag, error) { return br.Exec() },
	}
	return read(ctx, c, sql, func(ctx context.Context, i int, conn *pgxpool.Conn, need LSN) (pgconn.CommandTag, error) {
		return runChecked(ctx, c, i, conn, need, sql, args, st)
	})
}

// Row is the result of QueryRow: the query runs, hedged, when Scan is
// called.
type Row struct {
	c    *Client
	ctx  context.Context
	sql  string
	args []any
}

// QueryRow returns a Row for the query sql with args, a hedged read run
// by Row.Scan, like pgxpool.Pool.QueryRow. The operation class is the
// SQL text.
func (c *Client) QueryRow(ctx context.Context, sql string, args ...any) Row {
	return Row{c: c, ctx: ctx, sql: sql, args: args}
}

var errBadDest = errors.New("hedgepgx: Row.Scan needs non-nil pointers (or nil, to skip a column)")

// Scan runs the query and scans the first row's columns into dest, as
// pgx.Row.Scan does; pgx.ErrNoRows if there is none. Each copy scans
// into values of its own (new values of dest's element types), and only
// the winner's are copied into dest, on the caller's goroutine: dest must
// be non-nil pointers (or nil, to skip a column). A destination that
// holds state of its own beyond its value (a scanner with a pointer
// inside) gets the winner's copy of that state.
func (r Row) Scan(dest ...any) error {
	if err := checkRead(r.sql); err != nil {
		return err
	}
	types := make(rowscan.Types, len(dest))
	for i, d := range dest {
		t, ok := rowscan.ElemType(d)
		if !ok {
			return fmt.Errorf("%w: dest[%d] is a %T", errBadDest, i, d)
		}
		types[i] = t
	}
	st := rowsStatement(r.sql, r.args, func(rows pgx.Rows) ([]reflect.Value, error) {
		ptrs, tmp := types.New()
		return ptrs, scanFirst(rows, tmp...)
	})
	vals, err := read(r.ctx, r.c, r.sql, func(ctx context.Context, i int, conn *pgxpool.Conn, need LSN) ([]reflect.Value, error) {
		return runChecked(ctx, r.c, i, conn, need, r.sql, r.args, st)
	})
	if err != nil {
		return err
	}
	rowscan.Set(dest, vals)
	return nil
}
