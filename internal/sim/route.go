package sim

import "github.com/tailcut/hedge/internal/decide"

// place chooses the queue for the request's next copy, never one that
// already holds a copy of it. It returns -1 if every server holds one.
//
// Two-choice and random routing go through decide.Picker, hedge.Picker's
// code, the same code the live engine uses, with the queues' busy counts
// (waiting plus in service) as the load: with several clients, the
// client's own copies on each queue, as a Hedger sees only its own, even
// with Config.LoadReports (a report is fresh for few of the queues, and
// its count of every client's copies cannot be weighed against another
// queue's count of the client's alone).
// Least-loaded is not a Picker mode, so it is a scan here, and it reads
// the whole queues whatever the clients: an oracle no client has. With
// Config.Shards every routing places among the request's shard's
// servers only (placeShard).
func (e *engine) place(r *request) int32 { return e.placeSkip(r, nil) }

// placeSkip is place, leaving out the queues in skip as if they held a
// copy (the candidates decide.Policy.Place passed over). Least-loaded
// and the tests' placements cannot leave one out, and offer it again.
func (e *engine) placeSkip(r *request, skip []int) int32 {
	if e.multi {
		e.vbase = int(r.client) * e.nq // the client's view, for e.load
	}
	if e.pool {
		return 0
	}
	if e.sharded {
		return e.placeShard(r, skip)
	}
	if e.leastLoaded {
		return e.leastLoadedPick(r, 0, len(e.qs))
	}
	var buf [MaxAttempts + decide.MaxCandidates]int
	held := buf[:0]
	for j := range r.n {
		held = append(held, int(r.copies[j].q))
	}
	held = append(held, skip...)
	if hedgePlacement != nil && e.c.placement != 0 && r.n == 1 {
		return hedgePlacement(e, r, held[0])
	}
	if e.tiedSample {
		// The source's tied requests: the copies go to the distinct
		// servers two-choice routing samples, one on each, whatever
		// their loads.
		return int32(randomPicker.Pick(e.serversN, held, nil, e.rM.Uint64()))
	}
	return int32(e.pick(e.serversN, 0, held, e.rM.Uint64()))
}

// pick is e.picker.Pick among the n queues from lo, place j being queue
// lo+j, with held and the result as places. On Pick's fast path it reads
// the loads in place, through decide.Picker.Pair and decide.Choose,
// which are Pick's own, rather than by a call through a function value
// for each.
func (e *engine) pick(n, lo int, held []int, u uint64) int {
	if a, b, ok := e.picker.Pair(n, held, u); ok {
		if b < 0 {
			return a
		}
		return decide.Choose(a, b, e.loadOf(lo+a), e.loadOf(lo+b))
	}
	if lo == 0 {
		return e.picker.Pick(n, held, e.load, u)
	}
	e.sbase = lo
	return e.picker.Pick(n, held, e.loadShard, u)
}

// loadOf is e.load(i), read in place with one client: the queue's count
// (loadPlain) inline, with the library's ghosts (loadGhost) by a direct
// call.
func (e *engine) loadOf(i int) int {
	if e.plainLoad {
		return e.qs[i].busy
	}
	return e.loadOther(i)
}

// loadOther is loadOf's other cases.
func (e *engine) loadOther(i int) int {
	if e.multi {
		return e.load(i)
	}
	f := &e.qs[i]
	if e.now < f.ghostUntil {
		return f.busy + 1
	}
	return f.busy
}

var randomPicker = decide.Picker{Random: true}

// placeShard is placeSkip with Config.Shards. The servers of r's shard,
// lo to lo+R-1, are places 0 to R-1 of a replica set of their own: the
// held copies and the candidates to leave out are mapped to their
// places, the routing picks among them by the same code as without
// shards (decide.Picker, reading the servers' loads through e.loadShard),
// and the place it picks maps back to its server. A copy of a leaf thus
// never leaves its shard, and never goes to a server that holds another.
func (e *engine) placeShard(r *request, skip []int) int32 {
	lo := int(r.lo)
	if e.leastLoaded {
		return e.leastLoadedPick(r, lo, e.shardR)
	}
	var buf [MaxAttempts + decide.MaxCandidates]int
	held := buf[:0]
	for j := range r.n {
		held = append(held, int(r.copies[j].q)-lo)
	}
	for _, q := range skip {
		held = append(held, q-lo)
	}
	var i int
	if e.tiedSample {
		i = randomPicker.Pick(e.shardR, held, nil, e.rM.Uint64())
	} else {
		i = e.pick(e.shardR, lo, held, e.rM.Uint64())
	}
	if i < 0 {
		return -1
	}
	return int32(lo + i)
}

// spareRoute returns the queue that runs request r under TiedSpare: the
// routing's pick for the primary, unless a copy would wait there and the
// routing's second pick, the spare's replica, has an idle server (no copy
// waiting or in service), which then runs it in the primary's place.
func (e *engine) spareRoute(r *request) int32 {
	q := e.place(r)
	if e.qs[q].busy == 0 {
		return q
	}
	if e.leastLoaded {
		return q // it picked the least busy server: none is idle
	}
	var s int32
	if e.sharded {
		// The spare is the shard's second pick.
		lo := int(r.lo)
		held := [1]int{int(q) - lo}
		if i := e.pick(e.shardR, lo, held[:], e.rM.Uint64()); i >= 0 {
			s = int32(lo + i)
		} else {
			s = -1
		}
	} else {
		held := [1]int{int(q)}
		s = int32(e.pick(e.serversN, 0, held[:], e.rM.Uint64()))
	}
	if s >= 0 && e.qs[s].busy == 0 {
		if r.measured {
			e.spareMoves++
		}
		return s
	}
	return q
}

// hedgePlacement, when a test sets it, places a request's second copy in
// place of the Picker for runs whose Config.placement is not zero: the
// other placements TestDefaultAlternatives measures against the
// default's. It is nil outside the package's tests.
var hedgePlacement func(e *engine, r *request, primary int) int32

// leastLoadedPick scans the n servers from lo that hold no copy of r for
// the smallest busy count, breaking ties uniformly at random (reservoir
// sampling).
func (e *engine) leastLoadedPick(r *request, lo, n int) int32 {
	best, bestLoad, ties := int32(-1), 0, 0
outer:
	for i := lo; i < lo+n; i++ {
		for j := range r.n {
			if r.copies[j].q == int32(i) {
				continue outer
			}
		}
		l := e.qs[i].busy
		switch {
		case best < 0 || l < bestLoad:
			best, bestLoad, ties = int32(i), l, 1
		case l == bestLoad:
			ties++
			if e.rM.IntN(ties) == 0 {
				best = int32(i)
			}
		}
	}
	return best
}
