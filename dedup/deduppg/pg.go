// Package deduppg is a dedup.Store in PostgreSQL, through
// github.com/jackc/pgx/v5: for replicated services that already keep
// their data in PostgreSQL, so that the claim, the write and the outcome
// can commit in one transaction.
//
// One table holds the records:
//
//	key text PRIMARY KEY, fingerprint bytea, token text, done boolean,
//	outcome bytea, expires timestamptz
//
// The claim is one INSERT ... ON CONFLICT (key) DO NOTHING: PostgreSQL's
// unique index makes it atomic across every connection and process. A
// record whose lease or TTL ended is taken over by one UPDATE ... WHERE
// expires <= clock_timestamp() (a compare-and-swap under the row lock).
// Complete and Release are fenced by the claim's token. Times are the
// server's clock, so the replicas' clocks do not matter. Expired records
// are deleted in batches as claims are made, and by Purge.
//
// Two ways to make a write commit exactly once:
//
//   - Do runs the caller's write inside the transaction that inserts the
//     claim, and stores the outcome in it: claim, write and outcome commit
//     together or not at all. A concurrent copy's insert waits on the
//     unique index until that transaction ends, then sees the outcome.
//     If the holder crashes, PostgreSQL rolls the transaction back; if it
//     stalls inside the transaction, the session is ended after the lease
//     (idle_in_transaction_session_timeout), and the next copy runs.
//   - With the HTTP middleware (lease-based claims), Commit runs the
//     handler's write in the transaction that stores the outcome, fenced
//     by the claim from dedup.ClaimFromContext.
//
// New takes any pool with Exec, QueryRow and BeginTx, such as a
// *pgxpool.Pool; Open makes a small pool of its own from a connection
// string. That pool checks a connection before it reuses it: one whose
// session the server ended while it sat idle (a restart of PostgreSQL, an
// administrator's pg_terminate_backend) is dropped and replaced, so that
// no request fails for it; one idle for over a second is pinged too.
package deduppg

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/internal/sqlstore"
)

// DefaultTable is the table used when Options.Table is empty.
const DefaultTable = "dedup_keys"

// DB is what the store needs of a connection pool. *pgxpool.Pool
// implements it; a *pgx.Conn does too but is not safe for concurrent use.
type DB interface {
	// Exec runs a statement.
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	// QueryRow runs a query of at most one row.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	// BeginTx starts a transaction.
	BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error)
}

// Options configures New and Open. The zero value uses the defaults.
type Options struct {
	// Table is the table name: letters, digits and underscores, or a
	// schema-qualified name "schema.table". Empty means DefaultTable.
	Table string
	// Lease is the lease of Do's claims. Zero means dedup.DefaultLease.
	Lease time.Duration
	// TTL is how long Do keeps outcomes. Zero means dedup.DefaultTTL.
	TTL time.Duration
	// MaxConns bounds the connections of the pool Open makes. Zero
	// means 8.
	MaxConns int
}

// Store is a dedup.Store in PostgreSQL. It is safe for concurrent use.
type Store struct {
	db    DB
	pool  *pool
	lease time.Duration
	ttl   time.Duration
	core  sqlstore.Store
}

var tableName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Open connects to the database at dsn (a pgx connection string) with a
// pool of Options.MaxConns connections, and creates the table if needed.
// Close closes the pool.
func Open(ctx context.Context, dsn string, o Options) (*Store, error) {
	if o.MaxConns <= 0 {
		o.MaxConns = 8
	}
	p, err := newPool(dsn, o.MaxConns)
	if err != nil {
		return nil, err
	}
	s, err := New(ctx, p, o)
	if err != nil {
		p.close()
		return nil, err
	}
	s.pool = p
	return s, nil
}

// New returns a Store over db and creates the table if needed. Close does
// not close db.
func New(ctx context.Context, db DB, o Options) (*Store, error) {
	t := o.Table
	if t == "" {
		t = DefaultTable
	}
	if !tableName.MatchString(t) {
		return nil, fmt.Errorf("deduppg: table name %q: use letters, digits and underscores, optionally schema-qualified", t)
	}
	if o.Lease <= 0 {
		o.Lease = dedup.DefaultLease
	}
	if o.TTL <= 0 {
		o.TTL = dedup.DefaultTTL
	}
	ddl := `CREATE TABLE IF NOT EXISTS ` + t + ` (
		key text PRIMARY KEY,
		fingerprint bytea NOT NULL,
		token text NOT NULL,
		done boolean NOT NULL DEFAULT false,
		outcome bytea,
		expires timestamptz NOT NULL
	)`
	if _, err := db.Exec(ctx, ddl); err != nil && !isDuplicateTable(err) {
		return nil, fmt.Errorf("deduppg: creating table %s: %w", t, err)
	}
	idx := `CREATE INDEX IF NOT EXISTS ` + lastPart(t) + `_expires ON ` + t + ` (expires)`
	if _, err := db.Exec(ctx, idx); err != nil && !isDuplicateTable(err) {
		return nil, fmt.Errorf("deduppg: creating the index of %s: %w", t, err)
	}
	s := &Store{db: db, lease: o.Lease, ttl: o.TTL}
	s.core = sqlstore.Store{D: dialect(t), DB: pgDB{db}}
	return s, nil
}

