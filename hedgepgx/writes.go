package hedgepgx

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
)

// Exec runs sql with args on the primary, once, on the caller's
// goroutine, as pgxpool.Pool.Exec does: never hedged, never sent to a
// replica, never seen by the Hedger, whatever the context carries (an
// idempotency key included), and counted in the primary's
// ServerStats.Writes. It fails with ErrNoPrimary with Config.NoPrimary.
func (c *Client) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.primary < 0 {
		return pgconn.CommandTag{}, ErrNoPrimary
	}
	if !c.gate.Enter() {
		return pgconn.CommandTag{}, ErrClosed
	}
	defer c.gate.Leave()
	c.reps[c.primary].Writes.Add(1)
	return c.pools[c.primary].Exec(ctx, sql, args...)
}

// ExecLSN is Exec followed, on the same connection, by PrimaryLSN: the
// position to read the write back at (WithMinLSN). When sql is a single
// statement outside a transaction it has committed by then; inside a
// transaction, call PrimaryLSN after the commit instead. On an error of
// the statement the position is not read.
func (c *Client) ExecLSN(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, LSN, error) {
	if c.primary < 0 {
		return pgconn.CommandTag{}, 0, ErrNoPrimary
	}
	if !c.gate.Enter() {
		return pgconn.CommandTag{}, 0, ErrClosed
	}
	defer c.gate.Leave()
	c.reps[c.primary].Writes.Add(1)
	conn, err := c.pools[c.primary].Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, 0, err
	}
	defer conn.Release()
	tag, err := conn.Exec(ctx, sql, args...)
	if err != nil {
		return tag, 0, err
	}
	var s string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return tag, 0, err
	}
	l, err := ParseLSN(s)
	if err != nil {
		return tag, 0, err
	}
	c.reps[c.primary].observe(l)
	return tag, l, nil
}

// PrimaryLSN returns the primary's current WAL insert position
// (pg_current_wal_insert_lsn): every transaction committed on the primary
// before the call is at or before it, flushed or not. Pass it to
// WithMinLSN to read those transactions back from any server (see
// "Lag and consistency" in the package doc). It fails with ErrNoPrimary with
// Config.NoPrimary.
func (c *Client) PrimaryLSN(ctx context.Context) (LSN, error) {
	if c.primary < 0 {
		return 0, ErrNoPrimary
	}
	if !c.gate.Enter() {
		return 0, ErrClosed
	}
	defer c.gate.Leave()
	var s string
	if err := c.pools[c.primary].QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return 0, err
	}
	l, err := ParseLSN(s)
	if err != nil {
		return 0, err
	}
	c.reps[c.primary].observe(l)
	return l, nil
}
