package sim

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// afterCalls is a context whose Err is nil for its first n calls and
// context.Canceled from then on; its Done channel never closes. It stops
// a run at a point fixed by the count of checks, not by a clock.
type afterCalls struct {
	context.Context
	n atomic.Int64
}

func (c *afterCalls) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// A run in progress stops with the context's error: RunPoint's only run
// is fed after the first check, and the second, inside the run, stops it.
func TestRunPointStopsWithinARun(t *testing.T) {
	c := DefaultConfig()
	c.Requests, c.Warmup = 200_000, 1000
	ctx := &afterCalls{Context: context.Background()}
	ctx.n.Store(2)
	if _, err := RunPoint(ctx, c, 1, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPoint with the context cancelled during its run: error %v, want context.Canceled", err)
	}
}

// A context cancelled while a run goes stops it within ctxEvery events:
// the requests completed after the cancel are few, and the run returns
// the context's error.
func TestRunContextStops(t *testing.T) {
	c := DefaultConfig()
	c.Requests, c.Warmup = 100_000, 1000
	for _, script := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var s Simulator
		done, after := 0, 0
		s.Done = func(Completion) {
			done++
			if ctx.Err() != nil {
				after++
			}
			if done == 5000 {
				cancel()
			}
		}
		var err error
		if script {
			reqs := make([]ScriptedRequest, c.Requests)
			for i := range reqs {
				reqs[i] = ScriptedRequest{At: float64(i) / 8, Sizes: []float64{1, 1}}
			}
			_, err = s.RunScriptContext(ctx, c, Script{Requests: reqs})
		} else {
			_, err = s.RunContext(ctx, c)
		}
		if !errors.Is(err, context.Canceled) || after > ctxEvery {
			t.Errorf("script %v: error %v with %d requests completed after the cancel; want context.Canceled within %d events", script, err, after, ctxEvery)
		}
		cancel()
	}
}
