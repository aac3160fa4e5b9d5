package sim

import (
	"math"
)

// server is one service slot. Its current copy has rem work left as of
// time last, and progresses at speed.
type server struct {
	rem, last, speed float64
	cur              int32 // slot of the copy in service, or -1
	q                int32 // the queue it serves
	k                uint8
	stalled          bool
}

func (e *engine) start(s int32, ent qent) {
	if e.lowCopies && ent.k > 0 && checkLowPriority != nil {
		checkLowPriority(e, s)
	}
	r := &e.slots[ent.slot]
	c := &r.copies[ent.k]
	r.state[ent.k] = cRunning
	c.srv = s
	r.ran++
	sv := &e.srv[s]
	sv.cur, sv.k = ent.slot, ent.k
	sv.rem, sv.last = c.size, e.now
	d := c.size
	if sv.speed != 1 {
		d /= sv.speed // x/1 is x: the division is skipped, not the rounding changed
	}
	e.dep.set(s, e.now+d)
	e.nRunning++
	if e.tied && e.cancel && r.n > 1 {
		for j := range r.n {
			if j == ent.k || r.state[j] != cWaiting {
				continue
			}
			if e.c.CancelDelay == 0 {
				e.cancelWaiting(r, j)
			} else {
				e.schedule(event{t: e.now + e.c.CancelDelay, a: ent.slot, gen: r.gen, tag: evTag{kind: evTiedCancel, k: j}})
			}
		}
	}
}

// checkLowPriority, when a test sets it, is called whenever a copy beyond
// the primary starts service with Config.LowPriorityCopies, to check that
// no primary waits on its server's queue. It is nil outside the package's
// tests.
var checkLowPriority func(e *engine, s int32)

// cancelRunning stops a copy in service, counting the work it got, and
// lets its server take the next copy.
func (e *engine) cancelRunning(slot int32, r *request, k uint8) {
	c := &r.copies[k]
	if e.ps {
		e.psCancel(slot, r, k)
		return
	}
	sv := &e.srv[c.srv]
	r.work += e.served(sv, c)
	r.state[k] = cCancelled
	r.live--
	e.leave(r, c.q)
	e.ended(r, k)
	e.release(c.srv)
}

// served returns the work copy c, in service on sv, has got so far.
func (e *engine) served(sv *server, c *copyRec) float64 {
	rem := sv.rem - (e.now-sv.last)*sv.speed
	if rem < 0 {
		rem = 0
	}
	return c.size - rem
}

// release makes server s idle and lets it take the next copy.
func (e *engine) release(s int32) {
	sv := &e.srv[s]
	sv.cur = -1
	e.nRunning--
	if e.pool {
		e.idle = append(e.idle, s)
	}
	e.kick(sv.q)
	if sv.cur < 0 {
		e.dep.set(s, math.Inf(1))
	}
}

// answered counts a copy of r that queue q completed, for decide.Behind,
// and ends a ghost there: the queue shows progress (to r's client, with
// several).
func (e *engine) answered(r *request, q int32) {
	if e.multi {
		v := e.viewOf(r.client, q)
		v.left++
		v.ghostUntil = 0
		if e.reports {
			// The answer carries the queue's report: its copies after
			// this one left, and its answers.
			f := &e.qs[q]
			f.left++
			v.repAt, v.repBusy, v.repLeft, v.sent = e.now, int32(f.busy), f.left, 0
		}
		return
	}
	f := &e.qs[q]
	f.left++
	if e.ghosts {
		f.ghostUntil = 0
	}
}

// onComplete finishes the copy in service on server s, whose completion
// time has come.
func (e *engine) onComplete(s int32) {
	if e.ps {
		e.psComplete(s)
		return
	}
	sv := &e.srv[s]
	slot := sv.cur
	r := &e.slots[slot]
	c := &r.copies[sv.k]
	r.work += c.size
	r.state[sv.k] = cDone
	r.live--
	e.leave(r, c.q)
	if e.pol != nil {
		e.answered(r, c.q)
	}
	e.ended(r, sv.k)
	switch {
	case !r.done:
		e.finish(slot, r, sv.k)
	case sv.k == 0 && e.live != nil && e.feedPrimary:
		// A primary that lost and ran on: the library records its whole
		// latency when it returns.
		e.estOf(r.client).Observe(toDuration(e.now), toDuration(e.now-r.arrival))
	}
	e.release(s)
	e.maybeFree(slot)
}
