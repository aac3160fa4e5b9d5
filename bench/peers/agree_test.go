package peers

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/failsafe-go/failsafe-go"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// TestPeersAgree checks that each benchmark's setup does what the benchmark
// claims, so that a benchmark cannot silently measure something else (a
// timer never armed, a hedge refused by a budget, a primary that never
// exits, a RoundTripper that bypasses hedging).
func TestPeersAgree(t *testing.T) {
	const n = 50

	t.Run("NoHedge", func(t *testing.T) {
		// Every case of the benchmark returns the primary's value.
		for _, pc := range parentCases {
			for _, c := range noHedgeCases {
				ctx, cancel := pc.ctx()
				call := c.newCall(ctx)
				for range n {
					if v, err := call(); err != nil || v != primaryVal {
						t.Fatalf("%s/%s: got (%d, %v), want (%d, nil)", pc.name, c.name, v, err, primaryVal)
					}
				}
				cancel()
			}
		}

		t.Run("hedge", func(t *testing.T) {
			for _, pc := range parentCases {
				ctx, cancel := pc.ctx()
				h := newNoHedgeHedger()
				for range n {
					v, err := hedge.Do(ctx, h, op, func(ctx context.Context, a hedge.Attempt) (int, error) {
						if a.IsHedge() {
							t.Errorf("%s: a hedge ran", pc.name)
						}
						return fastAttempt(ctx, a)
					})
					if err != nil || v != primaryVal {
						t.Fatalf("%s: got (%d, %v)", pc.name, v, err)
					}
				}
				cancel()
				st := h.OpStats(op)
				// The delay in force is the hour, and with no deadline
				// nothing skips it: every call armed the timer.
				if st.Delay != noHedgeDelay {
					t.Errorf("%s: delay in force %v, want %v (the timer would not be armed)", pc.name, st.Delay, noHedgeDelay)
				}
				if st.Requests != n || st.PrimaryWins != n || st.Hedges != 0 || st.HedgeWins != 0 || st.DeadlineSkipped != 0 {
					t.Errorf("%s: stats %+v, want %d requests won by the primary, no hedge, no skip", pc.name, st, n)
				}
			}
		})

		t.Run("failsafe", func(t *testing.T) {
			for _, pc := range parentCases {
				ctx, cancel := pc.ctx()
				var dones, hedges, extra atomic.Int64
				ex := newNoHedgeExecutor().OnDone(func(e failsafe.ExecutionDoneEvent[int]) {
					dones.Add(1)
					hedges.Add(int64(e.Hedges()))
					extra.Add(int64(e.Attempts() - 1))
				}).WithContext(ctx)
				for range n {
					v, err := ex.Get(fastGet)
					if err != nil || v != primaryVal {
						t.Fatalf("%s: got (%d, %v)", pc.name, v, err)
					}
					// The policy is in force: the attempt gets its own
					// cancellable child of the caller's context.
					v, err = ex.GetWithExecution(func(e failsafe.Execution[int]) (int, error) {
						if e.IsHedge() {
							t.Errorf("%s: a hedge ran", pc.name)
						}
						if e.Context() == ctx || e.Context().Done() == nil {
							t.Errorf("%s: the attempt has no context of its own: is the hedge policy applied?", pc.name)
						}
						return fastGetExec(e)
					})
					if err != nil || v != primaryVal {
						t.Fatalf("%s: got (%d, %v)", pc.name, v, err)
					}
				}
				cancel()
				if dones.Load() != 2*n || hedges.Load() != 0 || extra.Load() != 0 {
					t.Errorf("%s: %d executions, %d hedges, %d extra attempts; want %d, 0, 0", pc.name, dones.Load(), hedges.Load(), extra.Load(), 2*n)
				}
			}
		})
	})

	t.Run("OneHedge", func(t *testing.T) {
		if oneHedgeDelay <= 0 {
			t.Fatalf("oneHedgeDelay = %v: the benchmark needs a small nonzero delay", oneHedgeDelay)
		}
		before := runtime.NumGoroutine()
		for _, d := range oneHedgeDelays {
			for _, c := range oneHedgeCases {
				call := c.newCall(d.delay)
				for range n {
					start := time.Now()
					v, err := within(t, c.name, call)
					if err != nil || v != hedgeVal {
						t.Fatalf("%s/%s: got (%d, %v), want (%d, nil): the hedge did not win", d.name, c.name, v, err, hedgeVal)
					}
					if el := time.Since(start); el < d.delay {
						t.Fatalf("%s/%s: call took %v, less than the delay: the hedge did not wait", d.name, c.name, el)
					}
				}
			}
		}
		checkGoroutines(t, before)

		for _, bgReap := range []bool{false, true} {
			h := newOneHedgeHedger(oneHedgeDelay, bgReap)
			exits := make(chan error, 1)
			attempt := func(ctx context.Context, a hedge.Attempt) (int, error) {
				v, err := slowPrimary(ctx, a)
				if !a.IsHedge() {
					exits <- err
				}
				return v, err
			}
			for range n {
				v, err := within(t, "hedge", func() (int, error) { return hedge.Do(context.Background(), h, op, attempt) })
				if err != nil || v != hedgeVal {
					t.Fatalf("bgReap=%v: got (%d, %v), want (%d, nil)", bgReap, v, err, hedgeVal)
				}
				if !bgReap {
					// Do reaps: the primary has returned already.
					select {
					case err := <-exits:
						if !errors.Is(err, context.Canceled) {
							t.Fatalf("primary returned %v, want context.Canceled", err)
						}
					default:
						t.Fatal("Do returned before the cancelled primary")
					}
				} else {
					waitPrimary(t, exits)
				}
			}
			st := h.OpStats(op)
			if st.Requests != n || st.Hedges != n || st.HedgeWins != n || st.PrimaryWins != 0 || st.BudgetDenied != 0 {
				t.Errorf("bgReap=%v: stats %+v, want %d calls each won by a hedge", bgReap, st, n)
			}
		}

		t.Run("failsafe", func(t *testing.T) {
			var hedges atomic.Int64
			ex := newOneHedgeExecutor(oneHedgeDelay).OnDone(func(e failsafe.ExecutionDoneEvent[int]) {
				hedges.Add(int64(e.Hedges()))
			})
			exits := make(chan error, 1)
			fn := func(e failsafe.Execution[int]) (int, error) {
				v, err := slowPrimaryExec(e)
				if !e.IsHedge() {
					exits <- err
				}
				return v, err
			}
			for range n {
				v, err := within(t, "failsafe", func() (int, error) { return ex.GetWithExecution(fn) })
				if err != nil || v != hedgeVal {
					t.Fatalf("got (%d, %v), want (%d, nil)", v, err, hedgeVal)
				}
				// failsafe-go does not wait for the primary, but it
				// must have cancelled it.
				waitPrimary(t, exits)
			}
			if hedges.Load() != n {
				t.Errorf("%d hedges in %d calls, want one each", hedges.Load(), n)
			}
		})
	})

	t.Run("HTTPNoHedge", func(t *testing.T) {
		for _, c := range httpCases {
			inner := &countingTransport{}
			rt := c.wrap(inner)
			req := newRequest()
			for range n {
				resp, err := rt.RoundTrip(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: got (%v, %v)", c.name, resp, err)
				}
				wrapped := resp.Body != http.NoBody
				if err := resp.Body.Close(); err != nil {
					t.Fatal(err)
				}
				switch c.name {
				case "plain":
					if wrapped {
						t.Fatalf("plain: body was wrapped")
					}
				default:
					// The hedging path was taken, not a passthrough.
					if !wrapped {
						t.Fatalf("%s: body not wrapped: the RoundTripper did not hedge", c.name)
					}
				}
				// Closing the body ends the attempt's context.
				if c.name != "plain" {
					if err := inner.lastCtx().Err(); !errors.Is(err, context.Canceled) {
						t.Fatalf("%s: attempt context after Close: %v, want context.Canceled", c.name, err)
					}
				}
			}
			if calls, hedged := inner.calls.Load(), inner.hedged.Load(); calls != n || hedged != 0 {
				t.Errorf("%s: inner transport saw %d requests, %d hedged; want %d, 0", c.name, calls, hedged, n)
			}
			// Ours went through the Hedger, which armed the hour's timer
			// on every request and sent no hedge.
			if ht, ok := rt.(*hedgehttp.Transport); ok {
				st := ht.Hedger().OpStats(http.MethodGet)
				if st.Delay != noHedgeDelay || st.Requests != n || st.PrimaryWins != n || st.Hedges != 0 || st.DeadlineSkipped != 0 {
					t.Errorf("%s: stats %+v, want %d requests won by the primary, no hedge, delay %v", c.name, st, n, noHedgeDelay)
				}
			} else if c.name == "hedgehttp" {
				t.Errorf("hedgehttp: RoundTripper is %T, want *hedgehttp.Transport", rt)
			}
		}
	})
}

// within runs call, failing t if it does not return in time: when no hedge
// fires, the blocked primary would hang the test rather than fail it.
func within(t *testing.T, name string, call func() (int, error)) (int, error) {
	t.Helper()
	type result struct {
		v   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := call()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: call still running after 5s: no hedge fired to rescue the blocked primary", name)
		return 0, nil
	}
}

// waitPrimary waits for the cancelled primary to report its exit.
func waitPrimary(t *testing.T, exits <-chan error) {
	t.Helper()
	select {
	case err := <-exits:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("primary returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the primary was never cancelled")
	}
}

// countingTransport is cannedTransport, counting requests and hedged
// requests and keeping the last request's context.
type countingTransport struct {
	calls, hedged atomic.Int64
	mu            sync.Mutex
	ctx           context.Context
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	if hedgedhttp.IsHedgedRequest(req) || req.Header.Get(hedgehttp.AttemptHeader) != "" {
		c.hedged.Add(1)
	}
	c.mu.Lock()
	c.ctx = req.Context()
	c.mu.Unlock()
	return cannedTransport{}.RoundTrip(req)
}

func (c *countingTransport) lastCtx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctx
}
