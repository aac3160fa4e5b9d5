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
// servers, only its own traffic, and it may be one of many clients whose
// work it cannot see at all:
//
//   - spare capacity (Config.MaxReplicaLoad): a copy goes only to a
//     replica with none of this client's requests in flight, is asked for
//     again a delay later if there is none, and no copy goes while fewer
//     than a quarter of recent primaries found their replica idle;
//   - evidence and payoff (Config.PayoffWinRate): each hedge is classed by
//     what the client saw of its primary's replica (Evidence). A primary
//     waiting behind an earlier request of this client is held up by work
//     the client can see, and its copy may go at the delay; a primary at
//     the head of what the client has there may be slow itself, stuck with
//     its server, or queued behind other clients' work, and its copy waits
//     until the primary has outlived HeadDelays delays, which a stuck
//     server explains far more often than the other two. A class of hedges
//     goes on only while it pays: its losers waste little of a delay, the
//     more the more it wins; a new class starts just short of that;
//   - no hiding a stuck replica: a copy cancelled because another won
//     still counts as load on its replica until the replica completes
//     something, or for GhostDelays delays (see Picker).
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
	// EvidenceRunning: by its server's own reports of its load (see
	// Report), the primary found a free worker, or the requests that were
	// ahead of it have been answered: it runs, and is slow itself or its
	// server is. Unlike EvidenceHead it cannot be queued behind other
	// clients' work, and its copy does not wait HeadDelays.
	EvidenceRunning
	// EvidenceQueued: by its server's own reports of its load, requests
	// were ahead of the primary there, and fewer have been answered since:
	// it waits behind them, whichever clients sent them, and a copy on a
	// replica that reports a free worker jumps that queue.
	EvidenceQueued
)

// waits reports whether a copy of a primary classed e waits HeadDelays
// (the head wait): every class but Behind by the client's own view, and
// none (which the head wait does not apply to). With other clients on the
// replica, a primary at the head of this client's requests may be queued
// behind their work (Head); one the reports say is queued behind it
// (Queued) is, and a copy would jump their queue; and one the reports say
// runs (Running) is slow itself or stuck, which waiting tells apart: a
// copy at one delay of a primary that runs was measured to raise the
// median of one client's mixed world at load 0.8 by 5.5% (docs/default.md,
// "Load reports").
func (e Evidence) waits() bool {
	return e == EvidenceHead || e == EvidenceQueued || e == EvidenceRunning
}

// numEvidence is the number of Evidence values.
const numEvidence = 5

// String names the evidence.
func (e Evidence) String() string {
	switch e {
	case EvidenceNone:
		return "none"
	case EvidenceHead:
		return "head"
	case EvidenceBehind:
		return "behind"
	case EvidenceRunning:
		return "running"
	case EvidenceQueued:
		return "queued"
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
	// answers something first: longer than a primary at the head waits
	// for its copy (HeadDelays), so that a replica stuck for that long
	// does not look idle to the next requests once its stuck copies are
	// cancelled.
	GhostDelays = 8
	// HeadDelays is how many delays a primary at the head of this
	// client's requests on its replica (EvidenceHead) must have waited
	// for its copy to go. One client alone sees such a primary as slow
	// itself or stuck with its server; with other clients on the replica
	// it may as well be queued behind their work, and a copy that jumps
	// that queue wins for its request while its work lands on theirs.
	// Waiting three delays leaves the copies of primaries that a stuck
	// server holds, and few others (docs/default.md, "Many clients").
	HeadDelays = 3
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
	// maxWaste is the most time losing hedges of a class that never wins
	// may run, on average per hedge of the class and as a share of the
	// delay, for the class to go on: 0.4, in the fixed point. A class
	// that wins a share w of its hedges may waste maxWaste*(1+w). Hedges
	// that lose often but cheaply (a stall hides among slow but ordinary
	// requests) go on, hedges that lose and run long (copies of big
	// requests) stop, however often the others win: with many clients, a
	// copy that jumps another client's queue wins for its request while
	// the work it adds lands on everyone.
	maxWaste = rateOne * 2 / 5
	// startRate and startWaste are the averages of a new class of hedges
	// sent on evidence (EvidenceHead, EvidenceBehind), just short of
	// paying: it may waste maxWaste*(1+1/4) = 0.5 of a delay and starts at
	// 0.6, so its first hedges go at the soft edge's odds, (0.5/0.6)^8,
	// about one in four, and their outcomes decide. A Hedger starts
	// cautious and earns its hedges: with many clients, each starting
	// where its classes pay would send a burst of copies nobody measured.
	startRate  = rateOne / 4
	startWaste = rateOne * 3 / 5
	// payoffProbe is the probe credit per request of a class that does
	// not pay: at most one hedge in 5,000 requests.
	payoffProbe = 0.0002
	// payoffMemory is how many recent hedges of a class the averages
	// weigh, about.
	payoffMemory = 32
	// payoffPrior is the weight, in hedges, of a class's starting
	// averages (startRate and startWaste). A class's first outcomes move
	// its averages as a running mean with that prior would, so that a new
	// Hedger neither trusts a class it has not measured nor takes a few
	// dozen losing hedges to stop one that does not pay.
	payoffPrior = 4
	// rateOne is 1 in the payoff rule's fixed point.
	rateOne = 1 << 20
)

// payoff is the benefit feedback of a Policy. For each Evidence it keeps
// two exponential averages over about the last payoffMemory hedges of that
// class (fixed point, rateOne): the share that won, and the time losers
// ran for nothing, as a share of their delay (0 for a win), starting just
// short of paying (startRate, startWaste) with the weight of payoffPrior
// hedges. A class goes while its waste is at most maxWaste*(1+its win
// rate), or its win rate is at least the minimum (Config.PayoffWinRate; with
// the zero Config's 1, never). Otherwise it goes with probability (best
// of the two ratios)^8, so that an average that dips by chance recovers
// at once, and on probe tokens credited by every request, so that a class
// that stopped paying is measured again now and then and comes back by
// itself when it pays; a probe that wins fast starts it over (see
// outcome).
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
		p.rate[i].Store(startRate)
		p.waste[i].Store(startWaste)
	}
	// Hedges sent without evidence (the engine does not pick replicas)
	// start at the edge of paying instead: such a client sees nothing
	// of its replicas, and its one class goes as its delay says until
	// its outcomes decide.
	p.waste[EvidenceNone].Store(allowed(startRate))
	return p
}

