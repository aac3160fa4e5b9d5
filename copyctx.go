package hedge

import (
	"context"
	"sync"
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
type copyCtx struct {
	context.Context      // the parent: Deadline, and Value until watched
	parentCancels   bool // the parent's Done is not nil

	// watched is set once std and stdCancel are, which then never
	// change: a reader that sees it set may read them without the lock.
	watched   atomic.Bool
	cancelled atomic.Bool // err is set
	std       context.Context
	stdCancel context.CancelFunc

	mu  sync.Mutex
	err error
}

// newCopyCtx returns the context of a copy under parent.
func newCopyCtx(parent context.Context) *copyCtx {
	return &copyCtx{Context: parent, parentCancels: parent.Done() != nil}
}

// watch makes std, cancelled already if the copy is. c.mu is held.
func (c *copyCtx) watch() {
	if c.watched.Load() {
		return
	}
	c.std, c.stdCancel = context.WithCancel(c.Context)
	if c.err != nil {
		c.stdCancel()
	}
	c.watched.Store(true)
}

// Done returns a channel closed when the copy's context is cancelled.
func (c *copyCtx) Done() <-chan struct{} {
	if !c.watched.Load() {
		c.mu.Lock()
		c.watch()
		c.mu.Unlock()
	}
	return c.std.Done()
}

// Err returns nil until the copy's context is cancelled, or its parent's.
func (c *copyCtx) Err() error {
	if c.watched.Load() {
		return c.std.Err()
	}
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil && c.parentCancels {
		return c.Context.Err()
	}
	return err
}

// Value returns the value for key: the parent's, as seen through the
// WithCancel context once there is one.
func (c *copyCtx) Value(key any) any {
	if !c.watched.Load() {
		if !c.parentCancels || !c.cancelled.Load() {
			return c.Context.Value(key)
		}
		c.mu.Lock()
		c.watch()
		c.mu.Unlock()
	}
	return c.std.Value(key)
}

// cancel cancels the copy's context: Err becomes context.Canceled (or the
// parent's error, if the parent ended first) and, if someone watches it,
// Done is closed. Only the first call does anything.
func (c *copyCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = context.Canceled
	if c.parentCancels {
		if err := c.Context.Err(); err != nil {
			c.err = err
		}
	}
	c.cancelled.Store(true)
	if c.watched.Load() {
		// Under c.mu, so that Err and Cause change together. It calls
		// nothing of c: std was made from the parent, not from c.
		c.stdCancel()
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
