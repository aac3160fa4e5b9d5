// Package dedupsqlite is a dedup.Store in a SQLite database file, through
// the pure-Go driver modernc.org/sqlite: for a single-node service whose
// idempotency records must survive a restart, or for a few processes on
// one machine sharing the file.
//
// The file is opened in WAL mode with a busy timeout, so that readers do
// not block the writer and writers from several processes queue instead of
// failing. Several processes may open one file, a new one too, at the same
// moment: switching a file to WAL mode needs it to itself, and SQLite
// refuses the switch at once when another process holds a lock, so Open
// tries again until the busy timeout has passed; and it creates the table
// in a transaction that takes the write lock first, under the busy
// timeout. One table holds the records:
//
//	key TEXT PRIMARY KEY, fingerprint BLOB, token TEXT, done INTEGER,
//	outcome BLOB, expires INTEGER (Unix microseconds)
//
// The claim is one INSERT ... ON CONFLICT(key) DO NOTHING; a record whose
// lease or TTL ended is taken over by one UPDATE ... WHERE expires <= now
// (a compare-and-swap); no claim is ever a read followed by a write.
// Complete and Release are fenced by the claim's token. Times are read
// from the local clock, which the processes sharing a file share.
// Expired records are deleted in batches as claims are made, and by Purge.
//
// Commit runs the handler's own write in the transaction that stores the
// outcome, fenced by the claim, so that the write commits exactly once
// even if its holder outlives its lease.
//
// What it is not: a store for processes on several machines (SQLite over a
// network file system does not lock reliably; use deduppg or dedupredis).
package dedupsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // and the database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tailcut/hedge/dedup"
)

// DefaultTable is the table used when Options.Table is empty.
const DefaultTable = "dedup_keys"

// purgeEvery is how many claims pass between two batches of deletions of
// expired records; purgeBatch is the most rows one batch deletes.
const (
	purgeEvery = 1024
	purgeBatch = 1000
)

// Options configures Open and New. The zero value uses the defaults.
type Options struct {
	// Table is the table name: letters, digits and underscores. Empty
	// means DefaultTable.
	Table string
	// BusyTimeout is how long a statement waits for another
	// connection's or process's write lock before failing. Zero means 10
	// seconds. Used by Open only.
	BusyTimeout time.Duration
}

