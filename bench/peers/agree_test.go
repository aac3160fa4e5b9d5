package peers

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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
//
// The calls run in testing/synctest bubbles, on a fake clock: a hedge
// fires exactly at its delay and a call that waits an hour does so in no
// time, so nothing depends on how fast this machine is. Each bubble builds
// its own Hedger or executor, so that every goroutine and timer they start
// belongs to it. A bubble also ends only when every goroutine started in it
// has returned, and fails if they are all blocked: an attempt that outlives
// its call, or a blocked primary that no hedge rescues, fails the test
// instead of hanging it. Two cases cannot run in a bubble and run on the
// real clock, with checks that hold however the machine schedules them:
// PreciseTimers, whose timer goroutine spins (see the hedge package doc),
// and the RoundTrippers, because hedgedhttp keeps a pool of goroutines
// that never exit.
func TestPeersAgree(t *testing.T) {
	const n = 50

	t.Run("NoHedge", func(t *testing.T) {
		// Every case of the benchmark returns the primary's value.
		for _, pc := range parentCases {
			for _, c := range noHedgeCases {
				synctest.Test(t, func(t *testing.T) {
					defer settle()
					ctx, cancel := pc.ctx()
					defer cancel()
					call := c.newCall(ctx)
					for range n {
						if v, err := call(); err != nil || v != primaryVal {
							t.Fatalf("%s/%s: got (%d, %v), want (%d, nil)", pc.name, c.name, v, err, primaryVal)
						}
					}
				})
			}
		}

		t.Run("hedge", func(t *testing.T) {
			for _, pc := range parentCases {
				synctest.Test(t, func(t *testing.T) {
					defer settle()
					ctx, cancel := pc.ctx()
					h := newNoHedgeHedger()
					for range n {
						v, err := hedge.Do(ctx, h, op, func(ctx context.Context, a hedge.Attempt) (int, error) {
							if a.Hedge {
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
					if st.Requests != n || st.PrimaryWins != n || st.Hedges != 0 || st.HedgeWins != 0 || st.Refused[hedge.RefusedDeadline] != 0 {
						t.Errorf("%s: stats %+v, want %d requests won by the primary, no hedge, no skip", pc.name, st, n)
					}
				})
			}
		})

		t.Run("failsafe", func(t *testing.T) {
			for _, pc := range parentCases {
				synctest.Test(t, func(t *testing.T) {
					defer settle()
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
				})
			}
		})
	})

	t.Run("OneHedge", func(t *testing.T) {
		if oneHedgeDelay <= 0 {
			t.Fatalf("oneHedgeDelay = %v: the benchmark needs a small nonzero delay", oneHedgeDelay)
		}
		for _, d := range oneHedgeDelays {
			for _, c := range oneHedgeCases {
				if c.name == "hedge-precise" {
					continue // below, on the real clock
				}
				synctest.Test(t, func(t *testing.T) {
					defer settle()
					call := c.newCall(d.delay)
					for range n {
						start := time.Now()
						v, err := call()
						if err != nil || v != hedgeVal {
							t.Fatalf("%s/%s: got (%d, %v), want (%d, nil): the hedge did not win", d.name, c.name, v, err, hedgeVal)
						}
						// The hedge goes exactly at the delay: the
						// primary never returns on its own, and the
						// hedge returns at once.
						if el := time.Since(start); el != d.delay {
							t.Fatalf("%s/%s: call took %v, want the delay %v", d.name, c.name, el, d.delay)
						}
					}
				})
			}
		}

		for _, bgReap := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				h := newOneHedgeHedger(oneHedgeDelay, bgReap)
				exits := make(chan error, 1)
				attempt := reportingExit(exits)
				for range n {
					v, err := hedge.Do(context.Background(), h, op, attempt)
					if err != nil || v != hedgeVal {
						t.Fatalf("bgReap=%v: got (%d, %v), want (%d, nil)", bgReap, v, err, hedgeVal)
					}
					if !bgReap {
						checkReaped(t, exits)
					} else {
						waitPrimary(t, exits)
					}
				}
				st := h.OpStats(op)
				if st.Requests != n || st.Hedges != n || st.HedgeWins != n || st.PrimaryWins != 0 || st.Refused[hedge.RefusedBudget] != 0 {
					t.Errorf("bgReap=%v: stats %+v, want %d calls each won by a hedge", bgReap, st, n)
				}
			})
		}

		t.Run("failsafe", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
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
					v, err := ex.GetWithExecution(fn)
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

		// PreciseTimers, on the real clock: the hedge wins, not before the
		// delay, and Do returns after the cancelled primary. Nothing here
		// depends on how late the timer fires. (Were no hedge to fire, the
		// call would block until the test binary's timeout, which reports
		// where.)
		t.Run("precise", func(t *testing.T) {
			var precise *oneHedgeCase
			for i := range oneHedgeCases {
				if oneHedgeCases[i].name == "hedge-precise" {
					precise = &oneHedgeCases[i]
				}
			}
			if precise == nil {
				t.Fatal("no hedge-precise case: update the name the bubbles above skip")
			}
			for _, d := range oneHedgeDelays {
				call := precise.newCall(d.delay)
				for range n {
					start := time.Now()
					v, err := call()
					el := time.Since(start)
					if err != nil || v != hedgeVal {
						t.Fatalf("%s: got (%d, %v), want (%d, nil): the hedge did not win", d.name, v, err, hedgeVal)
					}
					if el < d.delay {
						t.Fatalf("%s: call took %v, less than the delay: the hedge did not wait", d.name, el)
					}
				}
				// The same Hedger setup, with the primary reporting its
				// exit.
				h := newOneHedgeHedgerWith(hedge.Config{PreciseTimers: true}, d.delay)
				exits := make(chan error, 1)
				attempt := reportingExit(exits)
				for range n {
					v, err := hedge.Do(context.Background(), h, op, attempt)
					if err != nil || v != hedgeVal {
						t.Fatalf("%s: got (%d, %v), want (%d, nil): the hedge did not win", d.name, v, err, hedgeVal)
					}
					checkReaped(t, exits)
				}
			}
		})
	})

	// On the real clock: hedgedhttp runs its copies on a pool of goroutines
	// that wait on a package-level channel forever, which a bubble cannot
	// hold. Nothing here races: the only timer is the hour's delay, against
	// a response made in memory.
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
				if st.Delay != noHedgeDelay || st.Requests != n || st.PrimaryWins != n || st.Hedges != 0 || st.Refused[hedge.RefusedDeadline] != 0 {
					t.Errorf("%s: stats %+v, want %d requests won by the primary, no hedge, delay %v", c.name, st, n, noHedgeDelay)
				}
			} else if c.name == "hedgehttp" {
				t.Errorf("hedgehttp: RoundTripper is %T, want *hedgehttp.Transport", rt)
			}
		}
	})
}

