package hedge

import (
	"context"
	"errors"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

type ctxKey struct{}

// TestCopyCtx checks that a copyCtx behaves as context.WithCancel of a
// parent that is never cancelled: values and deadline of the parent, Err
// and Cause nil then context.Canceled, Done closed by cancel whether it
// was asked for before or after, cancel idempotent.
func TestCopyCtx(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	for _, doneFirst := range []bool{false, true} {
		c := newCopyCtx(parent)
		if c.Value(ctxKey{}) != "v" {
			t.Fatalf("Value = %v; want the parent's", c.Value(ctxKey{}))
		}
		if _, ok := c.Deadline(); ok {
			t.Fatal("Deadline set; the parent has none")
		}
		if c.Err() != nil || context.Cause(c) != nil {
			t.Fatalf("before cancel: Err %v, Cause %v; want nil", c.Err(), context.Cause(c))
		}
		var done <-chan struct{}
		if doneFirst {
			done = c.Done()
			select {
			case <-done:
				t.Fatal("Done closed before cancel")
			default:
			}
		}
		c.cancel()
		c.cancel()
		if !doneFirst {
			done = c.Done()
		}
		<-done
		if c.Done() != done {
			t.Fatal("Done returned another channel")
		}
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), context.Canceled) {
			t.Fatalf("after cancel: Err %v, Cause %v; want context.Canceled", c.Err(), context.Cause(c))
		}
	}
}

// TestCopyCtxCancellableParent checks a copyCtx under a parent that can
// be cancelled, watched or not: its Err and Cause follow the parent's
// until the copy is cancelled, and are context.Canceled after, whether
// the parent is cancelled later or not at all.
func TestCopyCtxCancellableParent(t *testing.T) {
	parentCause := errors.New("parent's cause")
	for _, watch := range []bool{false, true} {
		// The parent ends first.
		parent, cancelParent := context.WithCancelCause(context.Background())
		c := newCopyCtx(parent)
		if watch {
			c.Done()
		}
		cancelParent(parentCause)
		if !errors.Is(c.Err(), context.Canceled) || context.Cause(c) != parentCause {
			t.Errorf("watch %v, parent cancelled: Err %v, Cause %v; want context.Canceled, the parent's cause", watch, c.Err(), context.Cause(c))
		}
		c.cancel()
		if !errors.Is(c.Err(), context.Canceled) || context.Cause(c) != parentCause {
			t.Errorf("watch %v, parent then copy cancelled: Err %v, Cause %v; want context.Canceled, the parent's cause", watch, c.Err(), context.Cause(c))
		}
		<-c.Done()

		// The copy ends first.
		parent, cancelParent = context.WithCancelCause(context.Background())
		c = newCopyCtx(parent)
		if watch {
			c.Done()
		}
		if c.Err() != nil || context.Cause(c) != nil {
			t.Errorf("watch %v, live: Err %v, Cause %v; want nil", watch, c.Err(), context.Cause(c))
		}
		c.cancel()
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), context.Canceled) {
			t.Errorf("watch %v, copy cancelled: Err %v, Cause %v; want context.Canceled", watch, c.Err(), context.Cause(c))
		}
		<-c.Done()
		cancelParent(parentCause)
		if !errors.Is(context.Cause(c), context.Canceled) {
			t.Errorf("watch %v, copy then parent cancelled: Cause %v; want context.Canceled", watch, context.Cause(c))
		}
	}
}

// TestCopyCtxChildren checks that contexts made from a copyCtx follow its
// cancellation without a goroutine to watch it, as they would under
// context.WithCancel: WithCancel, WithTimeout, AfterFunc, and WithCancel
// under a WithValue; and that a child made after the cancel is born
// cancelled.
func TestCopyCtxChildren(t *testing.T) {
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	created := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	c := newCopyCtx(parent)
	before := created()
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	timed, cancelTimed := context.WithTimeout(c, time.Hour)
	defer cancelTimed()
	grandchild, cancelGrandchild := context.WithCancel(context.WithValue(c, ctxKey{}, "w"))
	defer cancelGrandchild()
	_, cancelEarly := context.WithCancel(c)
	cancelEarly()
	ran := make(chan struct{})
	stop := context.AfterFunc(c, func() { close(ran) })
	if n := created() - before; n != 0 {
		t.Errorf("making children started %d goroutines; want none", n)
	}
	c.cancel()
	for _, ctx := range []context.Context{child, timed, grandchild} {
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(context.Cause(ctx), context.Canceled) {
			t.Errorf("%v: Err %v, Cause %v; want context.Canceled", ctx, ctx.Err(), context.Cause(ctx))
		}
	}
	<-ran
	if stop() {
		t.Error("stop after the function ran reported true")
	}
	if !errors.Is(context.Cause(c), context.Canceled) {
		t.Errorf("Cause of the watched copyCtx: %v; want context.Canceled", context.Cause(c))
	}
	late, cancelLate := context.WithCancel(c)
	defer cancelLate()
	<-late.Done()

	// A function stopped in time never runs.
	c2 := newCopyCtx(context.Background())
	var calls atomic.Int32
	if stop := context.AfterFunc(c2, func() { calls.Add(1) }); !stop() {
		t.Error("stop before cancel reported false")
	}
	c2.cancel()
	if calls.Load() != 0 {
		t.Error("a stopped function ran")
	}
}

// TestCopyCtxString names the context as package context names
// WithCancel's.
func TestCopyCtxString(t *testing.T) {
	c := newCopyCtx(context.Background())
	if got, want := c.String(), "context.Background.WithCancel"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

// TestCopyCtxSize holds the copyCtx of a call nobody watches to 24 bytes:
// it is the fast path's one allocation, and the bytes a call allocates
// set how often the collector runs (BENCHMARKS.md, "The decision's
// cost").
func TestCopyCtxSize(t *testing.T) {
	if n := unsafe.Sizeof(copyCtx{}); n > 24 {
		t.Errorf("copyCtx is %d bytes; want at most 24: move what only a watched copy needs behind copyWatch", n)
	}
}

// TestCopyCtxWatchRace asks for Done from several goroutines at once
// while the copy is cancelled: every one gets the same channel, closed.
func TestCopyCtxWatchRace(t *testing.T) {
	for range 200 {
		c := newCopyCtx(context.Background())
		const n = 4
		chans := make(chan (<-chan struct{}), n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				<-start
				chans <- c.Done()
			})
		}
		wg.Go(func() {
			<-start
			c.cancel()
		})
		close(start)
		wg.Wait()
		close(chans)
		first := <-chans
		for ch := range chans {
			if ch != first {
				t.Fatal("Done returned different channels to goroutines that asked at once")
			}
		}
		<-first
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err after cancel: %v", c.Err())
		}
	}
}
