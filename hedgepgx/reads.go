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

// Read runs fn as a hedged read: fn is called once per copy, each on the
// pool of the server chosen for it, with the copy's context, and the
// first copy to succeed gives the result. op is the operation class
// (delay estimates and stats are kept per class: use a small fixed set of
// names). fn must be a read (see "Reads" in the package doc), honour its
// context, and keep everything it acquires inside the copy: read rows to
// the end, release connections, end transactions, before it returns. A
// returned error ends the read with that error if it is an answer a
// server gave (any SQLSTATE but those that say the server cannot serve
// now), pgx.ErrNoRows or a scan error, or is marked hedge.Permanent;
// other errors (the connection failed, the pool is closed) fail the copy,
// and another copy goes at once.
//
// Read does not look at what fn sends: Collect, CollectOne, QueryRow and
// ExecRead check the SQL's first keyword too.
func Read[T any](ctx context.Context, c *Client, op string, fn func(ctx context.Context, pool *pgxpool.Pool) (T, error)) (T, error) {
	var zero T
	if c.gate.Closed() {
		return zero, ErrClosed
	}
	set, err := c.eligible(MinLSN(ctx))
	if err != nil {
		return zero, err
	}
	if bits.OnesCount64(set) == 1 {
		// One server may serve it: send it there once (counted in
		// hedge.Stats.Unhedgeable).
		ctx = hedge.NotIdempotent(ctx)
	}
	cs := &call{set: set}
	ans, err := hedge.Do(ctx, c.h, op, func(ctx context.Context, a hedge.Attempt) (answer[T], error) {
		return runCopy(ctx, c, cs, a, fn)
	})
	if err != nil {
		return zero, err
	}
	c.reps[ans.replica].Wins.Add(1)
	return ans.v, ans.err
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
// server; a server the read may not go to (it has not replayed to the
// read's minimum position, or lags beyond MaxLag) or that already holds a
// copy is replaced by an eligible one (counted in Redirected). A copy
// with nowhere to go sends nothing: it waits until the read ends or its
// other copies have all ended, and fails then.
func runCopy[T any](ctx context.Context, c *Client, cs *call, a hedge.Attempt, fn func(context.Context, *pgxpool.Pool) (T, error)) (answer[T], error) {
	if !c.gate.Enter() {
		return answer[T]{}, hedge.Permanent(ErrClosed)
	}
	defer c.gate.Leave()
	i := cs.take(c, a.Replica)
	if i < 0 {
		select {
		case <-ctx.Done():
			return answer[T]{}, ctx.Err()
		case <-cs.whenIdle():
			return answer[T]{}, errNowhere
		}
	}
	defer cs.done()
	rs := &c.reps[i]
	rs.Copies.Add(1)
	if i != a.Replica {
		rs.redirected.Add(1)
	}
	rs.InFlight.Add(1)
	defer rs.InFlight.Add(-1)
	v, err := fn(ctx, c.pools[i])
	if err == nil || isAnswer(err) {
		return answer[T]{v: v, err: err, replica: i}, nil
	}
	if ctx.Err() != nil {
		rs.Cancelled.Add(1)
	} else {
		rs.Failed.Add(1)
	}
	return answer[T]{replica: i}, dialerr.Mark(err)
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
// operation class is the SQL text. sql must start with a read keyword
// (ErrNotRead otherwise).
func Collect[T any](ctx context.Context, c *Client, fn pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	if err := checkRead(sql); err != nil {
		return nil, err
	}
	return Read(ctx, c, sql, func(ctx context.Context, p *pgxpool.Pool) ([]T, error) {
		rows, err := p.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, fn)
	})
}

// CollectOne is Collect for the first row: pgx.ErrNoRows when there is
// none (an answer: the read ends with it), as pgx.CollectOneRow.
func CollectOne[T any](ctx context.Context, c *Client, fn pgx.RowToFunc[T], sql string, args ...any) (T, error) {
	if err := checkRead(sql); err != nil {
		var zero T
		return zero, err
	}
	return Read(ctx, c, sql, func(ctx context.Context, p *pgxpool.Pool) (T, error) {
		rows, err := p.Query(ctx, sql, args...)
		if err != nil {
			var zero T
			return zero, err
		}
		return pgx.CollectOneRow(rows, fn)
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
	return Read(ctx, c, sql, func(ctx context.Context, p *pgxpool.Pool) (pgconn.CommandTag, error) {
		return p.Exec(ctx, sql, args...)
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
	vals, err := Read(r.ctx, r.c, r.sql, func(ctx context.Context, p *pgxpool.Pool) ([]reflect.Value, error) {
		ptrs, tmp := types.New()
		return ptrs, p.QueryRow(ctx, r.sql, r.args...).Scan(tmp...)
	})
	if err != nil {
		return err
	}
	rowscan.Set(dest, vals)
	return nil
}
