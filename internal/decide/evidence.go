package decide

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// This file holds the rules that make the zero Config hedge the server, not
// the request. A latency percentile says that a request is slow, not why:
// its server may be stuck (a stall, a pause, a bad host), and a copy
// elsewhere wins; or the request is big, or every server is busy, and a
// copy takes as long and only adds load. The client cannot see its
// servers, but it sees its own traffic, and that is enough:
//
//   - spare capacity (Config.MaxReplicaLoad): a copy goes only to a
//     replica with none of this client's requests in flight, is asked for
//     again a delay later if there is none, and no copy goes while fewer
//     than a quarter of recent primaries found their replica idle;
//   - evidence and payoff (Config.MinWinRate): each hedge is classed by
//     what the client saw of its primary's replica (Evidence), and a class
//     of hedges goes on only while it pays: its hedges win often enough,
//     or lose cheaply;
//   - no hiding a stuck replica: a copy cancelled because another won
//     still counts as load on its replica until the replica completes
//     something, or for four delays (see Picker).
//
// The simulator in package sim measures them across its worlds (see
// docs/default.md for the grid and how each rule was chosen).

// Evidence is what a client saw of the primary's replica when a further
// copy of a request came due.
type Evidence uint8

const (
	// EvidenceNone: the engine does not pick replicas, so it cannot tell.
	EvidenceNone Evidence = iota
	// EvidenceHead: every request this client sent to the primary's
	// replica before the primary has been answered. The primary is at the
	// head of what this client has there: it is slow itself, or its
	// server is.
	EvidenceHead
	// EvidenceBehind: a request sent to the primary's replica before the
	// primary is still unanswered: the primary waits behind slow work, and
	// a copy on an idle replica jumps the queue.
	EvidenceBehind
)

// numEvidence is the number of Evidence values.
const numEvidence = 3

// String names the evidence.
func (e Evidence) String() string {
	switch e {
	case EvidenceNone:
		return "none"
	case EvidenceHead:
		return "head"
	case EvidenceBehind:
		return "behind"
	}
	return "Evidence(?)"
}

// Behind classifies a primary from two counts of its replica that an
// engine keeps: ahead is how many copies of this client were in flight
// there when the primary was sent, and answered is how many copies the
// replica has answered since (cancelled copies do not count: they say
// nothing of the replica's progress). The primary waits behind earlier
// work while fewer than ahead were answered. On a server that answers its
// client's requests in order this is exact, except that a copy ahead that
// was cancelled keeps the primary Behind; where later requests can finish
// first (processor sharing, many workers) it takes their answers for the
// earlier ones', and says Head sooner.
func Behind(ahead, answered int64) Evidence {
	if answered < ahead {
		return EvidenceBehind
	}
	return EvidenceHead
}

// The spare-capacity rule's constants.
const (
	// minSpare is the least share of recent primaries that found their
	// replica idle for hedges to go.
	minSpare = 0.25
	// spareOne is 1 in the fixed point of Policy.spare.
	spareOne = 1 << 20
	// GhostDelays is how many hedge delays a copy cancelled because
	// another won counts as load on its replica, unless the replica
	// answers something first.
	GhostDelays = 4
)

// Placed records the load of the replica a primary was placed on: its
// copies of this Hedger in flight before the primary. The Policy keeps
// the share of recent primaries that found their replica idle, an
// exponential average over about a thousand requests: the client's view
// of its replicas' spare capacity. Below a quarter, every replica is busy
// most of the time, copies would only add load, and hedges are refused
// (RefusedBusy) until it recovers. Engines that pick replicas call it for
// every primary.
//
// together reports that every copy in flight there was sent together
// with the primary, as the leaves of one fan-out are: those copies say
// that this client sends many requests at once, not that the replica is
// busy with earlier work, and the replica counts as idle. Without this, a
// fan-out of W leaves over n replicas finds every replica but the first
// leaf's busy, and its hedges stop whatever the load. Copies sent a
// moment apart are not together: at high load even a short window counts
// enough ordinary arrivals as idle to let hedges add load (measured in
// docs/default.md).
func (p *Policy) Placed(load int, together bool) {
	if p.maxLoad < 0 {
		return
	}
	v := int64(0)
	if load == 0 || together {
		v = spareOne
	}
	for {
		x := p.spare.Load()
		n := x + (v-x)>>10
		if n == x || p.spare.CompareAndSwap(x, n) {
			return
		}
	}
}

// Spare returns the share of recent primaries that found their replica
// idle (1 until an engine reports placements).
func (p *Policy) Spare() float64 { return float64(p.spare.Load()) / spareOne }

// Ghost returns how long a copy cancelled because another copy of its
// request won (at the request's delay d) still counts as load on its
// replica, unless the replica answers something first: GhostDelays delays,
// or zero when the spare-capacity rule is off.
func (p *Policy) Ghost(d time.Duration) time.Duration {
	if p.maxLoad < 0 || d <= 0 || d == Never {
		return 0
	}
	return time.Duration(min(float64(d)*GhostDelays, float64(Never/2)))
}

// The payoff rule's constants.
const (
	// maxWaste is the most time a losing hedge of a class may run, on
	// average per hedge of the class and as a share of the delay, for the
	// class to go on whatever its win rate: hedges that lose often but
	// cheaply (a stall hides among slow but ordinary requests) go on,
	// hedges that lose and run long (copies of big requests) stop.
	maxWaste = 0.4
	// maxWasteFixed is maxWaste in the fixed point.
	maxWasteFixed = rateOne * 2 / 5
	// payoffProbe is the probe credit per request of a class that does
	// not pay: at most one hedge in 5,000 requests.
	payoffProbe = 0.0002
	// payoffMemory is how many recent hedges of a class the averages
	// weigh, about.
	payoffMemory = 32
	// payoffPrior is the weight, in hedges, of a class's starting
	// averages: a win rate of exactly the minimum and a waste of exactly
	// maxWaste, the edge of paying. A class's first outcomes move its
	// averages as a running mean with that prior would, so that a new
	// Hedger neither trusts a class it has not measured nor takes a few
	// dozen losing hedges to stop one that does not pay.
	payoffPrior = 4
	// rateOne is 1 in the payoff rule's fixed point.
	rateOne = 1 << 20
)

