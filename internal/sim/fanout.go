package sim

import (
	"math"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// parentRec is a fan-out request.
type parentRec struct {
	arrival  float64
	idx      int32 // its arrival index
	got      int32 // sub-requests finished
	alive    int32 // sub-request slots not yet freed
	sent     int32 // sub-requests started: all of them, or the canaries until they have finished (Config.FanCall)
	client   uint16
	measured bool
	done     bool
}

// subRef is a parent's reference to one of its sub-requests; slot is -1
// for one not started yet (a leaf behind the canaries).
type subRef struct {
	slot int32
	gen  uint32
}

// newParent starts a fan-out request of client, the idx-th to arrive, of
// Config.Fanout sub-requests, all the client's. Each is a unit of its own
// for routing and hedging; the request finishes when Config.FanoutNeed
// (or all) of them have. With Config.FanCall the request has a decision
// of its own (decide.Fan), which its sub-requests' plans share, and its
// canaries, if any, go first: the others start once every canary has
// finished (sendRest).
func (e *engine) newParent(idx int32, client uint16, measured bool) {
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
		if e.fanCall {
			e.addFan()
		}
	}
	n := int32(k)
	if e.fanCall {
		e.fans[p].Reset(e.fanCfg)
		if e.canaries > 0 {
			n = e.canaries
		}
	}
	e.par[p] = parentRec{arrival: e.now, idx: idx, alive: n, sent: n, client: client, measured: measured}
	if measured {
		e.pending++
	}
	base := int(p) * k
	for j := range k {
		e.subs[base+j] = subRef{slot: -1}
	}
	for j := range int(n) {
		s := e.newUnit(p, idx, client, measured, e.shardOf(j))
		e.subs[base+j] = subRef{slot: s, gen: e.slots[s].gen}
	}
}

// shardOf returns the first server of the shard that leaf j of a
// request goes to: shard j mod Config.Shards, 0 without shards.
func (e *engine) shardOf(j int) int32 {
	if !e.sharded {
		return 0
	}
	return int32(j % e.shardN * e.shardR)
}

// addFan gives the parent slot just appended to e.par its decide.Fan,
// reusing one a previous run of the engine allocated.
func (e *engine) addFan() {
	if n := len(e.fans); n < cap(e.fans) && e.fans[:n+1][n] != nil {
		e.fans = e.fans[:n+1]
		return
	}
	e.fans = append(e.fans, new(decide.Fan))
}

// sendRest starts the sub-requests of parent p that waited for its
// canaries.
func (e *engine) sendRest(p int32) {
	pr := &e.par[p]
	from, k := int(pr.sent), e.c.Fanout
	idx, client, measured := pr.idx, pr.client, pr.measured
	pr.alive += int32(k - from)
	pr.sent = int32(k)
	base := int(p) * k
	for j := from; j < k; j++ {
		s := e.newUnit(p, idx, client, measured, e.shardOf(j)) // e.slots may grow: pr is not used after this
		e.subs[base+j] = subRef{slot: s, gen: e.slots[s].gen}
	}
}

// subDone counts a finished sub-request of parent p. When the parent has
// what it needs it is recorded and, with cancellation on, its unfinished
// sub-requests are cancelled. With Config.FanCall it also tells the
// parent's decide.Fan, brings the hedges of the stragglers forward when
// that starts the sibling trigger, and starts the leaves that waited for
// the canaries once they have all finished.
func (e *engine) subDone(p int32, start time.Duration) {
	pr := &e.par[p]
	pr.got++
	if e.fanCall {
		more := !pr.done && pr.got < e.need
		if e.fans[p].Answered(toDuration(e.now), start) && more && e.pol != nil && e.hedges {
			e.straggle(p)
		}
		if more && pr.got == pr.sent && pr.sent < int32(e.c.Fanout) {
			e.sendRest(p)
		}
		pr = &e.par[p]
	}
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
	for j := range int(pr.sent) {
		ref := e.subs[base+j]
		r := &e.slots[ref.slot]
		if r.gen != ref.gen || r.done {
			continue
		}
		r.done, r.arm = true, r.arm+1 // its timer, if any, is stale
		e.cancelAll(ref.slot, r)
		e.maybeFree(ref.slot)
	}
}

// straggle brings forward the hedge timers of parent p's unfinished
// sub-requests that have sent only their primary, now that its Fan's
// sibling trigger has started: each is due at decide.Policy.Due from its
// primary, when that is earlier than its timer (or it has none). The
// timer it had goes stale (hedgeRT.Arm).
func (e *engine) straggle(p int32) {
	pr := &e.par[p]
	pol := e.polOf(pr.client)
	now := toDuration(e.now)
	base := int(p) * e.c.Fanout
	for j := range int(pr.sent) {
		ref := e.subs[base+j]
		r := &e.slots[ref.slot]
		if r.gen != ref.gen || r.done || r.plan.Copies != 1 {
			continue
		}
		at, _ := pol.Due(&r.plan, r.plan.Start)
		if at == decide.Never {
			continue
		}
		t := e.now + fromDuration(max(at-now, 0))
		if t < e.armT[ref.slot] {
			e.arm(ref.slot, r, t)
		}
	}
}

// retireFan records the decision of parent p, all of whose sub-requests
// are freed: no copy of it is in flight, nor will be.
func (e *engine) retireFan(p int32) {
	if checkFanRetired != nil {
		checkFanRetired(e, p)
	}
	if !e.par[p].measured {
		return
	}
	f := e.fans[p]
	e.fanReqs++
	e.fanExtra += int64(f.Extra())
	e.fanPeak = max(e.fanPeak, f.Peak())
	e.fanMost = max(e.fanMost, f.Extra())
}

// checkFanRetired, when a test sets it, is called when a fan-out
// request's last sub-request is freed, with Config.FanCall. It is nil
// outside the package's tests.
var checkFanRetired func(e *engine, p int32)

// noTimer is armT's value for a request with no hedge timer armed.
var noTimer = math.Inf(1)
