package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tailcut/hedge"
)

// get reads key from replica r of a replicated store. The replica the
// primary copy lands on is stuck behind a long pause: it answers only when
// its request is cancelled.
func get(ctx context.Context, r int, stuck bool, key string) (string, error) {
	if stuck {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return fmt.Sprintf("%s=42", key), nil
}

// Do sends a copy to another replica when the first is slow, and cancels
// the loser.
func ExampleDo() {
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond), Replicas: 3})
	if err != nil {
		panic(err)
	}
	var used [2]int
	v, err := hedge.Do(context.Background(), h, "Get", func(ctx context.Context, a hedge.Attempt) (string, error) {
		used[a.Index] = a.Replica
		return get(ctx, a.Replica, a.Index == 0, "k")
	})
	fmt.Println(v, err)
	fmt.Println("hedge on another replica:", used[0] != used[1])
	st := h.OpStats("Get")
	fmt.Println("hedges:", st.Hedges, "hedge wins:", st.HedgeWins)
	// Output:
	// k=42 <nil>
	// hedge on another replica: true
	// hedges: 1 hedge wins: 1
}

// New validates the whole configuration up front and says what to do about
// each mistake.
func ExampleNew() {
	_, err := hedge.New(hedge.Config{
		Delay:       hedge.Percentile{P: 40},
		MaxAttempts: 9,
	})
	fmt.Println(err)
	// Output:
	// hedge: Percentile.P = 40 is below the median, which sends most requests twice: use 90 to 99, or set AllowBelowMedian if this is deliberate
	// hedge: Config.MaxAttempts = 9: use 1 to 5 copies per request (2 is the usual choice; 0 means 2)
}

// Shadow mode runs every decision and sends nothing, to learn the real hedge
// rate before turning hedging on. (A zero delay makes the example's
// decisions immediate; a real one waits for the delay.)
func ExampleHedger_SetMode() {
	h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(0), Mode: hedge.Shadow})
	get := func(ctx context.Context, a hedge.Attempt) (int, error) { return 1, nil }
	for range 3 {
		hedge.Do(context.Background(), h, "Get", get)
	}
	st := h.OpStats("Get")
	fmt.Println("sent:", st.Hedges, "would have sent:", st.ShadowHedges)
	_ = h.SetMode(hedge.On) // when the numbers look right
	// Output:
	// sent: 0 would have sent: 3
}

// A write is sent once unless it carries an idempotency key.
func ExampleNotIdempotent() {
	h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(0)})
	write := func(ctx context.Context, a hedge.Attempt) (string, error) {
		return fmt.Sprintf("key %q", a.Key), nil // a real write sends a.Key along
	}
	ctx := hedge.NotIdempotent(context.Background())
	fmt.Println(hedge.Do(ctx, h, "Put", write))
	ctx = hedge.WithIdempotencyKey(ctx, "order-17")
	fmt.Println(hedge.Do(ctx, h, "Put", write))
	st := h.OpStats("Put")
	fmt.Println("unhedgeable:", st.Unhedgeable, "hedges:", st.Hedges)
	// Output:
	// key "" <nil>
	// key "order-17" <nil>
	// unhedgeable: 1 hedges: 1
}

// Permanent marks an error that another copy cannot fix.
func ExamplePermanent() {
	h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour)})
	errNotFound := errors.New("not found")
	calls := 0
	_, err := hedge.Do(context.Background(), h, "Get", func(ctx context.Context, a hedge.Attempt) (int, error) {
		calls++
		return 0, hedge.Permanent(errNotFound)
	})
	fmt.Println(errors.Is(err, errNotFound), calls)
	// Output:
	// true 1
}

// A search over 30 index shards of 2 servers each: leaf i reads shard i,
// from one of the two servers that hold it. The server that leaf 0's
// primary lands on is stalled. Its siblings answer at once, so leaf 0 is
// a straggler, and its hedge goes to shard 0's other server. (A fixed
// delay keeps the example short; the default learns its own.)
func ExampleDoFan_shards() {
	const shards, replicas = 30, 2
	h, err := hedge.New(hedge.Config{
		Replicas: shards * replicas, // the servers: shard s on 2s and 2s+1
		Shards:   hedge.ShardGrid(shards, replicas),
		Delay:    hedge.Fixed(5 * time.Millisecond),
	})
	if err != nil {
		panic(err)
	}
	var servers [2]int // leaf 0's copies
	res, err := hedge.DoFan(context.Background(), h, "Search", shards, hedge.FanOut{}, func(ctx context.Context, i int, a hedge.Attempt) (string, error) {
		if a.Replica/replicas != a.Shard || a.Shard != i {
			return "", fmt.Errorf("leaf %d sent to server %d", i, a.Replica)
		}
		if i == 0 {
			servers[a.Index] = a.Replica
		}
		if i == 0 && a.Index == 0 {
			select { // stalled
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Second):
			}
		}
		return fmt.Sprintf("hits of shard %d", a.Shard), nil
	})
	fmt.Println(res.Values[0], res.Values[29], err)
	fmt.Println("leaf 0's hedge on shard 0's other server:", servers[0] != servers[1] && servers[1] < replicas)
	st := h.OpStats("Search")
	fmt.Printf("shard 0: %d hedge, %d won\n", st.Shards[0].Hedges, st.Shards[0].HedgeWins)
	// Output:
	// hits of shard 0 hits of shard 29 <nil>
	// leaf 0's hedge on shard 0's other server: true
	// shard 0: 1 hedge, 1 won
}
