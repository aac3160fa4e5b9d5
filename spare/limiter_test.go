package spare

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder records the order in which requests ran.
type recorder struct {
	mu    sync.Mutex
	order []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.order = append(r.order, s)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

func newLimiter(t *testing.T, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewRefusesNoWorkers(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(Config{}): %v, want ErrInvalidConfig", err)
	}
}

func TestPrimariesGoBeforeCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Config{Workers: 1})
		var rec recorder
		hold := make(chan struct{})
		ctx := context.Background()
		go l.Run(ctx, Primary, func(context.Context) error { <-hold; rec.add("p1"); return nil })
		synctest.Wait()
		go l.Run(ctx, Copy, func(context.Context) error { rec.add("c1"); return nil })
		synctest.Wait()
		go l.Run(ctx, Primary, func(context.Context) error { rec.add("p2"); return nil })
		synctest.Wait()
		if s := l.Stats(); s.Running != 1 || s.QueuedPrimaries != 1 || s.QueuedCopies != 1 {
			t.Fatalf("stats %+v: want 1 running, 1 primary and 1 copy queued", s)
		}
		close(hold)
		synctest.Wait()
		if got := rec.get(); !slices.Equal(got, []string{"p1", "p2", "c1"}) {
			t.Fatalf("ran %v, want the queued primary before the copy that came first", got)
		}
	})
}

func TestPrimaryPreemptsACopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Config{Workers: 1})
		var rec recorder
		var cause error
		runs := 0
		done := make(chan error, 1)
		go func() {
			done <- l.Run(context.Background(), Copy, func(ctx context.Context) error {
				runs++
				if runs == 1 {
					<-ctx.Done() // a long copy, until preempted
					cause = context.Cause(ctx)
					rec.add("c preempted")
					return ctx.Err()
				}
				rec.add("c again")
				return nil
			})
		}()
		synctest.Wait()
		go l.Run(context.Background(), Primary, func(context.Context) error { rec.add("p"); return nil })
		if err := <-done; err != nil {
			t.Fatalf("the copy's Run: %v, want its last run's nil", err)
		}
		if !errors.Is(cause, ErrPreempted) {
			t.Errorf("the copy's context ended with cause %v, want ErrPreempted", cause)
		}
		if got := rec.get(); !slices.Equal(got, []string{"c preempted", "p", "c again"}) {
			t.Fatalf("ran %v, want the copy preempted, the primary, then the copy again", got)
		}
		s := l.Stats()
		if s.Primaries != 1 || s.Copies != 1 || s.Preempted != 1 || s.Reruns != 1 || s.Running != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestCopyOnceAndCommittedCopiesRunToTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   Kind
		commit bool
	}{{"copy-once", CopyOnce, false}, {"committed copy", Copy, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, Config{Workers: 1})
				var rec recorder
				hold := make(chan struct{})
				go l.Run(context.Background(), tc.kind, func(ctx context.Context) error {
					if tc.commit && !Commit(ctx) {
						t.Error("Commit refused before any primary came")
					}
					<-hold
					if ctx.Err() != nil {
						t.Errorf("the copy was cancelled: %v", context.Cause(ctx))
					}
					rec.add("c")
					return nil
				})
				synctest.Wait()
				go l.Run(context.Background(), Primary, func(context.Context) error { rec.add("p"); return nil })
				synctest.Wait()
				if got := rec.get(); len(got) != 0 {
					t.Fatalf("ran %v while the copy held the only worker", got)
				}
				close(hold)
				synctest.Wait()
				if got := rec.get(); !slices.Equal(got, []string{"c", "p"}) {
					t.Fatalf("ran %v, want the copy to finish, then the primary", got)
				}
				if s := l.Stats(); s.Preempted != 0 {
					t.Fatalf("%d preempted", s.Preempted)
				}
			})
		})
	}
}

func TestCommitAfterPreemption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Config{Workers: 1})
		first := true
		var committed bool
		go l.Run(context.Background(), Copy, func(ctx context.Context) error {
			if first {
				first = false
				<-ctx.Done()
				committed = Commit(ctx)
			}
			return nil
		})
		synctest.Wait()
		l.Run(context.Background(), Primary, func(context.Context) error { return nil })
		synctest.Wait()
		if committed {
			t.Fatal("Commit accepted a copy that a primary had preempted")
		}
		if !Commit(context.Background()) {
			t.Fatal("Commit refused a context that Run did not make")
		}
	})
}

func TestQueuesAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Config{Workers: 1, MaxQueue: 1})
		hold := make(chan struct{})
		ctx := context.Background()
		block := func(context.Context) error { <-hold; return nil }
		go l.Run(ctx, Primary, block)
		synctest.Wait()
		go l.Run(ctx, Primary, block)
		go l.Run(ctx, Copy, block)
		synctest.Wait()
		if err := l.Run(ctx, Primary, block); !errors.Is(err, ErrQueueFull) {
			t.Errorf("a primary beyond the queue: %v, want ErrQueueFull", err)
		}
		if err := l.Run(ctx, Copy, block); !errors.Is(err, ErrQueueFull) {
			t.Errorf("a copy beyond its queue: %v, want ErrQueueFull", err)
		}
		if err := l.Run(ctx, CopyOnce, block); !errors.Is(err, ErrNoSpare) {
			t.Errorf("a copy-once with no worker free: %v, want ErrNoSpare", err)
		}
		close(hold)
		synctest.Wait()
		if s := l.Stats(); s.Refused != 3 || s.Primaries != 2 || s.Copies != 1 || s.Running != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestWaitingRequestLeavesWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, Config{Workers: 1})
		hold := make(chan struct{})
		go l.Run(context.Background(), Primary, func(context.Context) error { <-hold; return nil })
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		ran := false
		go func() { errc <- l.Run(ctx, Copy, func(context.Context) error { ran = true; return nil }) }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
		close(hold)
		synctest.Wait()
		if s := l.Stats(); ran || s.Abandoned != 1 || s.QueuedCopies != 0 || s.Running != 0 {
			t.Fatalf("ran %v, stats %+v", ran, s)
		}
	})
}
