// Package sqlstore is the logic that deduppg and dedupsqlite share: how a
// claim, a completion, a release, a renewal, a purge and a fenced commit
// use one table of records. What differs between them, the SQL of each
// step with its arguments and the driver's calls, each store says
// explicitly, in a Dialect and a DB of its own.
package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/dedup"
)

// Batches of purges made as claims are: every PurgeEvery claims, at most
// PurgeBatch expired records are deleted.
const (
	PurgeEvery = 1024
	PurgeBatch = 1000
)

// ErrNoRows is what a DB's QueryRow returns when the query has no row.
var ErrNoRows = errors.New("sqlstore: no rows")

// DB is a connection, a pool or a transaction, as a store's driver
// offers it.
type DB interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query of at most one row and scans it into dest;
	// without a row it returns ErrNoRows.
	QueryRow(ctx context.Context, query string, args []any, dest ...any) error
}

// Dialect is a store's SQL for each step. Each function returns the
// statement and its arguments; times are the store's own (the server's
// clock in PostgreSQL, the local one in SQLite).
type Dialect struct {
	// Name prefixes errors: "deduppg", "dedupsqlite".
	Name string
	// Insert claims a key that has no record: it changes one row or
	// none.
	Insert func(key string, fp []byte, token string, lease time.Duration) (string, []any)
	// Takeover claims a key whose record expired: one row or none.
	Takeover func(key string, fp []byte, token string, lease time.Duration) (string, []any)
	// Select reads a record: fingerprint, token, done, outcome, and
	// whether it is still live.
	Select func(key string) (string, []any)
	// Get reads a live record: fingerprint, token, done, outcome.
	Get func(key string) (string, []any)
	// Complete stores the outcome of the claim's token, not done yet.
	Complete func(key, token string, outcome []byte, ttl time.Duration) (string, []any)
	// Done reads a row if the token's claim completed the key.
	Done func(key, token string) (string, []any)
	// Release deletes the record of a claim not done.
	Release func(key, token string) (string, []any)
	// Renew extends the lease of a claim not done.
	Renew func(key, token string, lease time.Duration) (string, []any)
	// Purge deletes at most limit expired records; all of them for a
	// negative limit.
	Purge func(limit int) (string, []any)
	// Held reads, and in PostgreSQL locks, the record of the token's
	// claim: done and outcome.
	Held func(key, token string) (string, []any)
}

// Store is the shared part of a SQL store.
type Store struct {
	D      Dialect
	DB     DB
	claims atomic.Int64
}

func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf(s.D.Name+": "+format, args...)
}

// Claim implements dedup.Store.Claim: it claims the key if it has no
// live record, and otherwise returns the record.
func (s *Store) Claim(ctx context.Context, key string, fp dedup.Fingerprint, lease time.Duration) (dedup.Claim, error) {
	if s.claims.Add(1)%PurgeEvery == 0 {
		if _, err := s.Purge(ctx, PurgeBatch); err != nil {
			return dedup.Claim{}, err
		}
	}
	tok := dedup.NewToken()
	won := dedup.Claim{Key: key, Fingerprint: fp, Won: true, Token: tok}
	for {
		ok, err := s.TryClaim(ctx, s.DB, key, fp, tok, lease)
		if err != nil {
			return dedup.Claim{}, s.errorf("claim: %w", err)
		}
		if ok {
			return won, nil
		}
		rec, live, err := s.Read(ctx, s.DB, key)
		if errors.Is(err, ErrNoRows) || (err == nil && !live) {
			continue // deleted or expired since: claim again
		}
		if err != nil {
			return dedup.Claim{}, err
		}
		return dedup.Claim{Key: key, Fingerprint: fp, Existing: rec}, nil
	}
}

// TryClaim inserts the claim of tok, or takes over an expired record,
// on db; it reports whether either changed a row.
func (s *Store) TryClaim(ctx context.Context, db DB, key string, fp dedup.Fingerprint, tok string, lease time.Duration) (bool, error) {
	q, args := s.D.Insert(key, fp[:], tok, lease)
	n, err := db.Exec(ctx, q, args...)
	if err != nil || n == 1 {
		return n == 1, err
	}
	q, args = s.D.Takeover(key, fp[:], tok, lease)
	n, err = db.Exec(ctx, q, args...)
	return n == 1, err
}

// Read returns the record of key and whether it is live. Without a
// record the error is ErrNoRows.
func (s *Store) Read(ctx context.Context, db DB, key string) (dedup.Record, bool, error) {
	var (
		fpb, outb []byte
		rec       = dedup.Record{Key: key}
		live      bool
	)
	q, args := s.D.Select(key)
	err := db.QueryRow(ctx, q, args, &fpb, &rec.Token, &rec.Done, &outb, &live)
	if errors.Is(err, ErrNoRows) {
		return rec, false, err
	}
	if err != nil {
		return rec, false, s.errorf("reading key: %w", err)
	}
	return rec, live, s.decode(&rec, fpb, outb)
}

