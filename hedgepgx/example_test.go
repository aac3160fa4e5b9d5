package hedgepgx_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgepgx"
)

// A Client over a primary and two streaming replicas. Reads are hedged;
// writes go to the primary once; a read after a write carries the
// write's position, so that whichever server answers has it.
// (Compile-only: it needs servers.)
func Example() {
	var configs []*pgxpool.Config
	for _, dsn := range []string{
		"host=pg-primary.example dbname=app", // the primary (Config.Primary 0)
		"host=pg-replica-a.example dbname=app",
		"host=pg-replica-b.example dbname=app",
	} {
		pc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			log.Fatal(err)
		}
		configs = append(configs, pc)
	}
	// NewFromConfigs applies KeepConnsOnCancel: a lost hedge's query is
	// cancelled on the server and its connection kept.
	c, err := hedgepgx.NewFromConfigs(configs, hedgepgx.Config{
		Hedge:  hedge.Config{Delay: hedge.Percentile{Ceiling: 50 * time.Millisecond}},
		MaxLag: 16 << 20, // keep replicas 16 MB of WAL behind out of reads
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	_, lsn, err := c.ExecLSN(ctx, "UPDATE users SET name = $1 WHERE id = $2", "Ada", 42) // primary, once
	if err != nil {
		log.Fatal(err)
	}
	var name string
	err = c.QueryRow(hedgepgx.WithMinLSN(ctx, lsn), "SELECT name FROM users WHERE id = $1", 42).Scan(&name) // sees "Ada"
	fmt.Println(name, err)

	ids, err := hedgepgx.Collect(ctx, c, pgx.RowTo[int64], "SELECT id FROM users WHERE name = $1", "Ada") // any replica
	fmt.Println(ids, err)
}
