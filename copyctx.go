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
//
// What only a watched copy needs (the WithCancel context and the lock
// that orders its making with a cancel) sits behind a pointer that
// stays nil until then: the copyCtx of a fast call is 32 bytes, the
// size class half of the one it would share with them, and the
// allocation rate sets how often the collector runs, and so how much of
// a call runs with write barriers on (BENCHMARKS.md, "The decision's
// cost").
type copyCtx struct {
	context.Context // the parent: Deadline, and Value until watched

	// state holds the copy's cancellation, whether its parent can be
	// cancelled and whether it is watched, in one word, so that a copy
	// nobody watches is cancelled and asked for Err without a lock. It
	// is read and written atomically (load, cas, store) but when
	// newCopyCtx sets it, before anyone else can see the copyCtx: a plain
	// uint32, so that it can be set without an atomic exchange.
	state uint32
	// w is set before stWatched is, and never changes after: a reader
	// that sees stWatched may read it.
	w atomic.Pointer[copyWatch]
}

// copyWatch is what a watched copyCtx adds: the WithCancel context that
// stands for it.
type copyWatch struct {
	std       context.Context
	stdCancel context.CancelFunc
	// mu serialises publishing the watch with cancelling a watched copy,
	// so that Err and Cause change together.
	mu sync.Mutex
}

// The bits of copyCtx.state.
const (
	stCancelled     = 1 << iota // the copy was cancelled
	stParentErr                 // ... after its parent ended: Err is the parent's
	stWatched                   // w is set and published
	stParentCancels             // the parent's Done is not nil
)

// newCopyCtx returns the context of a copy under parent.
func newCopyCtx(parent context.Context) *copyCtx {
	var s uint32
	if parent.Done() != nil {
		s = stParentCancels
	}
	return &copyCtx{Context: parent, state: s}
}

// load, cas and store are the atomic accesses of c.state.
func (c *copyCtx) load() uint32             { return atomic.LoadUint32(&c.state) }
func (c *copyCtx) cas(old, new uint32) bool { return atomic.CompareAndSwapUint32(&c.state, old, new) }
func (c *copyCtx) store(s uint32)           { atomic.StoreUint32(&c.state, s) }

// watch makes the WithCancel context, cancelled already if the copy is,
// and returns it. Of two goroutines that watch at once, one makes it;
// the other's context is cancelled unused.
func (c *copyCtx) watch() *copyWatch {
	if w := c.w.Load(); w != nil {
		// Made, and published or about to be: its maker holds w.mu until
		// stWatched is set, and a cancel meanwhile is seen by it.
		return w
	}
	w := new(copyWatch)
	w.std, w.stdCancel = context.WithCancel(c.Context)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !c.w.CompareAndSwap(nil, w) {
		w.stdCancel() // another watch won: this one goes unused
		return c.w.Load()
	}
	// A cancel of an unwatched copy changes state by compare-and-swap
	// without the lock: either it lands first, and std is cancelled
	// here, or it fails and cancels again under w.mu, after this.
	s := c.load()
	for !c.cas(s, s|stWatched) {
		s = c.load()
	}
	if s&stCancelled != 0 {
		w.stdCancel()
	}
	return w
}

// Done returns a channel closed when the copy's context is cancelled.
func (c *copyCtx) Done() <-chan struct{} {
	if c.load()&stWatched != 0 {
		return c.w.Load().std.Done()
	}
	return c.watch().std.Done()
}

// Err returns nil until the copy's context is cancelled, or its parent's.
func (c *copyCtx) Err() error {
	s := c.load()
	switch {
	case s&stWatched != 0:
		return c.w.Load().std.Err()
	case s&stParentErr != 0:
		return c.Context.Err() // the parent's, which never changes once set
	case s&stCancelled != 0:
		return context.Canceled
	case s&stParentCancels != 0:
		return c.Context.Err()
	}
	return nil
}

// Value returns the value for key: the parent's, as seen through the
// WithCancel context once there is one.
func (c *copyCtx) Value(key any) any {
	s := c.load()
	if s&stWatched != 0 {
		return c.w.Load().std.Value(key)
	}
	if s&stParentCancels == 0 || s&stCancelled == 0 {
		return c.Context.Value(key)
	}
	return c.watch().std.Value(key)
}

// cancel cancels the copy's context: Err becomes context.Canceled (or the
// parent's error, if the parent ended first) and, if someone watches it,
// Done is closed. Only the first call does anything.
func (c *copyCtx) cancel() {
	s := c.load()
	if s&stCancelled != 0 {
		return
	}
	bits := uint32(stCancelled)
	if s&stParentCancels != 0 && c.Context.Err() != nil {
		bits |= stParentErr
	}
	for s&stWatched == 0 {
		if c.cas(s, s|bits) {
			return // unwatched: nobody to tell
		}
		if s = c.load(); s&stCancelled != 0 {
			return
		}
	}
	// Watched (stWatched is set only once w is). Under w.mu, so that
	// Err and Cause change together; stdCancel calls nothing of c: std
	// was made from the parent, not from c.
	w := c.w.Load()
	w.mu.Lock()
	defer w.mu.Unlock()
	s = c.load()
	if s&stCancelled != 0 {
		return
	}
	c.store(s | bits)
	w.stdCancel()
}

// String names the context as package context would name the result of
// WithCancel.
func (c *copyCtx) String() string {
	if s, ok := c.Context.(interface{ String() string }); ok {
		return s.String() + ".WithCancel"
	}
	return "context.WithCancel"
}
