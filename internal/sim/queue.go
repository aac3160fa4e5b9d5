package sim

import "math"

// qent is a queue entry. Cancelled copies are not removed from their queue
// (the queue's busy count drops at once); the entry is skipped when popped.
type qent struct {
	slot int32
	gen  uint32
	k    uint8
}

// fifo is a server's queue: its primaries (all its copies, unless
// Config.LowPriorityCopies) in arrival order, and the counts the routing
// and the evidence read.
type fifo struct {
	ring        // the copies waiting, oldest first
	busy int    // live copies waiting here or in service from here: the routing load
	left uint32 // copies completed here, modulo 2^32 (for decide.Behind)
	// ghostUntil: a copy was cancelled here because another copy of its
	// request won, and this queue has completed nothing since. The
	// library's picker counts it as one more copy in flight until the
	// replica shows progress or until then (see hedge.Picker), so that
	// cancelling a stuck copy does not make a stalled server look idle.
	ghostUntil float64
	// group is the fan-out (its arrival index) of the copy that made the
	// queue busy, or -1; pure says that every copy here since then is of
	// that fan-out: the leaves were sent together (decide.Policy.Placed).
	group int32
	pure  bool
	// low holds the copies that wait behind every primary, with
	// Config.LowPriorityCopies (a preempted copy goes back to its front).
	low ring
}

// ring is a growable ring buffer of queue entries, pushed at either end.
type ring struct {
	buf  []qent // length a power of two
	head int
	n    int
}

// grow doubles g's buffer, which is full.
func (g *ring) grow() {
	nb := make([]qent, max(8, 2*len(g.buf)))
	for i := range g.n {
		nb[i] = g.buf[(g.head+i)&(len(g.buf)-1)]
	}
	g.buf, g.head = nb, 0
}

func (g *ring) pushBack(x qent) {
	if g.n == len(g.buf) {
		g.grow()
	}
	g.buf[(g.head+g.n)&(len(g.buf)-1)] = x
	g.n++
}

func (g *ring) pushFront(x qent) {
	if g.n == len(g.buf) {
		g.grow()
	}
	g.head = (g.head - 1) & (len(g.buf) - 1)
	g.buf[g.head] = x
	g.n++
}

// clear empties g, keeping its buffer.
func (g *ring) clear() { g.head, g.n = 0, 0 }

func (g *ring) pop() qent {
	x := g.buf[g.head]
	g.head = (g.head + 1) & (len(g.buf) - 1)
	g.n--
	return x
}

// addCopy places the request's next copy on a queue and returns the queue,
// or -1 if no eligible server is left.
func (e *engine) addCopy(slot int32, r *request) int32 {
	q := e.place(r)
	if q < 0 {
		return -1
	}
	e.addCopyAt(slot, r, q)
	return q
}

// addCopyAt places the request's next copy on queue q.
func (e *engine) addCopyAt(slot int32, r *request, q int32) {
	size := r.size
	switch {
	case e.script != nil:
		if sz := e.script[r.idx].Sizes; int(r.n) < len(sz) {
			size = sz[r.n]
		}
	case r.n > 0 && e.sz.fresh:
		size = e.sz.draw(&e.rM)
	}
	k := r.n
	r.n++
	r.copies[k] = copyRec{size: size, q: q, srv: -1}
	r.state[k], r.held[k] = cWaiting, false
	r.live++
	f := &e.qs[q]
	if e.lowCopies && k > 0 {
		f.low.pushBack(qent{slot: slot, gen: r.gen, k: k})
	} else {
		f.pushBack(qent{slot: slot, gen: r.gen, k: k})
		if e.lowCopies {
			if sv := &e.srv[q]; sv.cur >= 0 && sv.k > 0 {
				e.preempt(q) // the caller's kick starts the primary
			}
		}
	}
	g := int32(-1)
	if r.parent >= 0 {
		g = r.idx
	}
	if f.busy == 0 {
		f.group, f.pure = g, g >= 0
	} else if f.group != g {
		f.pure = false
	}
	f.busy++
	if e.multi {
		v := e.viewOf(r.client, q)
		if v.busy == 0 {
			v.group, v.pure = g, g >= 0
		} else if v.group != g {
			v.pure = false
		}
		v.busy++
		v.sent++
	}
	if checkCopy != nil {
		checkCopy(e, slot, r, q)
	}
}

// checkCopy, when a test sets it, is called whenever a copy of a request
// in slot is placed on queue q, the primary included. It is nil outside
// the package's tests.
var checkCopy func(e *engine, slot int32, r *request, q int32)

// kick starts service on queue q's idle server(s), if any. Under processor
// sharing every copy placed on q starts at once.
func (e *engine) kick(q int32) {
	if e.ps {
		for {
			ent, ok := e.popValid(q)
			if !ok {
				return
			}
			e.psStart(q, ent)
		}
	}
	if !e.pool {
		if e.srv[q].cur < 0 {
			if ent, ok := e.popValid(q); ok {
				e.start(q, ent)
			}
		}
		return
	}
	for len(e.idle) > 0 {
		ent, ok := e.popValid(q)
		if !ok {
			return
		}
		// A uniformly random idle server takes the copy.
		last := len(e.idle) - 1
		i := 0
		if last > 0 {
			i = e.rM.IntN(last + 1)
		}
		s := e.idle[i]
		e.idle[i] = e.idle[last]
		e.idle = e.idle[:last]
		e.start(s, ent)
	}
}

func (e *engine) popValid(q int32) (qent, bool) {
	f := &e.qs[q]
	for f.n > 0 {
		ent := f.pop()
		r := &e.slots[ent.slot]
		if r.gen == ent.gen && r.state[ent.k] == cWaiting {
			return ent, true
		}
	}
	for f.low.n > 0 {
		ent := f.low.pop()
		r := &e.slots[ent.slot]
		if r.gen == ent.gen && r.state[ent.k] == cWaiting {
			return ent, true
		}
	}
	return qent{}, false
}

// preempt stops the copy in service on server s, a hedge, for a primary
// that arrived (Config.LowPriorityCopies): the work it got is lost, and
// it waits again, first among the copies, to start over. The server is
// left idle for the caller's kick.
func (e *engine) preempt(s int32) {
	sv := &e.srv[s]
	r := &e.slots[sv.cur]
	c := &r.copies[sv.k]
	r.work += e.served(sv, c)
	r.state[sv.k] = cWaiting
	c.srv = -1
	if r.measured {
		e.preempted++
	}
	e.qs[sv.q].low.pushFront(qent{slot: sv.cur, gen: r.gen, k: sv.k})
	sv.cur = -1
	e.nRunning--
	e.dep.set(s, math.Inf(1))
}
