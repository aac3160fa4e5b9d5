package hedge

import (
	"context"
	"sync/atomic"
)

// copyCtx is the context of one copy: context.WithCancel(parent), made
// only if someone watches it. Until the copy's function first asks for
// Done, it is the parent plus an error of its own, so that a copy that
// never looks at its context (the primary of a fast call, cancelled
// unseen when the call ends) costs one small allocation, instead of
// WithCancel's two, its registration with a cancellable parent and its
// cancellation. On the fast path those were about a third of a call.
//
// The first Done makes the real context.WithCancel(parent) (cancelled at
// once if the copy is), and from then on Done, Err and Value are that
// context's. So contexts made from a copyCtx, directly or through
// WithValue, find a cancelCtx of package context above them and register
// with it as under WithCancel, with no goroutine to watch it. Before
// that, Err is the copy's own error, or else the parent's, and Value is
// the parent's; except that once the copy is cancelled under a parent
// that can be cancelled, Value makes the real context too, so that
// context.Cause (which finds package context's cancelCtx by Value)
// reports the copy's cancellation rather than the parent's state.
//
// What only a watched copy needs (the WithCancel context) sits behind
// a pointer that stays nil until then, and the copy's state is that same
// pointer: the copyCtx of a fast call is 24 bytes, against 64 for the
// size class it would share with them, and the bytes a call allocates
// set how often the collector runs, and so how much of a call runs with
// write barriers on (BENCHMARKS.md, "The decision's cost").
type copyCtx struct {
	context.Context // the parent: Deadline, and Value until watched

	// w is the copy's state, in one word, so that a copy nobody watches
	// is cancelled and asked for Err without a lock: nil while it is
	// live and unwatched; cancelledMark or parentErrMark once it is
	// cancelled unwatched (parentErrMark: after its parent ended, so that
	// Err is the parent's); else its copyWatch, which never changes after.
	w atomic.Pointer[copyWatch]
}

// copyWatch is what a watched copyCtx adds: the WithCancel context that
// stands for it. It is made whole before it is published.
type copyWatch struct {
	std       context.Context
	stdCancel context.CancelFunc
}

// The states of an unwatched copyCtx that was cancelled (copyCtx.w).
var cancelledMark, parentErrMark copyWatch

// cancelled reports whether w is the state of a copy cancelled unwatched.
func cancelled(w *copyWatch) bool { return w == &cancelledMark || w == &parentErrMark }

// newCopyCtx returns the context of a copy under parent.
func newCopyCtx(parent context.Context) *copyCtx {
	return &copyCtx{Context: parent}
}

// watch makes the WithCancel context, cancelled already if the copy is,
// publishes it and returns it. Of two goroutines that watch at once, one
// publishes its context; the other's is cancelled unused.
func (c *copyCtx) watch() *copyWatch {
	for {
		cur := c.w.Load()
		if cur != nil && !cancelled(cur) {
			return cur
		}
		w := new(copyWatch)
		w.std, w.stdCancel = context.WithCancel(c.Context)
		if cur != nil {
			// Cancelled before anyone watched. If the parent had ended
			// first, std has its error and cause already, and this
			// changes nothing.
			w.stdCancel()
		}
		// A cancel meanwhile changes w from nil, and this fails: the
		// loop then makes a cancelled context.
		if c.w.CompareAndSwap(cur, w) {
			return w
		}
		w.stdCancel()
	}
}

// Done returns a channel closed when the copy's context is cancelled.
func (c *copyCtx) Done() <-chan struct{} {
	if w := c.w.Load(); w != nil && !cancelled(w) {
		return w.std.Done()
	}
	return c.watch().std.Done()
}

// Err returns nil until the copy's context is cancelled, or its parent's.
func (c *copyCtx) Err() error {
	switch w := c.w.Load(); w {
	case nil, &parentErrMark:
		// Live: the parent's, nil unless it ended. Cancelled after the
		// parent ended: the parent's, which never changes once set.
		return c.Context.Err()
	case &cancelledMark:
		return context.Canceled
	default:
		return w.std.Err()
	}
}

// Value returns the value for key: the parent's, as seen through the
// WithCancel context once there is one. Once the copy is cancelled
// under a parent that can be cancelled, it makes that context, so that
// context.Cause (which finds package context's cancelCtx by Value)
// reports the copy's cancellation rather than the parent's state.
func (c *copyCtx) Value(key any) any {
	w := c.w.Load()
	switch {
	case w == nil:
		return c.Context.Value(key)
	case cancelled(w):
		if c.Context.Done() == nil {
			return c.Context.Value(key)
		}
		w = c.watch()
	}
	return w.std.Value(key)
}

// cancel cancels the copy's context: Err becomes context.Canceled (or the
// parent's error, if the parent ended first) and, if someone watches it,
// Done is closed. Only the first call does anything.
func (c *copyCtx) cancel() {
	for {
		w := c.w.Load()
		switch {
		case w == nil:
			mark := &cancelledMark
			if c.Context.Err() != nil {
				mark = &parentErrMark
			}
			if c.w.CompareAndSwap(nil, mark) {
				return // unwatched: nobody to tell
			}
			// Watched meanwhile: cancel that.
		case cancelled(w):
			return
		default:
			// Package context changes Err and Cause together, and only
			// the first cancel counts.
			w.stdCancel()
			return
		}
	}
}

// String names the context as package context would name the result of
// WithCancel.
func (c *copyCtx) String() string {
	if s, ok := c.Context.(interface{ String() string }); ok {
		return s.String() + ".WithCancel"
	}
	return "context.WithCancel"
}