// allowed returns the most waste a class with win rate r may have and go
// on: maxWaste*(1+r), in the fixed point.
func allowed(r int64) int64 { return maxWaste + maxWaste*r/rateOne }

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

// pays reports whether hedges of class e lose cheaply enough for how
// often they win, or win often enough.
func (p *payoff) pays(e Evidence) bool {
	if p == nil {
		return true
	}
	r := p.rate[e].Load()
	return r >= p.min || p.waste[e].Load() <= allowed(r)
}

// try reports whether a hedge of class e may go, and whether a probe
// token, spent, is what lets it.
func (p *payoff) try(e Evidence) (ok, probe bool) {
	if p.pays(e) {
		return true, false
	}
	r := p.rate[e].Load()
	f := float64(r) / float64(p.min)
	if w := float64(allowed(r)) / float64(max(p.waste[e].Load(), 1)); w > f {
		f = w
	}
	f *= f
	f *= f
	if unit(p.draw.Add(1)) < f*f {
		return true, false
	}
	b := &p.probe[e]
	for {
		t := b.Load()
		if t < rateOne {
			return false, false
		}
		if b.CompareAndSwap(t, t-rateOne) {
			return true, true
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
//
// restart, for a class that does not pay, first starts it over as a new
// class, so that this outcome weighs as its first. Policy.Succeeded sets
// it for a probe that won with its copy answering within half the time
// its primary had waited: that primary was slowed by its server, not by
// its size (a big request's copy takes as long as it), so the world that
// stopped the class may be gone. A class's averages weigh outcomes, not
// time: a burst of slowness on every replica at once (a shared host, the
// client's own process starved) makes the copies it provokes lose and
// run many delays, and can leave a class so far from paying that probes,
// one in 5,000 requests each moving it by a thirty-second, would need
// dozens of wins to bring it back (TestStallHedgesComeBackAfterABurst:
// with the restart, at the first probe after the burst). Where hedges truly do not pay, a
// restart costs the one or two losing hedges that stop the class again,
// and only after the rare probe that wins that fast (docs/default.md,
// "After a burst").
func (p *payoff) outcome(e Evidence, won bool, waste float64, restart bool) {
	if p == nil {
		return
	}
	if restart && !p.pays(e) {
		p.rate[e].Store(startRate)
		p.waste[e].Store(startWaste)
		p.seen[e].Store(0)
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
	if p.min >= rateOne {
		return "hedges go on while they lose cheaply for how often they win, a primary at the head of its replica waits 3 delays"
	}
	return fmt.Sprintf("hedges go on while they lose cheaply for how often they win or at least %.3g of them win, a primary at the head of its replica waits 3 delays", float64(p.min)/rateOne)
}

// WinRate returns the recent win rate of hedges sent on evidence e, as the
// payoff rule measures it (1/4 before any; 1 without the rule).
func (p *Policy) WinRate(e Evidence) float64 {
	if p.payoff == nil || int(e) >= numEvidence {
		return 1
	}
	return float64(p.payoff.rate[e].Load()) / rateOne
}

// Waste returns the recent time losing hedges sent on evidence e ran for
// nothing, per hedge and as a share of their delay, as the payoff rule
// measures it (0.6 before any; 0 without the rule).
func (p *Policy) Waste(e Evidence) float64 {
	if p.payoff == nil || int(e) >= numEvidence {
		return 0
	}
	return float64(p.payoff.waste[e].Load()) / rateOne
}