// settle lets fake time pass at the end of a bubble, so that a Hedger's
// timer goroutine, which lingers for 50 ms after its last timer, exits
// before the bubble ends.
func settle() { time.Sleep(time.Second) }

// checkReaped checks that the cancelled primary has already returned, with
// context.Canceled: Do (without ReapInBackground) returns only after it.
func checkReaped(t *testing.T, exits <-chan error) {
	t.Helper()
	select {
	case err := <-exits:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("primary returned %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Do returned before the cancelled primary")
	}
}

// waitPrimary waits for the cancelled primary to report its exit. In a
// bubble, a primary that is never cancelled leaves every goroutine blocked,
// which fails the test.
func waitPrimary(t *testing.T, exits <-chan error) {
	t.Helper()
	if err := <-exits; !errors.Is(err, context.Canceled) {
		t.Fatalf("primary returned %v, want context.Canceled", err)
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

// reportingExit is slowPrimary with the primary reporting its exit on
// exits, for checks that it was reaped.
func reportingExit(exits chan<- error) func(context.Context, hedge.Attempt) (int, error) {
	return func(ctx context.Context, a hedge.Attempt) (int, error) {
		v, err := slowPrimary(ctx, a)
		if !a.Hedge {
			exits <- err
		}
		return v, err
	}
}
