package bench

import (
	"context"
	"errors"
	"sync"
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
		// none of them can be answered in between.
		stallCtx, endStall := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.Stall(stallCtx, i, time.Hour)
			}()
		}
		for i := range cancelled {
			for !b.gates[0].Stalled() || !b.gates[1].Stalled() {
				time.Sleep(time.Millisecond) // the stall goroutines start
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err := c.Do(ctx, i)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("h2c %v: call during a stall: %v, want the deadline", h2c, err)
			}
		}
		endStall()
		wg.Wait()
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
