package deduppg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// pool is the small connection pool behind Open: up to max connections,
// made on demand, a broken one dropped on release, and an idle one checked
// before it is used again (see healthy), so that a restart of the server,
// which ends every pooled session, costs no request an error.
// Applications that have a *pgxpool.Pool pass it to New instead.
type pool struct {
	cfg  *pgx.ConnConfig
	sem  chan struct{} // one token per connection allowed
	mu   sync.Mutex
	idle []idleConn
}

type idleConn struct {
	c     *pgx.Conn
	since time.Time
}

// pingAfter is how long a connection may sit idle before it is pinged
// (a round trip) rather than only checked for what the server sent it.
const pingAfter = time.Second

// healthy reports whether an idle connection can be used: it was not
// closed, and the server has not ended its session. A session the server
// ended (a restart, pg_terminate_backend, an idle timeout) has left an
// error (FATAL) or the end of the stream in the socket, which a read that
// does not wait finds; a connection idle for longer than pingAfter is
// pinged as well, for a server that went away without a word.
func healthy(ctx context.Context, ic idleConn) bool {
	if ic.c.IsClosed() {
		return false
	}
	if time.Since(ic.since) >= pingAfter {
		return ic.c.Ping(ctx) == nil
	}
	pc := ic.c.PgConn()
	for {
		rctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		msg, err := pc.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			return pgconn.Timeout(err) && !ic.c.IsClosed() // nothing to read: alive
		}
		if _, ok := msg.(*pgproto3.ErrorResponse); ok {
			return false
		}
		// A notice or a parameter change: read on.
	}
}

func newPool(dsn string, max int) (*pool, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("deduppg: %w", err)
	}
	return &pool{cfg: cfg, sem: make(chan struct{}, max)}, nil
}

func (p *pool) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		ic := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if healthy(ctx, ic) {
			return ic.c, nil
		}
		_ = ic.c.Close(context.Background())
	}
	c, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return c, nil
}

func (p *pool) release(c *pgx.Conn) {
	if c.IsClosed() || c.PgConn().TxStatus() != 'I' {
		_ = c.Close(context.Background())
	} else {
		p.mu.Lock()
		p.idle = append(p.idle, idleConn{c: c, since: time.Now()})
		p.mu.Unlock()
	}
	<-p.sem
}

func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ic := range idle {
		_ = ic.c.Close(context.Background())
	}
}

func (p *pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer p.release(c)
	return c.Exec(ctx, sql, args...)
}

func (p *pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return &poolRow{row: c.QueryRow(ctx, sql, args...), release: func() { p.release(c) }}
}

func (p *pool) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.BeginTx(ctx, o)
	if err != nil {
		p.release(c)
		return nil, err
	}
	return &poolTx{Tx: tx, release: sync.OnceFunc(func() { p.release(c) })}, nil
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type poolRow struct {
	row     pgx.Row
	release func()
}

func (r *poolRow) Scan(dest ...any) error {
	defer r.release()
	return r.row.Scan(dest...)
}

// poolTx gives its connection back once the transaction has ended.
type poolTx struct {
	pgx.Tx
	release func()
}

func (t *poolTx) Commit(ctx context.Context) error {
	defer t.release()
	return t.Tx.Commit(ctx)
}

func (t *poolTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.Tx.Rollback(ctx)
}
