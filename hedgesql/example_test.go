package hedgesql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgesql"
)

// A Client over a primary and two read replicas, through pgx's
// database/sql driver. Reads are hedged; writes go to the primary once.
// Each database keeps its connections when a lost hedge's query is
// cancelled. (Compile-only: it needs servers.)
func Example() {
	var dbs []*sql.DB
	for _, dsn := range []string{
		"host=pg-primary.example dbname=app", // the primary (Config.Primary 0)
		"host=pg-replica-a.example dbname=app",
		"host=pg-replica-b.example dbname=app",
	} {
		cc, err := pgx.ParseConfig(dsn)
		if err != nil {
			log.Fatal(err)
		}
		// Cancel a lost copy's query on the server and keep the
		// connection, instead of breaking it.
		cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 2 * time.Second}
		}
		db := stdlib.OpenDB(*cc)
		db.SetMaxIdleConns(16) // room for the connections losers give back
		defer db.Close()
		dbs = append(dbs, db)
	}
	c, err := hedgesql.New(dbs, hedgesql.Config{
		Hedge: hedge.Config{Delay: hedge.Percentile{Ceiling: 50 * time.Millisecond}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	if _, err := c.Exec(ctx, "UPDATE users SET seen = now() WHERE id = $1", 42); err != nil { // primary, once
		log.Fatal(err)
	}
	var name string
	err = c.QueryRow(ctx, "SELECT name FROM users WHERE id = $1", 42).Scan(&name) // any server
	fmt.Println(name, err)

	ids, err := hedgesql.Collect(ctx, c, func(r *sql.Rows) (int64, error) {
		var id int64
		return id, r.Scan(&id)
	}, "SELECT id FROM users WHERE name = $1", name)
	fmt.Println(ids, err)
}
