package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Gate is the stall switch of an in-process replica: while a stall is on,
// every handler that calls Wait blocks until it ends, as every goroutine of
// a process does during a stop-the-world pause. The zero Gate is open.
type Gate struct {
	cur    atomic.Pointer[stall] // non-nil while stalled
	closed atomic.Bool
	slow   atomic.Uint64 // math.Float64bits of the slowdown factor; 0 means 1
}

// stall is one stall of a Gate: done is closed, once, when it ends.
type stall struct {
	done chan struct{}
	once sync.Once
}

func (s *stall) end() { s.once.Do(func() { close(s.done) }) }

// ErrGateClosed is the error of a Stall on a Gate that was closed.
var ErrGateClosed = errors.New("bench: the replica is shut down")

// Wait returns at once if no stall is on, else when the stall ends or ctx
// ends, whichever is first.
func (g *Gate) Wait(ctx context.Context) {
	s := g.cur.Load()
	if s == nil {
		return
	}
	select {
	case <-s.done:
	case <-ctx.Done():
	}
}

// Stalled reports whether a stall is on.
func (g *Gate) Stalled() bool { return g.cur.Load() != nil }

// Stall blocks every Wait for d, starting now, and returns once the stall
// is over, or as soon as ctx ends (releasing the waiters: a stall never
// outlives its run). Stalls of one Gate must not overlap; the runner's
// schedules never do.
func (g *Gate) Stall(ctx context.Context, d time.Duration) error {
	if g.closed.Load() {
		return ErrGateClosed
	}
	s := &stall{done: make(chan struct{})}
	g.cur.Store(s)
	t := time.NewTimer(d)
	defer t.Stop()
	var err error
	select {
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	case <-s.done: // Close
		err = ErrGateClosed
	}
	g.cur.CompareAndSwap(s, nil)
	s.end()
	return err
}

// Close ends any stall at once and refuses later ones, so that a replica
// being shut down has no handler left waiting.
func (g *Gate) Close() {
	g.closed.Store(true)
	if s := g.cur.Swap(nil); s != nil {
		s.end()
	}
}

// Scale returns how long work of size d takes on the replica now: d, or d
// times the factor of a slowdown in force (Slow).
func (g *Gate) Scale(d time.Duration) time.Duration {
	if f := g.slow.Load(); f != 0 {
		return time.Duration(float64(d) * math.Float64frombits(f))
	}
	return d
}

// Slow makes work started on the replica during the next d take factor
// times as long (Scale), as a replica whose CPU is shared with a noisy
// neighbour, or whose every request got costlier, does; it returns when
// the slowdown is over, or as soon as ctx ends. Work already running
// keeps its length. Slowdowns of one Gate must not overlap.
func (g *Gate) Slow(ctx context.Context, factor float64, d time.Duration) error {
	if !(factor >= 1) || math.IsInf(factor, 0) {
		return fmt.Errorf("bench: slowdown factor %v: use a factor >= 1", factor)
	}
	if g.closed.Load() {
		return ErrGateClosed
	}
	g.slow.Store(math.Float64bits(factor))
	defer g.slow.Store(0)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
