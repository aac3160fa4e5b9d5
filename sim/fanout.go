package sim

// parentRec is a fan-out request.
type parentRec struct {
	arrival  float64
	got      int32 // sub-requests finished
	alive    int32 // sub-request slots not yet freed
	measured bool
	done     bool
}

type subRef struct {
	slot int32
	gen  uint32
}

// newParent starts a fan-out request of client, of Config.Fanout
// sub-requests, all the client's. Each is
// a unit of its own for routing and hedging; the request finishes when
// Config.FanoutNeed (or all) of them have.
func (e *engine) newParent(client uint16, measured bool) {
	k := e.c.Fanout
	var p int32
	if n := len(e.pfree); n > 0 {
		p = e.pfree[n-1]
		e.pfree = e.pfree[:n-1]
	} else {
		e.par = append(e.par, parentRec{})
		p = int32(len(e.par) - 1)
		for range k {
			e.subs = append(e.subs, subRef{})
		}
	}
	e.par[p] = parentRec{arrival: e.now, alive: int32(k), measured: measured}
	if measured {
		e.pending++
	}
	base := int(p) * k
	for j := range k {
		s := e.newUnit(p, client, measured)
		e.subs[base+j] = subRef{slot: s, gen: e.slots[s].gen}
	}
}

// subDone counts a finished sub-request of parent p. When the parent has
// what it needs it is recorded and, with cancellation on, its unfinished
// sub-requests are cancelled.
func (e *engine) subDone(p int32) {
	pr := &e.par[p]
	pr.got++
	if pr.done || pr.got < e.need {
		return
	}
	pr.done = true
	if pr.measured {
		e.lat = append(e.lat, e.now-pr.arrival)
		e.pending--
	}
	if !e.cancel {
		return
	}
	// The sub-request that just finished is not freed yet, so p stays
	// alive through this loop.
	base := int(p) * e.c.Fanout
	for j := range e.c.Fanout {
		ref := e.subs[base+j]
		r := &e.slots[ref.slot]
		if r.gen != ref.gen || r.done {
			continue
		}
		r.done = true
		e.cancelAll(ref.slot, r)
		e.maybeFree(ref.slot)
	}
}
