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
	"time"

	"modernc.org/sqlite" // and the database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/internal/sqlstore"
)

// DefaultTable is the table used when Options.Table is empty.
const DefaultTable = "dedup_keys"

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
	db    *sql.DB
	own   bool
	table string
	core  sqlstore.Store
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
	s.core = sqlstore.Store{D: dialect(t), DB: sqlDB{db}}
	return s, nil
}

// dialect is the store's SQL for table t. Times are the local clock's,
// in Unix microseconds, which the processes sharing a file share.
func dialect(t string) sqlstore.Dialect {
	var (
		qInsert   = `INSERT INTO ` + t + ` (key, fingerprint, token, done, outcome, expires) VALUES (?, ?, ?, 0, NULL, ?) ON CONFLICT (key) DO NOTHING`
		qTakeover = `UPDATE ` + t + ` SET fingerprint = ?, token = ?, done = 0, outcome = NULL, expires = ? WHERE key = ? AND expires <= ?`
		qSelect   = `SELECT fingerprint, token, done, outcome, expires > ? FROM ` + t + ` WHERE key = ?`
		qGet      = `SELECT fingerprint, token, done, outcome FROM ` + t + ` WHERE key = ? AND expires > ?`
		qComplete = `UPDATE ` + t + ` SET done = 1, outcome = ?, expires = ? WHERE key = ? AND token = ? AND done = 0`
		qDone     = `SELECT 1 FROM ` + t + ` WHERE key = ? AND token = ? AND done = 1`
		qRelease  = `DELETE FROM ` + t + ` WHERE key = ? AND token = ? AND done = 0`
		qRenew    = `UPDATE ` + t + ` SET expires = ? WHERE key = ? AND token = ? AND done = 0`
		qPurge    = `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + ` WHERE expires <= ? LIMIT ?)`
		qHeld     = `SELECT done, outcome FROM ` + t + ` WHERE key = ? AND token = ?`
	)
	return sqlstore.Dialect{
		Name: "dedupsqlite",
		Insert: func(key string, fp []byte, tok string, lease time.Duration) (string, []any) {
			return qInsert, []any{key, fp, tok, now() + lease.Microseconds()}
		},
		Takeover: func(key string, fp []byte, tok string, lease time.Duration) (string, []any) {
			t := now()
			return qTakeover, []any{fp, tok, t + lease.Microseconds(), key, t}
		},
		Select: func(key string) (string, []any) { return qSelect, []any{now(), key} },
		Get:    func(key string) (string, []any) { return qGet, []any{key, now()} },
		Complete: func(key, tok string, out []byte, ttl time.Duration) (string, []any) {
			return qComplete, []any{out, now() + ttl.Microseconds(), key, tok}
		},
		Done:    func(key, tok string) (string, []any) { return qDone, []any{key, tok} },
		Release: func(key, tok string) (string, []any) { return qRelease, []any{key, tok} },
		Renew: func(key, tok string, lease time.Duration) (string, []any) {
			return qRenew, []any{now() + lease.Microseconds(), key, tok}
		},
		Purge: func(limit int) (string, []any) { return qPurge, []any{now(), limit} }, // LIMIT -1: no limit
		Held:  func(key, tok string) (string, []any) { return qHeld, []any{key, tok} },
	}
}

// sqlDB is a database or a transaction as sqlstore uses it.
type sqlDB struct {
	db interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (d sqlDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := d.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d sqlDB) QueryRow(ctx context.Context, q string, args []any, dest ...any) error {
	err := d.db.QueryRowContext(ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return sqlstore.ErrNoRows
	}
	return err
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
	out, done, err := s.core.Commit(ctx, sqlDB{tx}, c, ttl, func() (dedup.Outcome, error) { return fn(ctx, tx) })
	if err != nil || done {
		return out, err
	}
	if err := tx.Commit(); err != nil {
		return dedup.Outcome{}, fmt.Errorf("dedupsqlite: commit: %w", err)
	}
	return out, nil
}
