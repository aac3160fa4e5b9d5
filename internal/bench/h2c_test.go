package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

// TestCancelledCallCostsADialOnlyOverHTTP1 cancels calls held by a stalled
// replica and counts the connections the client dials: over HTTP/1.1 each
// cancelled call closes its connection, over h2c it resets a stream and
// the connection stays.
func TestCancelledCallCostsADialOnlyOverHTTP1(t *testing.T) {
	const cancelled = 5
	for _, h2c := range []bool{false, true} {
		b, err := StartHTTP(HTTPOptions{Replicas: 2, H2C: h2c})
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.NewClient(hedge.Config{Replicas: 2, MaxAttempts: 1, Picker: hedge.Picker{Random: true}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if err := c.Do(context.Background(), i); err != nil {
				t.Fatal(err)
			}
		}
		before := c.Stats().Dials
		// Stall both replicas until the calls below have been cancelled:
		// none of them can be answered in between. The stalls are put in
		// place before the first call, not started on goroutines of
		// their own, so no call can slip in before them.
		var stalls []*stall
		for _, g := range b.gates {
			st := &stall{done: make(chan struct{})}
			g.cur.Store(st)
			stalls = append(stalls, st)
		}
		for i := range cancelled {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err := c.Do(ctx, i)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("h2c %v: call during a stall: %v, want the deadline", h2c, err)
			}
		}
		for i, g := range b.gates {
			g.cur.CompareAndSwap(stalls[i], nil)
			stalls[i].end()
		}
		for i := range 20 {
			if err := c.Do(context.Background(), i); err != nil {
				t.Fatal(err)
			}
		}
		dials := c.Stats().Dials - before
		c.Close()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if h2c && dials != 0 {
			t.Errorf("h2c: %d dials after %d cancelled calls, want 0: a cancel resets a stream", dials, cancelled)
		}
		if !h2c && dials < cancelled {
			t.Errorf("HTTP/1.1: %d dials after %d cancelled calls, want at least one each", dials, cancelled)
		}
	}
}