func (s *Store) decode(rec *dedup.Record, fpb, outb []byte) error {
	if len(fpb) != len(rec.Fingerprint) {
		return s.errorf("the stored fingerprint of %q has %d bytes", rec.Key, len(fpb))
	}
	copy(rec.Fingerprint[:], fpb)
	if rec.Done {
		if err := rec.Outcome.UnmarshalBinary(outb); err != nil {
			return s.errorf("key %q: %w", rec.Key, err)
		}
	}
	return nil
}

// Get implements dedup.Store.Get.
func (s *Store) Get(ctx context.Context, key string) (dedup.Record, error) {
	var (
		fpb, outb []byte
		rec       = dedup.Record{Key: key}
	)
	q, args := s.D.Get(key)
	err := s.DB.QueryRow(ctx, q, args, &fpb, &rec.Token, &rec.Done, &outb)
	if errors.Is(err, ErrNoRows) {
		return dedup.Record{}, fmt.Errorf("%w (key %q)", dedup.ErrNotFound, key)
	}
	if err != nil {
		return dedup.Record{}, s.errorf("get: %w", err)
	}
	return rec, s.decode(&rec, fpb, outb)
}

// Complete implements dedup.Store.Complete on db: a claim whose lease
// ended but that no other copy took over still completes, and one that
// completed already is no error.
func (s *Store) Complete(ctx context.Context, db DB, c dedup.Claim, out dedup.Outcome, ttl time.Duration) error {
	b, _ := out.MarshalBinary()
	q, args := s.D.Complete(c.Key, c.Token, b, ttl)
	n, err := db.Exec(ctx, q, args...)
	if err != nil {
		return s.errorf("complete: %w", err)
	}
	if n == 1 {
		return nil
	}
	var one int
	q, args = s.D.Done(c.Key, c.Token)
	err = db.QueryRow(ctx, q, args, &one)
	if errors.Is(err, ErrNoRows) {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	if err != nil {
		return s.errorf("complete: %w", err)
	}
	return nil // completed before by the same claim
}

// Release implements dedup.Store.Release.
func (s *Store) Release(ctx context.Context, c dedup.Claim) error {
	q, args := s.D.Release(c.Key, c.Token)
	if _, err := s.DB.Exec(ctx, q, args...); err != nil {
		return s.errorf("release: %w", err)
	}
	return nil
}

// Renew implements dedup.Store.Renew: a claim whose lease ended but that
// no other copy took over is renewed too.
func (s *Store) Renew(ctx context.Context, c dedup.Claim, lease time.Duration) error {
	q, args := s.D.Renew(c.Key, c.Token, lease)
	n, err := s.DB.Exec(ctx, q, args...)
	if err != nil {
		return s.errorf("renew: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	return nil
}

// Purge deletes at most limit expired records, all of them for a
// negative limit, and returns how many it deleted.
func (s *Store) Purge(ctx context.Context, limit int) (int64, error) {
	q, args := s.D.Purge(limit)
	n, err := s.DB.Exec(ctx, q, args...)
	if err != nil {
		return 0, s.errorf("purging expired records: %w", err)
	}
	return n, nil
}

// Commit runs fn, the operation's own write, on tx, a transaction the
// store began, and stores its outcome there, fenced by the claim c: if c
// no longer holds the key, fn does not run and the error matches
// dedup.ErrLostClaim; if c completed the key already, fn does not run and
// the stored outcome is returned, with done true. The caller commits tx
// when the error is nil and done false.
func (s *Store) Commit(ctx context.Context, tx DB, c dedup.Claim, ttl time.Duration, fn func() (dedup.Outcome, error)) (out dedup.Outcome, done bool, err error) {
	var outb []byte
	q, args := s.D.Held(c.Key, c.Token)
	err = tx.QueryRow(ctx, q, args, &done, &outb)
	if errors.Is(err, ErrNoRows) || c.Token == "" {
		return dedup.Outcome{}, false, fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	if err != nil {
		return dedup.Outcome{}, false, s.errorf("commit: %w", err)
	}
	if done {
		if err := out.UnmarshalBinary(outb); err != nil {
			return dedup.Outcome{}, false, s.errorf("key %q: %w", c.Key, err)
		}
		return out, true, nil
	}
	out, err = fn()
	if err != nil {
		return dedup.Outcome{}, false, err
	}
	if err := s.Complete(ctx, tx, c, out, ttl); err != nil {
		return dedup.Outcome{}, false, err
	}
	return out, false, nil
}
