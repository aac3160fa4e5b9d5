package readme

import (
	"context"
	"database/sql"
	"log"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tailcut/hedge/hedgepgx"
	"github.com/tailcut/hedge/hedgesql"
	"github.com/tailcut/hedge/internal/pgtest"
)

// TestPostgresSnippet runs the README's hedgepgx snippet against a real
// primary and two streaming standbys on loopback.
func TestPostgresSnippet(t *testing.T) {
	set := pgtest.StartReplicated(t, 2)
	if set == nil {
		return
	}
	ctx := context.Background()
	setup, err := pgx.Connect(ctx, set.Primary.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	_, err = setup.Exec(ctx, "CREATE TABLE users (id bigint PRIMARY KEY, name text, team text); INSERT INTO users VALUES (42, 'Grace', 'core'), (43, 'Alan', 'core')")
	setup.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The snippet's last read may go to any server: let the standbys
	// replay the table before it runs.
	if err := set.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	var cfgs []*pgxpool.Config
	for _, cl := range set.All() {
		pc, err := pgxpool.ParseConfig(cl.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, pc)
	}
	primary, replicaA, replicaB := cfgs[0], cfgs[1], cfgs[2]

	c, err := hedgepgx.NewFromConfigs([]*pgxpool.Config{primary, replicaA, replicaB}, hedgepgx.Config{
		MaxLag: 16 << 20, // replicas more than 16 MB of WAL behind get no reads
	})
	if err != nil {
		log.Fatal(err) // every mistake at once: one pool, a pool twice, Config.Hedge.* fields
	}
	defer c.Close()
	// Writes go to the primary, once, never hedged; ExecLSN also returns
	// the primary's WAL position after the write.
	_, lsn, err := c.ExecLSN(ctx, "UPDATE users SET name = $1 WHERE id = $2", "Ada", 42)
	if err != nil {
		log.Fatal(err)
	}
	// Read your write: every copy goes to a server that has replayed lsn.
	var name string
	err = c.QueryRow(hedgepgx.WithMinLSN(ctx, lsn), "SELECT name FROM users WHERE id = $1", 42).Scan(&name)
	if err != nil {
		log.Fatal(err)
	}
	// Any server; the rows are read inside the copy that wins.
	ids, err := hedgepgx.Collect(ctx, c, pgx.RowTo[int64], "SELECT id FROM users WHERE team = $1 ORDER BY id", "core")

	if err != nil || name != "Ada" || len(ids) != 2 || ids[0] != 42 {
		t.Fatalf("name %q, ids %v, %v; want Ada, [42 43]", name, ids, err)
	}
}

// TestSQLSnippet runs the README's hedgesql snippet, through pgx's
// database/sql driver, against a real primary and two streaming standbys.
func TestSQLSnippet(t *testing.T) {
	set := pgtest.StartReplicated(t, 2)
	if set == nil {
		return
	}
	ctx := context.Background()
	setup, err := pgx.Connect(ctx, set.Primary.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	_, err = setup.Exec(ctx, "CREATE TABLE users (id bigint PRIMARY KEY, name text, team text); INSERT INTO users VALUES (42, 'Grace', 'core'), (43, 'Alan', 'core')")
	setup.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.WaitCaughtUp(ctx); err != nil { // reads go to any server
		t.Fatal(err)
	}
	primaryDSN, replicaADSN, replicaBDSN := set.Primary.DSN(""), set.Standbys[0].DSN(""), set.Standbys[1].DSN("")

	var dbs []*sql.DB
	for _, dsn := range []string{primaryDSN, replicaADSN, replicaBDSN} {
		cc, err := pgx.ParseConfig(dsn)
		if err != nil {
			log.Fatal(err)
		}
		// A lost copy's query is cancelled on its server and its connection kept.
		cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 2 * time.Second}
		}
		// No ping before reusing an idle connection: a ping cancelled with its
		// copy would break the connection (a dead one fails the copy anyway).
		db := stdlib.OpenDB(*cc, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false }))
		db.SetMaxIdleConns(16) // room for the connections the losers give back
		defer db.Close()
		dbs = append(dbs, db)
	}
	c, err := hedgesql.New(dbs, hedgesql.Config{}) // dbs[0] is the primary
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.Exec(ctx, "UPDATE users SET name = $1 WHERE id = $2", "Ada", 42) // the primary, once
	if err != nil {
		log.Fatal(err)
	}
	var team string // any server, as stale as its replica
	err = c.QueryRow(ctx, "SELECT team FROM users WHERE id = $1", 43).Scan(&team)
	if err != nil {
		log.Fatal(err)
	}
	ids, err := hedgesql.Collect(ctx, c, func(r *sql.Rows) (int64, error) {
		var id int64
		return id, r.Scan(&id)
	}, "SELECT id FROM users WHERE team = $1 ORDER BY id", "core")

	if err != nil || team != "core" || len(ids) != 2 || ids[0] != 42 {
		t.Fatalf("team %q, ids %v, %v; want core, [42 43]", team, ids, err)
	}
	var name string
	if err := dbs[0].QueryRowContext(ctx, "SELECT name FROM users WHERE id = 42").Scan(&name); err != nil || name != "Ada" {
		t.Fatalf("the write: name %q on the primary, %v; want Ada", name, err)
	}
}
