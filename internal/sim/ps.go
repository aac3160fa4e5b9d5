package sim

import (
	"math"
)

// psEnt is a copy in service on a processor-sharing server: it finishes
// when the server's virtual time reaches fv.
type psEnt struct {
	fv   float64
	slot int32
	gen  uint32
	k    uint8
}

// psServer is the processor-sharing state of a server. Each of its n
// copies in service has received v units of work per copy since the
// server's virtual time began; v grows at speed/n. Copies are in a binary
// min-heap on fv; a cancelled copy's entry stays until it reaches the top.
type psServer struct {
	v, last float64
	n       int
	h       []psEnt
}

// psAdvance brings processor-sharing server s's virtual time to now.
func (e *engine) psAdvance(s int32) {
	p := &e.pss[s]
	if p.n > 0 {
		p.v += (e.now - p.last) * e.srv[s].speed / float64(p.n)
	}
	p.last = e.now
}

// psValid reports whether a heap entry of server s is a copy still in
// service there.
func (e *engine) psValid(s int32, x psEnt) bool {
	r := &e.slots[x.slot]
	return r.gen == x.gen && r.state[x.k] == cRunning && r.copies[x.k].srv == s
}

// psSchedule drops cancelled copies from the top of server s's heap and
// schedules its next completion (the virtual time is current).
func (e *engine) psSchedule(s int32) {
	p := &e.pss[s]
	for len(p.h) > 0 && !e.psValid(s, p.h[0]) {
		psPop(&p.h)
	}
	if p.n == 0 || len(p.h) == 0 {
		e.dep.set(s, math.Inf(1))
		return
	}
	left := (p.h[0].fv - p.v) * float64(p.n) / e.srv[s].speed
	if left < 0 {
		left = 0
	}
	e.dep.set(s, e.now+left)
}

// psStart puts a copy in service on processor-sharing server s.
func (e *engine) psStart(s int32, ent qent) {
	e.psAdvance(s)
	r := &e.slots[ent.slot]
	c := &r.copies[ent.k]
	r.state[ent.k] = cRunning
	c.srv = s
	r.ran++
	p := &e.pss[s]
	fv := p.v + c.size
	psPush(&p.h, psEnt{fv: fv, slot: ent.slot, gen: ent.gen, k: ent.k})
	if i := int(ent.slot)*MaxAttempts + int(ent.k); i < len(e.psfv) {
		e.psfv[i] = fv
	} else {
		e.psfv = append(e.psfv, make([]float64, i+1-len(e.psfv))...)
		e.psfv[i] = fv
	}
	p.n++
	if p.n == 1 {
		e.nRunning++
	}
	e.psSchedule(s)
}

// psLeave takes one copy out of server s's count (the entry itself is
// popped, or skipped later).
func (e *engine) psLeave(s int32) {
	p := &e.pss[s]
	p.n--
	if p.n == 0 {
		e.nRunning--
	}
}

// psComplete finishes the copy at the top of server s's heap.
func (e *engine) psComplete(s int32) {
	e.psAdvance(s)
	p := &e.pss[s]
	x := psPop(&p.h)
	e.psLeave(s)
	r := &e.slots[x.slot]
	c := &r.copies[x.k]
	r.work += c.size
	r.state[x.k] = cDone
	r.live--
	e.leave(r, c.q)
	if e.pol != nil {
		e.answered(r, c.q)
	}
	e.ended(r, x.k)
	switch {
	case !r.done:
		e.finish(x.slot, r, x.k)
	case x.k == 0 && e.live != nil && e.feedPrimary:
		e.estOf(r.client).Observe(toDuration(e.now), toDuration(e.now-r.arrival))
	}
	e.psSchedule(s)
	e.maybeFree(x.slot)
}

// psCancel stops copy k of r, in service on a processor-sharing server,
// counting the work it got.
func (e *engine) psCancel(slot int32, r *request, k uint8) {
	c := &r.copies[k]
	s := c.srv
	e.psAdvance(s)
	p := &e.pss[s]
	r.work += c.size - max(0, e.psfv[int(slot)*MaxAttempts+int(k)]-p.v)
	r.state[k] = cCancelled
	r.live--
	e.leave(r, c.q)
	e.ended(r, k)
	e.psLeave(s)
	e.psSchedule(s)
}

// psPush and psPop keep a binary min-heap of copies on fv.
func psPush(h *[]psEnt, x psEnt) {
	a := append(*h, x)
	i := len(a) - 1
	for i > 0 {
		up := (i - 1) / 2
		if a[up].fv <= a[i].fv {
			break
		}
		a[up], a[i] = a[i], a[up]
		i = up
	}
	*h = a
}

func psPop(h *[]psEnt) psEnt {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r].fv < a[l].fv {
			m = r
		}
		if a[i].fv <= a[m].fv {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