// Store is a dedup.Store in a SQLite database. It is safe for concurrent
// use, and several processes may open the same file.
type Store struct {
	db     *sql.DB
	own    bool
	table  string
	claims atomic.Int64

	qInsert, qTakeover, qSelect, qGet, qComplete, qDone, qRelease, qRenew, qPurge, qHeld string
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Open opens (creating if needed) the database file at path in WAL mode
// and the table in it. Close closes the database.
func Open(ctx context.Context, path string, o Options) (*Store, error) {
	busy := o.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("dedupsqlite: opening %s: %w", path, err)
	}
	if err := setWAL(ctx, db, busy); err != nil {
		db.Close()
		return nil, fmt.Errorf("dedupsqlite: opening %s in WAL mode: %w", path, err)
	}
	s, err := New(ctx, db, o)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New returns a Store over db, an open modernc.org/sqlite database, and
// creates the table if needed. Transactions on db should begin
// IMMEDIATE (_txlock=immediate), as Open's do, so that Commit takes the
// write lock at once. Close does not close db.
func New(ctx context.Context, db *sql.DB, o Options) (*Store, error) {
	t := o.Table
	if t == "" {
		t = DefaultTable
	}
	if !tableName.MatchString(t) {
		return nil, fmt.Errorf("dedupsqlite: table name %q: use letters, digits and underscores", t)
	}
	ddl := `CREATE TABLE IF NOT EXISTS ` + t + ` (
		key TEXT PRIMARY KEY,
		fingerprint BLOB NOT NULL,
		token TEXT NOT NULL,
		done INTEGER NOT NULL DEFAULT 0,
		outcome BLOB,
		expires INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX IF NOT EXISTS ` + t + `_expires ON ` + t + ` (expires)`
	if err := createTable(ctx, db, ddl); err != nil {
		return nil, fmt.Errorf("dedupsqlite: creating table %s: %w", t, err)
	}
	s := &Store{db: db, table: t}
	s.qInsert = `INSERT INTO ` + t + ` (key, fingerprint, token, done, outcome, expires) VALUES (?, ?, ?, 0, NULL, ?) ON CONFLICT (key) DO NOTHING`
	s.qTakeover = `UPDATE ` + t + ` SET fingerprint = ?, token = ?, done = 0, outcome = NULL, expires = ? WHERE key = ? AND expires <= ?`
	s.qSelect = `SELECT fingerprint, token, done, outcome, expires FROM ` + t + ` WHERE key = ?`
	s.qGet = `SELECT fingerprint, token, done, outcome FROM ` + t + ` WHERE key = ? AND expires > ?`
	s.qComplete = `UPDATE ` + t + ` SET done = 1, outcome = ?, expires = ? WHERE key = ? AND token = ? AND done = 0`
	s.qDone = `SELECT 1 FROM ` + t + ` WHERE key = ? AND token = ? AND done = 1`
	s.qRelease = `DELETE FROM ` + t + ` WHERE key = ? AND token = ? AND done = 0`
	s.qRenew = `UPDATE ` + t + ` SET expires = ? WHERE key = ? AND token = ? AND done = 0`
	s.qPurge = `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + ` WHERE expires <= ? LIMIT ?)`
	s.qHeld = `SELECT done, outcome FROM ` + t + ` WHERE key = ? AND token = ?`
	return s, nil
}

// setWAL switches the database file to WAL mode, which the file keeps
// for every later connection. Switching takes an exclusive lock, and
// SQLite answers SQLITE_BUSY at once, without its busy timeout, when
// another connection holds a lock: several processes opening one new file
// together meet that. So setWAL tries again, with pauses growing to 50 ms,
// until the file is in WAL mode or busy has passed. (A journal_mode pragma
// in the connection string would fail the connection instead.)
func setWAL(ctx context.Context, db *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	pause := time.Millisecond
	for {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		switch {
		case err == nil && strings.EqualFold(mode, "wal"):
			return nil
		case err != nil && !isBusy(err):
			return err
		case !time.Now().Before(deadline):
			if err == nil {
				err = fmt.Errorf("the journal mode stayed %q", mode)
			}
			return fmt.Errorf("%w (for the busy timeout, %v)", err, busy)
		}
		// Busy, or another connection's transaction kept the old mode.
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// isBusy reports SQLite's SQLITE_BUSY (with any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// createTable runs the DDL in a transaction that takes the write lock
// first (BEGIN IMMEDIATE), whatever db's _txlock. In autocommit, the
// statements would read the schema and then ask for the write lock, and
// when another process (a replica opening the same new file) wrote in
// between, SQLite answers SQLITE_BUSY at once, without the busy timeout,
// since waiting cannot help a stale read; BEGIN IMMEDIATE waits for the
// lock under the busy timeout and reads the schema after.
func createTable(ctx context.Context, db *sql.DB, ddl string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, ddl); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

// DB returns the database, for the application's own tables.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database if Open opened it.
func (s *Store) Close() error {
	if s.own {
		return s.db.Close()
	}
	return nil
}

func now() int64 { return time.Now().UnixMicro() }

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
		t := now()
		res, err := s.db.ExecContext(ctx, s.qInsert, key, fp[:], tok, t+lease.Microseconds())
		if err != nil {
			return dedup.Claim{}, fmt.Errorf("dedupsqlite: claim: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return won, nil
		}
		res, err = s.db.ExecContext(ctx, s.qTakeover, fp[:], tok, t+lease.Microseconds(), key, t)
		if err != nil {
			return dedup.Claim{}, fmt.Errorf("dedupsqlite: claim: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return won, nil
		}
		rec, expires, err := s.read(ctx, key)
		if errors.Is(err, sql.ErrNoRows) {
			continue // deleted between the two statements: claim again
		}
		if err != nil {
			return dedup.Claim{}, err
		}
		if expires <= now() {
			continue // expired since: take it over
		}
		return dedup.Claim{Key: key, Fingerprint: fp, Existing: rec}, nil
	}
}

func (s *Store) read(ctx context.Context, key string) (dedup.Record, int64, error) {
	var (
		fpb     []byte
		rec     = dedup.Record{Key: key}
		outb    []byte
		expires int64
	)
	err := s.db.QueryRowContext(ctx, s.qSelect, key).Scan(&fpb, &rec.Token, &rec.Done, &outb, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, 0, err
	}
	if err != nil {
		return rec, 0, fmt.Errorf("dedupsqlite: reading key: %w", err)
	}
	return rec, expires, decode(&rec, fpb, outb)
}

func decode(rec *dedup.Record, fpb, outb []byte) error {
	if len(fpb) != len(rec.Fingerprint) {
		return fmt.Errorf("dedupsqlite: the stored fingerprint of %q has %d bytes", rec.Key, len(fpb))
	}
	copy(rec.Fingerprint[:], fpb)
	if rec.Done {
		if err := rec.Outcome.UnmarshalBinary(outb); err != nil {
			return fmt.Errorf("dedupsqlite: key %q: %w", rec.Key, err)
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
	err := s.db.QueryRowContext(ctx, s.qGet, key, now()).Scan(&fpb, &rec.Token, &rec.Done, &outb)
	if errors.Is(err, sql.ErrNoRows) {
		return dedup.Record{}, fmt.Errorf("%w (key %q)", dedup.ErrNotFound, key)
	}
	if err != nil {
		return dedup.Record{}, fmt.Errorf("dedupsqlite: get: %w", err)
	}
	return rec, decode(&rec, fpb, outb)
}

// Complete implements dedup.Store. A claim whose lease ended but that no
// other copy took over still completes.
func (s *Store) Complete(ctx context.Context, c dedup.Claim, out dedup.Outcome, ttl time.Duration) error {
	b, _ := out.MarshalBinary()
	res, err := s.db.ExecContext(ctx, s.qComplete, b, now()+ttl.Microseconds(), c.Key, c.Token)
	if err != nil {
		return fmt.Errorf("dedupsqlite: complete: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var one int
	err = s.db.QueryRowContext(ctx, s.qDone, c.Key, c.Token).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	if err != nil {
		return fmt.Errorf("dedupsqlite: complete: %w", err)
	}
	return nil // completed before by the same claim
}

// Release implements dedup.Store.
func (s *Store) Release(ctx context.Context, c dedup.Claim) error {
	if _, err := s.db.ExecContext(ctx, s.qRelease, c.Key, c.Token); err != nil {
		return fmt.Errorf("dedupsqlite: release: %w", err)
	}
	return nil
}

// Renew implements dedup.Store. A claim whose lease ended but that no
// other copy took over is renewed too.
func (s *Store) Renew(ctx context.Context, c dedup.Claim, lease time.Duration) error {
	res, err := s.db.ExecContext(ctx, s.qRenew, now()+lease.Microseconds(), c.Key, c.Token)
	if err != nil {
		return fmt.Errorf("dedupsqlite: renew: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	return nil
}

// Purge deletes every expired record and returns how many it deleted.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	return s.purge(ctx, -1)
}

func (s *Store) purge(ctx context.Context, limit int) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.qPurge, now(), limit)
	if err != nil {
		return 0, fmt.Errorf("dedupsqlite: purging expired records: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Commit runs fn, the operation's own write, in one transaction with
// storing its outcome, fenced by the claim c (from
// dedup.ClaimFromContext): if c no longer holds the key (its lease ended
// and another copy took over), fn does not run and the error matches
// dedup.ErrLostClaim; if fn fails, nothing is committed and its error is
// returned. If c already completed the key, fn does not run and the
// stored outcome is returned. The transaction holds SQLite's write lock:
// keep fn short.
func (s *Store) Commit(ctx context.Context, c dedup.Claim, ttl time.Duration, fn func(ctx context.Context, tx *sql.Tx) (dedup.Outcome, error)) (dedup.Outcome, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return dedup.Outcome{}, fmt.Errorf("dedupsqlite: commit: %w", err)
	}
	defer tx.Rollback()
	var (
		done bool
		outb []byte
	)
	err = tx.QueryRowContext(ctx, s.qHeld, c.Key, c.Token).Scan(&done, &outb)
	if errors.Is(err, sql.ErrNoRows) || c.Token == "" {
		return dedup.Outcome{}, fmt.Errorf("%w (key %q)", dedup.ErrLostClaim, c.Key)
	}
	if err != nil {
		return dedup.Outcome{}, fmt.Errorf("dedupsqlite: commit: %w", err)
	}
	if done {
		var out dedup.Outcome
		if err := out.UnmarshalBinary(outb); err != nil {
			return dedup.Outcome{}, fmt.Errorf("dedupsqlite: key %q: %w", c.Key, err)
		}
		return out, nil
	}
	out, err := fn(ctx, tx)
	if err != nil {
		return dedup.Outcome{}, err
	}
	b, _ := out.MarshalBinary()
	if _, err := tx.ExecContext(ctx, s.qComplete, b, now()+ttl.Microseconds(), c.Key, c.Token); err != nil {
		return dedup.Outcome{}, fmt.Errorf("dedupsqlite: commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return dedup.Outcome{}, fmt.Errorf("dedupsqlite: commit: %w", err)
	}
	return out, nil
}
