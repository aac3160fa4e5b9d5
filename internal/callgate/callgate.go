// Package callgate lets an adapter's Client refuse calls after Close and
// wait, in Close, for the calls it let in: the copies and writes the
// Client started.
package callgate

import "sync"

// Gate counts the calls in flight and refuses new ones once closed. The
// zero Gate is open. A Gate must not be copied after first use.
type Gate struct {
	// mu orders the start of calls (wg.Add) before Wait's wg.Wait.
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup // calls in flight
}

// Enter counts a call about to start, or reports false once the Gate is
// closed. A call that entered must Leave.
func (g *Gate) Enter() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Leave ends a call counted by Enter.
func (g *Gate) Leave() { g.wg.Done() }

// Closed reports whether Close was called.
func (g *Gate) Closed() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.closed
}

// Close closes the Gate, so that Enter refuses every later call, and
// reports whether it was open until then. It does not wait: Wait does.
func (g *Gate) Close() (first bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	first = !g.closed
	g.closed = true
	return first
}

// Wait returns once every call that entered has left. After Close, no
// call enters any more.
func (g *Gate) Wait() { g.wg.Wait() }
