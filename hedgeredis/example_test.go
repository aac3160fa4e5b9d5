package hedgeredis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeredis"
)

// A Client over a primary and two replicas of it. Reads on the allow-list
// are hedged; writes (Set, SetNX, Del, and any other command) go to the
// primary once. (Compile-only: it
// needs servers.)
func Example() {
	opts := []*redis.Options{
		{Addr: "replica-a.example:6379", PoolSize: 32, ReadTimeout: 500 * time.Millisecond, MaxRetries: -1}, // the primary
		{Addr: "replica-b.example:6379", PoolSize: 32, ReadTimeout: 500 * time.Millisecond},
		{Addr: "replica-c.example:6379", PoolSize: 32, ReadTimeout: 500 * time.Millisecond},
	}
	c, err := hedgeredis.NewFromOptions(opts, hedgeredis.Config{
		// Hedge after the live p95 of each command, never later than 20 ms.
		Hedge: hedge.Config{Delay: hedge.Percentile{Ceiling: 20 * time.Millisecond}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	if err := c.Set(ctx, "greeting", "hello", time.Hour).Err(); err != nil { // primary, once
		log.Fatal(err)
	}
	// Replicas may lag the primary: wait until both have the write before
	// reading it from any of them (or read your own writes from Primary).
	if err := c.Primary().Do(ctx, "WAIT", 2, 1000).Err(); err != nil {
		log.Fatal(err)
	}
	v, err := c.Get(ctx, "greeting").Result() // hedged across the three
	fmt.Println(v, err)

	for _, r := range c.Stats().Replicas {
		fmt.Printf("%s: %d wins, %d in flight, %v waiting for connections\n", r.Addr, r.Wins, r.InFlight, r.PoolWait())
	}
}
