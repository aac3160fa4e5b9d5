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

	// state holds the copy's cancellation and whether it is watched, in
	// one word, so that a copy nobody watches is cancelled and asked for
	// Err without a lock. std and stdCancel are set before stWatched is,
	// and never change after: a reader that sees stWatched may read them.
	state     atomic.Uint32
	std       context.Context
	stdCancel context.CancelFunc

	// mu serialises making std with cancelling a watched copy, so that
	// Err and Cause change together.
	mu sync.Mutex
}

// The bits of copyCtx.state.
const (
	stCancelled = 1 << iota // the copy was cancelled
	stParentErr             // ... after its parent ended: Err is the parent's
	stWatched               // std is made
)

// newCopyCtx returns the context of a copy under parent.
func newCopyCtx(parent context.Context) *copyCtx {
	return &copyCtx{Context: parent, parentCancels: parent.Done() != nil}
}

// watch makes std, cancelled already if the copy is. c.mu is held.
func (c *copyCtx) watch() {
	if c.state.Load()&stWatched != 0 {
		return
	}
	c.std, c.stdCancel = context.WithCancel(c.Context)
	// A cancel of an unwatched copy changes state by compare-and-swap
	// without the lock: either it lands first, and std is cancelled
	// here, or it fails and cancels again under the lock, after this.
	s := c.state.Load()
	for !c.state.CompareAndSwap(s, s|stWatched) {
		s = c.state.Load()
	}
	if s&stCancelled != 0 {
		c.stdCancel()
	}
}

// Done returns a channel closed when the copy's context is cancelled.
func (c *copyCtx) Done() <-chan struct{} {
	if c.state.Load()&stWatched == 0 {
		c.mu.Lock()
		c.watch()
		c.mu.Unlock()
	}
	return c.std.Done()
}

// Err returns nil until the copy's context is cancelled, or its parent's.
func (c *copyCtx) Err() error {
	s := c.state.Load()
	switch {
	case s&stWatched != 0:
		return c.std.Err()
	case s&stParentErr != 0:
		return c.Context.Err() // the parent's, which never changes once set
	case s&stCancelled != 0:
		return context.Canceled
	case c.parentCancels:
		return c.Context.Err()
	}
	return nil
}

// Value returns the value for key: the parent's, as seen through the
// WithCancel context once there is one.
func (c *copyCtx) Value(key any) any {
	if s := c.state.Load(); s&stWatched == 0 {
		if !c.parentCancels || s&stCancelled == 0 {
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
	s := c.state.Load()
	if s&stCancelled != 0 {
		return
	}
	bits := uint32(stCancelled)
	if c.parentCancels && c.Context.Err() != nil {
		bits |= stParentErr
	}
	if s&stWatched == 0 && c.state.CompareAndSwap(s, s|bits) {
		return // unwatched: nobody to tell
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s = c.state.Load()
	if s&stCancelled != 0 {
		return
	}
	// Watched now (watch holds c.mu while it publishes stWatched). Under
	// c.mu, so that Err and Cause change together; stdCancel calls
	// nothing of c: std was made from the parent, not from c.
	c.state.Store(s | bits)
	if s&stWatched != 0 {
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