// dialect is the store's SQL for table t. Times are the server's clock
// (clock_timestamp()), so that the replicas' clocks do not matter; a
// lease or TTL goes as microseconds.
func dialect(t string) sqlstore.Dialect {
	until := func(n int) string { return `clock_timestamp() + $` + strconv.Itoa(n) + ` * interval '1 microsecond'` }
	var (
		qInsert   = `INSERT INTO ` + t + ` (key, fingerprint, token, done, outcome, expires) VALUES ($1, $2, $3, false, NULL, ` + until(4) + `) ON CONFLICT (key) DO NOTHING`
		qTakeover = `UPDATE ` + t + ` SET fingerprint = $2, token = $3, done = false, outcome = NULL, expires = ` + until(4) + ` WHERE key = $1 AND expires <= clock_timestamp()`
		qSelect   = `SELECT fingerprint, token, done, outcome, expires > clock_timestamp() FROM ` + t + ` WHERE key = $1`
		qGet      = `SELECT fingerprint, token, done, outcome FROM ` + t + ` WHERE key = $1 AND expires > clock_timestamp()`
		qComplete = `UPDATE ` + t + ` SET done = true, outcome = $3, expires = ` + until(4) + ` WHERE key = $1 AND token = $2 AND NOT done`
		qDone     = `SELECT 1 FROM ` + t + ` WHERE key = $1 AND token = $2 AND done`
		qRelease  = `DELETE FROM ` + t + ` WHERE key = $1 AND token = $2 AND NOT done`
		qRenew    = `UPDATE ` + t + ` SET expires = ` + until(3) + ` WHERE key = $1 AND token = $2 AND NOT done`
		qPurge    = `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + ` WHERE expires <= clock_timestamp() LIMIT $1)`
		qHeld     = `SELECT done, outcome FROM ` + t + ` WHERE key = $1 AND token = $2 FOR UPDATE`
	)
	return sqlstore.Dialect{
		Name: "deduppg",
		Insert: func(key string, fp []byte, tok string, lease time.Duration) (string, []any) {
			return qInsert, []any{key, fp, tok, lease.Microseconds()}
		},
		Takeover: func(key string, fp []byte, tok string, lease time.Duration) (string, []any) {
			return qTakeover, []any{key, fp, tok, lease.Microseconds()}
		},
		Select: func(key string) (string, []any) { return qSelect, []any{key} },
		Get:    func(key string) (string, []any) { return qGet, []any{key} },
		Complete: func(key, tok string, out []byte, ttl time.Duration) (string, []any) {
			return qComplete, []any{key, tok, out, ttl.Microseconds()}
		},
		Done:    func(key, tok string) (string, []any) { return qDone, []any{key, tok} },
		Release: func(key, tok string) (string, []any) { return qRelease, []any{key, tok} },
		Renew: func(key, tok string, lease time.Duration) (string, []any) {
			return qRenew, []any{key, tok, lease.Microseconds()}
		},
		Purge: func(limit int) (string, []any) {
			if limit < 0 {
				return qPurge, []any{nil} // LIMIT NULL: no limit
			}
			return qPurge, []any{limit}
		},
		Held: func(key, tok string) (string, []any) { return qHeld, []any{key, tok} },
	}
}

// pgDB is a pool or a transaction as sqlstore uses it.
type pgDB struct {
	db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (d pgDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.db.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (d pgDB) QueryRow(ctx context.Context, q string, args []any, dest ...any) error {
	err := d.db.QueryRow(ctx, q, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sqlstore.ErrNoRows
	}
	return err
}

// isDuplicateTable reports the error of two processes creating the table
// at once (CREATE ... IF NOT EXISTS is not safe against that race).
func isDuplicateTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "23505")
}

func lastPart(t string) string {
	for i := len(t) - 1; i >= 0; i-- {
		if t[i] == '.' {
			return t[i+1:]
		}
	}
	return t
}

// Close closes the pool if Open made it.
func (s *Store) Close() {
	if s.pool != nil {
		s.pool.close()
	}
}

// Claim implements dedup.Store.
func (s *Store) Claim(ctx context.Context, key string, fp dedup.Fingerprint, lease time.Duration) (dedup.Claim, error) {
	return s.core.Claim(ctx, key, fp, lease)
}

// Get implements dedup.Store.
func (s *Store) Get(ctx context.Context, key string) (dedup.Record, error) {
	return s.core.Get(ctx, key)
}

// Complete implements dedup.Store. A claim whose lease ended but that no
// other copy took over still completes.
func (s *Store) Complete(ctx context.Context, c dedup.Claim, out dedup.Outcome, ttl time.Duration) error {
	return s.core.Complete(ctx, s.core.DB, c, out, ttl)
}

// Release implements dedup.Store.
func (s *Store) Release(ctx context.Context, c dedup.Claim) error { return s.core.Release(ctx, c) }

// Renew implements dedup.Store. A claim whose lease ended but that no
// other copy took over is renewed too.
func (s *Store) Renew(ctx context.Context, c dedup.Claim, lease time.Duration) error {
	return s.core.Renew(ctx, c, lease)
}

// Purge deletes every expired record and returns how many it deleted.
func (s *Store) Purge(ctx context.Context) (int64, error) { return s.core.Purge(ctx, -1) }

// Commit runs fn, the operation's own write, in one transaction with
// storing its outcome, fenced by the claim c (from
// dedup.ClaimFromContext): the claim's row is locked first, so that no
// other copy can take it over until the transaction ends. If c no longer
// holds the key, fn does not run and the error matches
// dedup.ErrLostClaim; if fn fails, nothing is committed and its error is
// returned. If c already completed the key, fn does not run and the
// stored outcome is returned.
func (s *Store) Commit(ctx context.Context, c dedup.Claim, ttl time.Duration, fn func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error)) (dedup.Outcome, error) {
	tx, err := s.db.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return dedup.Outcome{}, fmt.Errorf("deduppg: commit: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	out, done, err := s.core.Commit(ctx, pgDB{tx}, c, ttl, func() (dedup.Outcome, error) { return fn(ctx, tx) })
	if err != nil || done {
		return out, err
	}
	if err := tx.Commit(ctx); err != nil {
		return dedup.Outcome{}, fmt.Errorf("deduppg: commit: %w", err)
	}
	return out, nil
}

// Do runs fn, the caller's write, exactly once for key: in one
// transaction it claims the key (INSERT ... ON CONFLICT DO NOTHING), runs
// fn, and stores fn's outcome, so that claim, write and outcome commit
// together or not at all. It returns fn's outcome with replayed false, or,
// when the key was already done, the stored outcome with replayed true.
//
// A copy that arrives while another transaction holds the key waits for
// it inside PostgreSQL (bounded by ctx), then replays its outcome, or runs
// fn if it rolled back. Errors: dedup.ErrFingerprintMismatch when the key
// was used with another fingerprint; dedup.ErrInProgress when the key is
// held by a lease-based claim (the middleware's) that is still live; fn's
// own error, with nothing committed. A holder that stalls inside the
// transaction for longer than Options.Lease between statements loses its
// session, and so its transaction.
func (s *Store) Do(ctx context.Context, key string, fp dedup.Fingerprint, fn func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error)) (out dedup.Outcome, replayed bool, err error) {
	tx, err := s.db.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return dedup.Outcome{}, false, fmt.Errorf("deduppg: do: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ms := strconv.FormatInt(max(s.lease.Milliseconds(), 1), 10)
	if _, err := tx.Exec(ctx, `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, ms); err != nil {
		return dedup.Outcome{}, false, fmt.Errorf("deduppg: do: %w", err)
	}
	tok := dedup.NewToken()
	won, err := s.core.TryClaim(ctx, pgDB{tx}, key, fp, tok, s.lease)
	if err != nil {
		return dedup.Outcome{}, false, fmt.Errorf("deduppg: do: claim: %w", err)
	}
	if !won {
		rec, live, err := s.core.Read(ctx, pgDB{tx}, key)
		switch {
		case errors.Is(err, sqlstore.ErrNoRows) || (err == nil && !live):
			return dedup.Outcome{}, false, fmt.Errorf("%w: key %q changed under the claim; try again", dedup.ErrInProgress, key)
		case err != nil:
			return dedup.Outcome{}, false, err
		case rec.Fingerprint != fp:
			return dedup.Outcome{}, false, fmt.Errorf("%w (key %q)", dedup.ErrFingerprintMismatch, key)
		case !rec.Done:
			return dedup.Outcome{}, false, fmt.Errorf("%w (key %q)", dedup.ErrInProgress, key)
		}
		return rec.Outcome, true, nil
	}
	out, err = fn(ctx, tx)
	if err != nil {
		return dedup.Outcome{}, false, err
	}
	if err := s.core.Complete(ctx, pgDB{tx}, dedup.Claim{Key: key, Token: tok}, out, s.ttl); err != nil {
		return dedup.Outcome{}, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return dedup.Outcome{}, false, fmt.Errorf("deduppg: do: commit: %w", err)
	}
	return out, false, nil
}
