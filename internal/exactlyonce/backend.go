package exactlyonce

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/deduppg"
	"github.com/tailcut/hedge/dedup/dedupredis"
	"github.com/tailcut/hedge/dedup/dedupsqlite"
)

// Store kinds.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
	Redis    = "redis"
)

// Target says which store the replicas share and where it is.
type Target struct {
	// Kind is SQLite, Postgres or Redis.
	Kind string
	// SQLitePath is the database file, for SQLite.
	SQLitePath string `json:",omitempty"`
	// PostgresDSN is the connection string, for Postgres.
	PostgresDSN string `json:",omitempty"`
	// RedisAddr is host:port, for Redis.
	RedisAddr string `json:",omitempty"`
}

// String names the store and where it is.
func (t Target) String() string {
	switch t.Kind {
	case SQLite:
		return "sqlite " + t.SQLitePath
	case Postgres:
		return "postgres " + t.PostgresDSN
	case Redis:
		return "redis " + t.RedisAddr
	}
	return t.Kind
}

// Validate reports a Target that names no usable store.
func (t Target) Validate() error {
	switch {
	case t.Kind == SQLite && t.SQLitePath != "",
		t.Kind == Postgres && t.PostgresDSN != "",
		t.Kind == Redis && t.RedisAddr != "":
		return nil
	}
	return fmt.Errorf("exactlyonce: store %q: want %s with a file, %s with a DSN, or %s with an address", t.Kind, SQLite, Postgres, Redis)
}

// ordersKey is the Redis list of order lines; ordersTable the SQL table.
const (
	ordersKey   = "exactlyonce:orders"
	ordersTable = "exactlyonce_orders"
)

// backend is a shared store plus the operation under test: appending an
// order line, a write that is not idempotent.
type backend struct {
	store dedup.Store
	// commit appends the order line of key (the request's idempotency
	// key; cl.Key is that key in its scope) and stores the outcome, in
	// one transaction fenced by the claim.
	commit func(ctx context.Context, cl dedup.Claim, key, line string, ttl time.Duration) (dedup.Outcome, error)
	// plain appends the order line without any deduplication.
	plain func(ctx context.Context, key, line string) error
	// lines returns how many order lines each key has.
	lines func(ctx context.Context) (map[string]int, error)
	// reset deletes every order line and record.
	reset func(ctx context.Context) error
	close func()
}

func outcome(line string) dedup.Outcome {
	return dedup.Outcome{Status: 201, Header: map[string][]string{"Content-Type": {"text/plain"}}, Body: []byte(line)}
}

// open connects to the target's store.
func open(ctx context.Context, t Target) (*backend, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	switch t.Kind {
	case SQLite:
		return openSQLite(ctx, t.SQLitePath)
	case Postgres:
		return openPostgres(ctx, t.PostgresDSN)
	default:
		return openRedis(ctx, t.RedisAddr)
	}
}

func openSQLite(ctx context.Context, path string) (*backend, error) {
	s, err := dedupsqlite.Open(ctx, path, dedupsqlite.Options{})
	if err != nil {
		return nil, err
	}
	db := s.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+ordersTable+` (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, line TEXT NOT NULL)`); err != nil {
		s.Close()
		return nil, fmt.Errorf("exactlyonce: %w", err)
	}
	insert := `INSERT INTO ` + ordersTable + ` (key, line) VALUES (?, ?)`
	return &backend{
		store: s,
		commit: func(ctx context.Context, cl dedup.Claim, key, line string, ttl time.Duration) (dedup.Outcome, error) {
			return s.Commit(ctx, cl, ttl, func(ctx context.Context, tx *sql.Tx) (dedup.Outcome, error) {
				_, err := tx.ExecContext(ctx, insert, key, line)
				return outcome(line), err
			})
		},
		plain: func(ctx context.Context, key, line string) error {
			_, err := db.ExecContext(ctx, insert, key, line)
			return err
		},
		lines: func(ctx context.Context) (map[string]int, error) {
			return countSQL(func() (*sql.Rows, error) {
				return db.QueryContext(ctx, `SELECT key, count(*) FROM `+ordersTable+` GROUP BY key`)
			})
		},
		reset: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, `DELETE FROM `+ordersTable+`; DELETE FROM `+dedupsqlite.DefaultTable)
			return err
		},
		close: func() { s.Close() },
	}, nil
}