// payoff is the benefit feedback of a Policy. For each Evidence it keeps
// two exponential averages over about the last payoffMemory hedges of that
// class (fixed point, rateOne): the share that won, and the time losers
// ran for nothing, as a share of their delay (0 for a win), starting at
// the edge of paying (the minimum and maxWaste) with the weight of
// payoffPrior hedges. A class goes while its win rate is at least the minimum
// or its waste at most maxWaste. Otherwise it goes with probability
// (best of the two ratios)^8, so that an average that dips by chance
// recovers at once, and on probe tokens credited by every request, so
// that a class that stopped paying is measured again now and then and
// comes back by itself when it pays.
type payoff struct {
	rate  [numEvidence]atomic.Int64
	waste [numEvidence]atomic.Int64
	probe [numEvidence]atomic.Int64 // probe tokens, scaled by rateOne
	seen  [numEvidence]atomic.Int64 // outcomes recorded
	draw  atomic.Uint64             // a counter hashed into the soft gate's draws
	min   int64                     // the least win rate, scaled
	cred  int64                     // probe credit per request, scaled
}

// newPayoff returns the rule for a minimum win rate in (0, 1], or nil for
// none.
func newPayoff(minWin float64) *payoff {
	if minWin <= 0 {
		return nil
	}
	p := &payoff{min: int64(math.Round(minWin * rateOne)), cred: int64(math.Round(payoffProbe * rateOne))}
	for i := range p.rate {
		p.rate[i].Store(p.min)
		p.waste[i].Store(maxWasteFixed)
	}
	return p
}

// request credits every probe bucket for one request, up to one token.
func (p *payoff) request() {
	if p == nil {
		return
	}
	for i := range p.probe {
		if b := &p.probe[i]; b.Load() < rateOne {
			if b.Add(p.cred) > rateOne {
				b.Store(rateOne) // a race may lose a credit: harmless
			}
		}
	}
}

// pays reports whether hedges of class e win often enough, or lose
// cheaply enough.
func (p *payoff) pays(e Evidence) bool {
	return p == nil || p.rate[e].Load() >= p.min || p.waste[e].Load() <= maxWasteFixed
}

// try reports whether a hedge of class e may go, spending a probe token
// when that is what lets it.
func (p *payoff) try(e Evidence) bool {
	if p.pays(e) {
		return true
	}
	f := float64(p.rate[e].Load()) / float64(p.min)
	if w := maxWaste * rateOne / float64(max(p.waste[e].Load(), 1)); w > f {
		f = w
	}
	f *= f
	f *= f
	if unit(p.draw.Add(1)) < f*f {
		return true
	}
	b := &p.probe[e]
	for {
		t := b.Load()
		if t < rateOne {
			return false
		}
		if b.CompareAndSwap(t, t-rateOne) {
			return true
		}
	}
}

// unit hashes a counter to a uniform number in [0, 1): deterministic, so
// that the simulator's runs repeat, and free of locks.
func unit(n uint64) float64 {
	n *= 0x9E3779B97F4A7C15
	n ^= n >> 32
	n *= 0xD6E8FEB86659FD93
	n ^= n >> 32
	return float64(n>>11) / (1 << 53)
}

// refund gives back a probe token that try may have taken for a hedge
// that was not sent after all (at worst one token too many: harmless).
func (p *payoff) refund(e Evidence) {
	if p != nil && !p.pays(e) && p.probe[e].Load() < rateOne {
		p.probe[e].Add(rateOne)
	}
}

// outcome records whether a hedge of class e won and, if it lost, how long
// it ran for nothing, as a share of its delay.
func (p *payoff) outcome(e Evidence, won bool, waste float64) {
	if p == nil {
		return
	}
	v, w := int64(0), int64(0)
	if won {
		v = rateOne
	} else {
		w = int64(min(waste, 16) * rateOne)
	}
	k := min(p.seen[e].Add(1)+payoffPrior, payoffMemory)
	ewma(&p.rate[e], v, k)
	ewma(&p.waste[e], w, k)
}

// ewma moves an average over about k values toward v.
func ewma(r *atomic.Int64, v, k int64) {
	for {
		x := r.Load()
		n := x + (v-x)/k
		if n == x || r.CompareAndSwap(x, n) {
			return
		}
	}
}

// String describes the rule.
func (p *payoff) String() string {
	return fmt.Sprintf("hedges go on while at least %.3g of them win or they lose cheaply", float64(p.min)/rateOne)
}

// WinRate returns the recent win rate of hedges sent on evidence e, as the
// payoff rule measures it (the minimum before any; 1 without the rule).
func (p *Policy) WinRate(e Evidence) float64 {
	if p.payoff == nil || int(e) >= numEvidence {
		return 1
	}
	return float64(p.payoff.rate[e].Load()) / rateOne
}

// Waste returns the recent time losing hedges sent on evidence e ran for
// nothing, per hedge and as a share of their delay, as the payoff rule
// measures it (maxWaste before any; 0 without the rule).
func (p *Policy) Waste(e Evidence) float64 {
	if p.payoff == nil || int(e) >= numEvidence {
		return 0
	}
	return float64(p.payoff.waste[e].Load()) / rateOne
}
