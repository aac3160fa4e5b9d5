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
