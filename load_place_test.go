package hedge_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// replicaWorld runs sequential calls through a Hedger on synctest's
// clock, against replicas that behave as behave says, while every
// replica's load report arrives each millisecond (the answers to other
// requests, as a transport passes them on), so that every report is
// fresh when a hedge comes due. It counts the hedges by replica and the
// copies refused as busy.
type replicaWorld struct {
	h       *hedge.Hedger
	mu      sync.Mutex
	hedges  map[int]int // replica: hedges sent there
	busy    int         // copies refused as busy
	slow    int         // primaries on a slow replica
	running []atomic.Int64
}

// behave says how replica r answers: after how long (slow replicas are
// cancelled before), and the load it reports, given what runs there.
type behave func(r int, running int) (after time.Duration, slow bool, ld hedge.Load)

func runReplicaWorld(t *testing.T, replicas, calls int, delay time.Duration, b behave) *replicaWorld {
	t.Helper()
	w := &replicaWorld{hedges: map[int]int{}, running: make([]atomic.Int64, replicas)}
	h, err := hedge.New(hedge.Config{
		Replicas: replicas, Delay: hedge.Fixed(delay), NoBudget: true, PayoffWinRate: -1,
		OnEvent: func(e hedge.Event) {
			w.mu.Lock()
			defer w.mu.Unlock()
			switch {
			case e.Kind == hedge.HedgeSent:
				w.hedges[e.Replica]++
			case e.Kind == hedge.HedgeRefused && e.Refusal == hedge.RefusedBusy:
				w.busy++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	report := func(r int) {
		_, _, ld := b(r, int(w.running[r].Load()))
		h.ReportLoad(r, ld)
	}
	stop := make(chan struct{})
	reporter := make(chan struct{})
	go func() {
		defer close(reporter)
		for {
			for r := range replicas {
				report(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for range calls {
		_, err := hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
			after, slow, _ := b(a.Replica, 0)
			if a.Index == 0 && slow {
				w.mu.Lock()
				w.slow++
				w.mu.Unlock()
			}
			w.running[a.Replica].Add(1)
			defer w.running[a.Replica].Add(-1)
			select {
			case <-time.After(after):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			report(a.Replica)
			return a.Index, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-reporter
	return w
}

// TestBusyReportMovesTheCopy: a replica that answers at once while it
// reports a queue of a thousand (a liar, or a loadreport.Handler given
// too few workers) looks idle to the client, and the picker prefers it
// for the copies of the slow replicas' primaries; the other slow replica
// reports, truly, other clients' work; one replica is idle and says so.
// Every slow primary's copy goes to the idle replica, none is refused as
// busy: the replica that says it is busy keeps copies off itself, not
// off the others.
func TestBusyReportMovesTheCopy(t *testing.T) {
	const delay = 10 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		// Replicas 0 and 1 are slow, 2 lies, 3 is idle and honest.
		w := runReplicaWorld(t, 4, 60, delay, func(r, running int) (time.Duration, bool, hedge.Load) {
			switch r {
			case 0, 1:
				return delay + delay/2, true, hedge.Load{Running: 1, Queued: 3, Workers: 1}
			case 2:
				return 0, false, hedge.Load{Queued: 1000, Workers: 1}
			}
			return time.Millisecond, false, hedge.Load{Running: running, Workers: 1}
		})
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.slow == 0 {
			t.Fatal("no primary went to a slow replica: the test tests nothing")
		}
		if w.hedges[3] != w.slow || len(w.hedges) != 1 || w.busy != 0 {
			t.Fatalf("%d primaries on slow replicas: hedges by replica %v, %d refused as busy; want each hedged on the idle replica 3, none refused", w.slow, w.hedges, w.busy)
		}
	})
}

// TestHugeReportReadsBusy: a replica whose report's counts are too large
// to add (Running and Queued near the top of int) is as busy as can be,
// not idle: the copies of the other replica's slow primaries are refused
// as busy, and none goes there.
func TestHugeReportReadsBusy(t *testing.T) {
	const delay = 10 * time.Millisecond
	for _, ld := range []hedge.Load{
		{Running: 1, Queued: math.MaxInt, Workers: 4},
		{Running: math.MaxInt, Queued: math.MaxInt, Workers: 1},
		{Running: math.MaxInt / 2, Queued: math.MaxInt/2 + 2, Workers: 1},
	} {
		t.Run(fmt.Sprintf("%+v", ld), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				// Replica 0 is slow; replica 1 reports ld, and answers at
				// once.
				w := runReplicaWorld(t, 2, 30, delay, func(r, running int) (time.Duration, bool, hedge.Load) {
					if r == 0 {
						return 2 * delay, true, hedge.Load{Running: running, Workers: 1}
					}
					return 0, false, ld
				})
				w.mu.Lock()
				defer w.mu.Unlock()
				if w.slow == 0 {
					t.Fatal("no primary went to the slow replica: the test tests nothing")
				}
				if len(w.hedges) != 0 || w.busy < w.slow {
					t.Fatalf("%d primaries on the slow replica; hedges by replica %v, %d refused as busy; want none sent, each refused", w.slow, w.hedges, w.busy)
				}
				t.Logf("%d primaries on the slow replica; hedges by replica %v, %d refused as busy", w.slow, w.hedges, w.busy)
			})
		})
	}
}
