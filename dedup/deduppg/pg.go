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
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tailcut/hedge/dedup"
)

// DefaultTable is the table used when Options.Table is empty.
const DefaultTable = "dedup_keys"

const (
	purgeEvery = 1024
	purgeBatch = 1000
)

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
	db     DB
	pool   *pool
	lease  time.Duration
	ttl    time.Duration
	claims atomic.Int64

	qInsert, qTakeover, qSelect, qGet, qComplete, qDone, qRelease, qRenew, qPurge, qHeld string
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
	until := `clock_timestamp() + $%d * interval '1 microsecond'`
	s.qInsert = `INSERT INTO ` + t + ` (key, fingerprint, token, done, outcome, expires) VALUES ($1, $2, $3, false, NULL, ` + fmt.Sprintf(until, 4) + `) ON CONFLICT (key) DO NOTHING`
	s.qTakeover = `UPDATE ` + t + ` SET fingerprint = $2, token = $3, done = false, outcome = NULL, expires = ` + fmt.Sprintf(until, 4) + ` WHERE key = $1 AND expires <= clock_timestamp()`
	s.qSelect = `SELECT fingerprint, token, done, outcome, expires > clock_timestamp() FROM ` + t + ` WHERE key = $1`
	s.qGet = `SELECT fingerprint, token, done, outcome FROM ` + t + ` WHERE key = $1 AND expires > clock_timestamp()`
	s.qComplete = `UPDATE ` + t + ` SET done = true, outcome = $3, expires = ` + fmt.Sprintf(until, 4) + ` WHERE key = $1 AND token = $2 AND NOT done`
	s.qDone = `SELECT 1 FROM ` + t + ` WHERE key = $1 AND token = $2 AND done`
	s.qRelease = `DELETE FROM ` + t + ` WHERE key = $1 AND token = $2 AND NOT done`
	s.qRenew = `UPDATE ` + t + ` SET expires = ` + fmt.Sprintf(until, 3) + ` WHERE key = $1 AND token = $2 AND NOT done`
	s.qPurge = `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + ` WHERE expires <= clock_timestamp() LIMIT $1)`
	s.qHeld = `SELECT done, outcome FROM ` + t + ` WHERE key = $1 AND token = $2 FOR UPDATE`
	return s, nil
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
	if s.claims.Add(1)%purgeEvery == 0 {
		if _, err := s.purge(ctx, purgeBatch); err != nil {
			return dedup.Claim{}, err
		}
	}
	tok := dedup.NewToken()
	won := dedup.Claim{Key: key, Fingerprint: fp, Won: true, Token: tok}
	for {
		tag, err := s.db.Exec(ctx, s.qInsert, key, fp[:], tok, lease.Microseconds())
		if err != nil {
			return dedup.Claim{}, fmt.Errorf("deduppg: claim: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return won, nil
		}
		tag, err = s.db.Exec(ctx, s.qTakeover, key, fp[:], tok, lease.Microseconds())
		if err != nil {
			return dedup.Claim{}, fmt.Errorf("deduppg: claim: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return won, nil
		}
		rec, live, err := s.read(ctx, s.db, key)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
			continue // deleted or expired since: claim again
		}
		if err != nil {
			return dedup.Claim{}, err
		}
		return dedup.Claim{Key: key, Fingerprint: fp, Existing: rec}, nil
	}
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) read(ctx context.Context, q querier, key string) (dedup.Record, bool, error) {
	var (
		fpb, outb []byte
		rec       = dedup.Record{Key: key}
		live      bool
	)
	err := q.QueryRow(ctx, s.qSelect, key).Scan(&fpb, &rec.Token, &rec.Done, &outb, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, false, err
	}
	if err != nil {
		return rec, false, fmt.Errorf("deduppg: reading key: %w", err)
	}
	return rec, live, decode(&rec, fpb, outb)
}

func decode(rec *dedup.Record, fpb, outb []byte) error {
	if len(fpb) != len(rec.Fingerprint) {
		return fmt.Errorf("deduppg: the stored fingerprint of %q has %d bytes", rec.Key, len(fpb))
	}
	copy(rec.Fingerprint[:], fpb)
	if rec.Done {
		if err := rec.Outcome.UnmarshalBinary(outb); err != nil {
			return fmt.Errorf("deduppg: key %q: %w", rec.Key, err)
		}
	}
	return nil
}

// Get implements dedup.Store.
func (s *Store) Get(ctx context.Context, key string) (dedup.Record, error) {
	var (
		fpb, outb []byte
		rec       = dedup.Record{Key: key}
	)
	err := s.db.QueryRow(ctx, s.qGet, key).Scan(&fpb, &rec.Token, &rec.Done, &outb)
	if errors.Is(err, pgx.ErrNoRows) {
		return dedup.Record{}, fmt.Errorf("%w (key %q)", dedup.ErrNotFound, key)
	}
	if err != nil {
		return dedup.Record{}, fmt.Errorf("deduppg: get: %w", err)
	}
	return rec, decode(&rec, fpb, outb)
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	querier
}

// Complete implements dedup.Store. A claim whose lease ended but that no
// other copy took over still completes.
func (s *Store) Complete(ctx context.Context, c dedup.Claim, out dedup.Outcome, ttl time.Duration) error {
	return s.complete(ctx, s.db, c, out, ttl)
}

func (s *Store) complete(ctx context.Context, db execer, c dedup.Claim, out dedup.Outcome, ttl time.Duration) error {
	b, _ := out.MarshalBinary()
	tag, err := db.Exec(ctx, s.qComplete, c.Key, c.Token, b, ttl.Microseconds())
	if err != nil {
		return fmt.Errorf("deduppg: complete: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var one int
	err = db.QueryRow(ctx, s.qDone, c.Key, c.Token).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	if err != nil {
		return fmt.Errorf("deduppg: complete: %w", err)
	}
	return nil
}

// Release implements dedup.Store.
func (s *Store) Release(ctx context.Context, c dedup.Claim) error {
	if _, err := s.db.Exec(ctx, s.qRelease, c.Key, c.Token); err != nil {
		return fmt.Errorf("deduppg: release: %w", err)
	}
	return nil
}

// Renew implements dedup.Store. A claim whose lease ended but that no
// other copy took over is renewed too.
func (s *Store) Renew(ctx context.Context, c dedup.Claim, lease time.Duration) error {
	tag, err := s.db.Exec(ctx, s.qRenew, c.Key, c.Token, lease.Microseconds())
	if err != nil {
		return fmt.Errorf("deduppg: renew: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	return nil
}

// Purge deletes every expired record and returns how many it deleted.
func (s *Store) Purge(ctx context.Context) (int64, error) { return s.purge(ctx, -1) }

func (s *Store) purge(ctx context.Context, limit int) (int64, error) {
	var lim any = limit
	if limit < 0 {
		lim = nil // LIMIT NULL: no limit
	}
	tag, err := s.db.Exec(ctx, s.qPurge, lim)
	if err != nil {
		return 0, fmt.Errorf("deduppg: purging expired records: %w", err)
	}
	return tag.RowsAffected(), nil
}

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
	var (
		done bool
		outb []byte
	)
	err = tx.QueryRow(ctx, s.qHeld, c.Key, c.Token).Scan(&done, &outb)
	if errors.Is(err, pgx.ErrNoRows) || c.Token == "" {
		return dedup.Outcome{}, fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	if err != nil {
		return dedup.Outcome{}, fmt.Errorf("deduppg: commit: %w", err)
	}
	if done {
		var out dedup.Outcome
		if err := out.UnmarshalBinary(outb); err != nil {
			return dedup.Outcome{}, fmt.Errorf("deduppg: key %q: %w", c.Key, err)
		}
		return out, nil
	}
	out, err := fn(ctx, tx)
	if err != nil {
		return dedup.Outcome{}, err
	}
	if err := s.complete(ctx, tx, c, out, ttl); err != nil {
		return dedup.Outcome{}, err
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
	tag, err := tx.Exec(ctx, s.qInsert, key, fp[:], tok, s.lease.Microseconds())
	if err != nil {
		return dedup.Outcome{}, false, fmt.Errorf("deduppg: do: claim: %w", err)
	}
	if tag.RowsAffected() == 0 {
		tag, err = tx.Exec(ctx, s.qTakeover, key, fp[:], tok, s.lease.Microseconds())
		if err != nil {
			return dedup.Outcome{}, false, fmt.Errorf("deduppg: do: claim: %w", err)
		}
	}
	if tag.RowsAffected() == 0 {
		rec, live, err := s.read(ctx, tx, key)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || (err == nil && !live):
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
	if err := s.complete(ctx, tx, dedup.Claim{Key: key, Token: tok}, out, s.ttl); err != nil {
		return dedup.Outcome{}, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return dedup.Outcome{}, false, fmt.Errorf("deduppg: do: commit: %w", err)
	}
	return out, false, nil
}