func countSQL(query func() (*sql.Rows, error)) (map[string]int, error) {
	rows, err := query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		m[k] = n
	}
	return m, rows.Err()
}

func openPostgres(ctx context.Context, dsn string) (*backend, error) {
	s, err := deduppg.Open(ctx, dsn, deduppg.Options{MaxConns: 16})
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("exactlyonce: %w", err)
	}
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ordersTable+` (id bigserial PRIMARY KEY, key text NOT NULL, line text NOT NULL)`)
	conn.Close(ctx)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		s.Close()
		return nil, fmt.Errorf("exactlyonce: %w", err)
	}
	insert := `INSERT INTO ` + ordersTable + ` (key, line) VALUES ($1, $2)`
	withConn := func(ctx context.Context, fn func(*pgx.Conn) error) error {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close(context.WithoutCancel(ctx))
		return fn(c)
	}
	// plain runs on a connection of its own, kept for the measurement.
	var plainConn *pgx.Conn
	return &backend{
		store: s,
		commit: func(ctx context.Context, cl dedup.Claim, key, line string, ttl time.Duration) (dedup.Outcome, error) {
			return s.Commit(ctx, cl, ttl, func(ctx context.Context, tx pgx.Tx) (dedup.Outcome, error) {
				_, err := tx.Exec(ctx, insert, key, line)
				return outcome(line), err
			})
		},
		plain: func(ctx context.Context, key, line string) error {
			if plainConn == nil {
				c, err := pgx.Connect(ctx, dsn)
				if err != nil {
					return err
				}
				plainConn = c
			}
			// A transaction, as Commit's write has, so that the two
			// differ by the deduplication alone.
			return pgx.BeginFunc(ctx, plainConn, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, insert, key, line)
				return err
			})
		},
		lines: func(ctx context.Context) (map[string]int, error) {
			m := map[string]int{}
			err := withConn(ctx, func(c *pgx.Conn) error {
				rows, err := c.Query(ctx, `SELECT key, count(*) FROM `+ordersTable+` GROUP BY key`)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					var k string
					var n int
					if err := rows.Scan(&k, &n); err != nil {
						return err
					}
					m[k] = n
				}
				return rows.Err()
			})
			return m, err
		},
		reset: func(ctx context.Context) error {
			return withConn(ctx, func(c *pgx.Conn) error {
				_, err := c.Exec(ctx, `TRUNCATE `+ordersTable+`, `+deduppg.DefaultTable)
				return err
			})
		},
		close: func() {
			if plainConn != nil {
				plainConn.Close(context.Background())
			}
			s.Close()
		},
	}, nil
}

func openRedis(ctx context.Context, addr string) (*backend, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32})
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("exactlyonce: redis at %s: %w", addr, err)
	}
	s := dedupredis.New(rdb, dedupredis.Options{})
	return &backend{
		store: s,
		commit: func(ctx context.Context, cl dedup.Claim, key, line string, ttl time.Duration) (dedup.Outcome, error) {
			return s.Commit(ctx, cl, ttl, func(ctx context.Context, pipe redis.Pipeliner) (dedup.Outcome, error) {
				pipe.RPush(ctx, ordersKey, key)
				return outcome(line), nil
			})
		},
		plain: func(ctx context.Context, key, line string) error {
			return rdb.RPush(ctx, ordersKey, key).Err()
		},
		lines: func(ctx context.Context) (map[string]int, error) {
			keys, err := rdb.LRange(ctx, ordersKey, 0, -1).Result()
			if err != nil {
				return nil, err
			}
			m := map[string]int{}
			for _, k := range keys {
				m[k]++
			}
			return m, nil
		},
		reset: func(ctx context.Context) error {
			var errs []error
			errs = append(errs, rdb.Del(ctx, ordersKey).Err())
			iter := rdb.Scan(ctx, 0, dedupredis.DefaultPrefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				errs = append(errs, rdb.Del(ctx, iter.Val()).Err())
			}
			errs = append(errs, iter.Err())
			return errors.Join(errs...)
		},
		close: func() { rdb.Close() },
	}, nil
}
