package advise

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tailcut/hedge"

	"github.com/tailcut/hedge/internal/decide"
)

// This file replays the library's default (the zero hedge.Config) on a
// sample with send times. The decision is not copied here: a decide.Policy
// decides, driven through decide.Policy.Schedule and decide.Policy.Fire as
// the live engine and the simulator drive it, and the replay is only its
// decide.Runtime, on a virtual clock: where a copy goes, what the client
// sees of the replicas, when a timer fires, when a copy answers.

// localDefault is the moment-local estimate of the library's zero Config
// (hedge.Config{} with Replicas set) from the sample's own send times.
// The sample's requests are replayed in the order they were sent, on a
// virtual clock, over replicas replicas; each primary answers after its
// recorded latency. The library's own decide.Policy decides every copy,
// with all of the default's rules:
//
//   - the delay, here fixed at the sample's p95: what the default's live
//     p95 of primaries settles at over the sample. It is not the live
//     estimate itself, which is a bucket's midpoint within 1/128 of the
//     p95 (package quantile): on a sample rounded to whole milliseconds,
//     many latencies sit exactly at the p95, a midpoint just below them
//     would send a copy of every one, and the library, which sees the
//     latencies unrounded, would not. Its moves with the load are not
//     replayed;
//   - the spare-capacity rule: a copy only to an idle replica, asked for
//     again a delay later when there is none, and none while fewer than a
//     quarter of recent primaries found their replica idle
//     (decide.Policy.Placed);
//   - the evidence and payoff rule: each hedge classed by what the client
//     saw of its primary's replica (decide.Behind), the copy of a primary
//     at the head of it held until it has waited three delays, and a class
//     whose losers cost more than its wins allow held back
//     (decide.Policy.Succeeded teaches it the replayed outcomes, in the
//     order they happen);
//   - the default budget.
//
// When the sample names each request's replica (and names replicas
// replicas), each primary stays on the replica it was sent to, and a copy
// draws its latency from its moment's requests on the replica the copy
// goes to: a replica that stalled shows as slow primaries there, and its
// copies elsewhere are as fast as the other replicas were at that moment.
// Otherwise primaries are spread as the library's picker spreads them,
// and copies draw from the moment's requests on every replica. Copies'
// replicas are picked as the library picks them (decide.Picker,
// hedge.Picker's code, the less busy of two at random), busy meaning this
// client's copies in
// flight there, as the library counts them: primaries until they answer
// or are cancelled, copies likewise, and a copy cancelled because the
// other won counted for a while longer (decide.Policy.Ghost). A copy that
// goes draws its latency from its moment, as local's copies do: the
// replay's timeline (which copy answers first, which replica answers
// when, what the payoff rule and the spare share learn) follows one draw
// from that pool, and the reported percentiles and work average over the
// pool, as local's do. The primaries' latencies are the sample's, whatever
// the copies do: a copy adds no load to the servers.
//
// A request asks at most maxAsks times (a delay far below the slow
// latencies would otherwise ask millions of times for each); with a
// delay of 0 the library itself asks once (decide.Policy.Retries). It
// returns the outcome and the refusals counted, indexed by hedge.Refusal,
// and stops with ctx's error.
func localDefault(ctx context.Context, e *empirical, s *Sample, lat []float64, order []int, replicas int, lag time.Duration, seed uint64, today Percentiles) (Outcome, [decide.NumRefusals]int, error) {
	rp, err := replayConfig(ctx, e, s, lat, order, defaultReplayConfig(e, replicas), lag, seed)
	if err != nil {
		return Outcome{}, [decide.NumRefusals]int{}, err
	}
	o := momentOutcome(e, lat, rp.hedged, rp.work)
	o.Choice, o.Budget = Choice{Label: "default", Delay: rp.meanDelay() + lag}, true
	o.ratios(today)
	o.Verdict = Judge(o)
	return o, rp.refused, nil
}

// maxAsks is the most times the moment-local default line asks for one
// request's copy: a thousand delays, far beyond the slowest request of
// any sample whose delay is a sensible p95.
const maxAsks = 1000

// checkEvery is how many requests (or events) a loop over the sample
// handles between checks of its context.
const checkEvery = 1024

// replay is the state of one replay of the default, and its
// decide.Runtime for the request it is deciding for (cur).
type replay struct {
	pol      *decide.Policy
	est      decide.Estimator
	picker   decide.Picker
	r        *rand.Rand
	replicas int
	lag      float64 // ns a timer fires late

	e     *empirical
	ts    []float64 // send times in order, ns after the first
	order []int
	lat   []float64

	// rec, when the sample names each request's replica (as many as
	// replicas), holds each position's replica: primaries stay where they
	// were sent, and a copy draws from its moment's requests on its own
	// replica (byRep), so that a stalled replica's copies elsewhere are as
	// fast as the other replicas were then. Nil otherwise.
	rec   []int
	byRep []repRequests

	reqs       []replayReq // by position in order
	inFlight   []int       // per replica: this client's copies in flight
	answered   []int64     // per replica: copies answered (for decide.Behind)
	ghostUntil []float64   // per replica: a cancelled copy counts as load until then
	ev         replayHeap
	seq        uint64

	cur   int     // the request the Runtime acts for
	clock float64 // the virtual clock: the time of the event being handled

	hedged   []momentCopy
	work     float64 // expected server time of all requests
	refused  [decide.NumRefusals]int
	paused   int     // busy refusals with an idle replica picked: the pause
	delaySum float64 // over the requests with a delay
	delayN   int
}

// repRequests are the sample's requests recorded on one replica, in the
// order they were sent: their send times and their indices in the sample.
type repRequests struct {
	ts    []float64
	order []int
}

// replicaNames returns the replicas s names, sorted, when every request
// names one and they are replicas in all; nil otherwise.
func replicaNames(s *Sample, replicas int) []string {
	if len(s.Replicas) == 0 || s.replicaCount() != replicas {
		return nil
	}
	names := make([]string, 0, replicas)
	for _, r := range s.Replicas {
		if r == "" {
			return nil
		}
		if !slices.Contains(names, r) {
			names = append(names, r)
		}
	}
	slices.Sort(names)
	return names
}

// recordedReplicas returns each position's replica (by order) as an
// index, and the requests of each replica, ts being the positions' send
// times, when replicaNames has the replicas; nil otherwise.
func recordedReplicas(s *Sample, order []int, ts []float64, replicas int) ([]int, []repRequests) {
	names := replicaNames(s, replicas)
	if names == nil {
		return nil, nil
	}
	rec := make([]int, len(order))
	by := make([]repRequests, replicas)
	for k, i := range order {
		q, _ := slices.BinarySearch(names, s.Replicas[i])
		rec[k] = q
		by[q].ts = append(by[q].ts, ts[k])
		by[q].order = append(by[q].order, i)
	}
	return rec, by
}

// replayReq is one request of a replay.
type replayReq struct {
	plan   decide.Plan
	q      [2]int  // replicas of the primary and of the hedge
	live   [2]bool // the copy is in flight
	ahead  int64   // copies in flight on the primary's replica when it went
	leftAt int64   // the replica's answered count then
	asks   int     // timers armed
	begun  bool    // the driver's Schedule ran
	done   bool
	hedged bool
}

// The kinds of replay events. At the same time an answer comes first (a
// request answered exactly at its delay sends no copy, and a replica that
// answers at the moment a copy looks is idle), then a send, then a timer.
const (
	evAnswer uint8 = iota
	evSend
	evTimer
)

// replayEvent is an event of a replay: copy c of request k answers, or
// request k is sent, or its timer fires.
type replayEvent struct {
	t    float64
	seq  uint64
	k    int32
	kind uint8
	c    uint8
}

// replayHeap is a min-heap of events by time, kind and order of
// scheduling (container/heap).
type replayHeap []replayEvent

func (h replayHeap) Len() int { return len(h) }
func (h replayHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (h replayHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *replayHeap) Push(x any)   { *h = append(*h, x.(replayEvent)) }
func (h *replayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// push schedules an event.
func (rp *replay) push(t float64, kind uint8, k int, c uint8) {
	rp.seq++
	heap.Push(&rp.ev, replayEvent{t: t, seq: rp.seq, k: int32(k), kind: kind, c: c})
}

// defaultReplayConfig is the library's zero Config as the default line
// replays it: but for the replicas it picks among and the delay, the
// sample's p95, where the live p95 settles.
func defaultReplayConfig(e *empirical, replicas int) hedge.Config {
	return hedge.Config{Replicas: replicas, Delay: hedge.Fixed(time.Duration(quantileOf(e.xs, 0.95)))}
}

// replayConfig runs the replay that localDefault describes with cfg, whose
// Replicas must be set, and returns its final state.
func replayConfig(ctx context.Context, e *empirical, s *Sample, lat []float64, order []int, cfg hedge.Config, lag time.Duration, seed uint64) (*replay, error) {
	replicas := cfg.Replicas
	pol, err := decide.FromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the replay's policy: %w", err)
	}
	rp := &replay{
		pol:        pol,
		est:        pol.NewEstimator(),
		r:          rand.New(rand.NewPCG(seed, 0x1d1e)),
		replicas:   replicas,
		lag:        float64(lag),
		e:          e,
		ts:         sendTimes(s, order),
		order:      order,
		lat:        lat,
		reqs:       make([]replayReq, len(order)),
		inFlight:   make([]int, replicas),
		answered:   make([]int64, replicas),
		ghostUntil: make([]float64, replicas),
		ev:         make(replayHeap, 0, 64),
	}
	rp.rec, rp.byRep = recordedReplicas(s, order, rp.ts, replicas)
	next := 0 // the next request to send: sends are pushed one at a time
	if len(order) > 0 {
		rp.push(rp.ts[0], evSend, 0, 0)
	}
	for n := 0; len(rp.ev) > 0; n++ {
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ev := heap.Pop(&rp.ev).(replayEvent)
		now := ev.t
		switch ev.kind {
		case evSend:
			rp.send(int(ev.k), now)
			if next++; next < len(order) {
				rp.push(rp.ts[next], evSend, next, 0)
			}
		case evAnswer:
			rp.answer(int(ev.k), ev.c, now)
		case evTimer:
			rp.timer(int(ev.k), now)
		}
	}
	return rp, nil
}

// load is replica q's load as the library's picker and spare-capacity
// rule read it: this client's copies in flight there, plus one while a
// copy cancelled there is still counted.
func (rp *replay) load(q int) int {
	n := rp.inFlight[q]
	if rp.clock < rp.ghostUntil[q] {
		n++
	}
	return n
}

// addCopy counts a copy sent to replica q now.
func (rp *replay) addCopy(q int) { rp.inFlight[q]++ }

// send places request k's primary, begins its Plan and schedules its
// first decision at once (after any answer at the same moment).
func (rp *replay) send(k int, now float64) {
	rp.clock = now
	rq := &rp.reqs[k]
	var q int
	if rp.rec != nil {
		q = rp.rec[k]
	} else {
		q = rp.picker.Pick(rp.replicas, nil, rp.load, rp.r.Uint64())
	}
	load := rp.load(q)
	rq.ahead, rq.leftAt = int64(rp.inFlight[q]), rp.answered[q]
	rp.addCopy(q)
	rq.q[0], rq.live[0] = q, true
	rp.push(now+rp.lat[rp.order[k]], evAnswer, k, 0)
	rp.pol.Begin(&rq.plan, time.Duration(now), rp.est, hedge.Never, false, rp.r)
	rp.pol.Placed(load, false) // a sample's requests: no fan-out is known
	if rq.plan.Delay != hedge.Never {
		rp.delaySum += float64(rq.plan.Delay)
		rp.delayN++
	}
	rp.push(now, evTimer, k, 0)
}

// timer is request k's timer firing: the driver's first Schedule, then
// Fire for each timer it armed.
func (rp *replay) timer(k int, now float64) {
	rp.clock = now
	rq := &rp.reqs[k]
	if rq.done {
		return
	}
	rp.cur = k
	if !rq.begun {
		rq.begun = true
		rp.pol.Schedule(&rq.plan, time.Duration(now), rp)
		return
	}
	rp.pol.Fire(&rq.plan, time.Duration(now), rp)
}

// answer is copy c of request k answering at now: the first to answer
// decides the request, and the other is cancelled.
func (rp *replay) answer(k int, c uint8, now float64) {
	rp.clock = now
	rq := &rp.reqs[k]
	if rq.done || !rq.live[c] {
		return // cancelled
	}
	q := rq.q[c]
	rq.live[c], rq.done = false, true
	rp.inFlight[q]--
	rp.answered[q]++
	rp.ghostUntil[q] = 0 // the replica shows progress
	at, won := time.Duration(now), hedge.Never
	if c == 1 {
		won = at
	}
	if x, _, ok := rq.plan.PrimarySample(at, c == 0, won); ok {
		rp.est.Observe(at, x)
	}
	rp.pol.Succeeded(&rq.plan, at, c == 1)
	if o := 1 - c; rq.live[o] {
		rq.live[o] = false
		rp.inFlight[rq.q[o]]--
		if g := rp.pol.Ghost(rq.plan.Delay); g > 0 {
			rp.ghostUntil[rq.q[o]] = now + float64(g)
		}
	}
	if !rq.hedged {
		rp.work += rp.lat[rp.order[k]]
	}
}

// meanDelay is the mean delay in force over the requests that had one.
func (rp *replay) meanDelay() time.Duration {
	if rp.delayN == 0 {
		return hedge.Never
	}
	return time.Duration(rp.delaySum / float64(rp.delayN))
}

// Place is decide.Runtime.Place: the replica the library's picker chooses
// for the copy among those not holding the primary, and its load.
func (rp *replay) Place(time.Duration) (replica, load int, byReport bool) {
	rq := &rp.reqs[rp.cur]
	q := rp.picker.Pick(rp.replicas, rq.q[:1], rp.load, rp.r.Uint64())
	if q < 0 {
		return -1, -1, false
	}
	return q, rp.load(q), false // a recorded sample holds no servers' reports
}

// Evidence is decide.Runtime.Evidence: whether the primary waits behind
// earlier copies on its replica (decide.Behind).
func (rp *replay) Evidence() decide.Evidence {
	rq := &rp.reqs[rp.cur]
	return decide.Behind(rq.ahead, rp.answered[rq.q[0]]-rq.leftAt)
}

// Launch is decide.Runtime.Launch: the copy goes to replica q at now and
// draws its latency from its moment.
func (rp *replay) Launch(now time.Duration, q int, g decide.Grant) bool {
	if g.Shadow() {
		return true // not in the zero Config: nothing is sent
	}
	k := rp.cur
	rq := &rp.reqs[k]
	if q < 0 {
		if q = rp.picker.Pick(rp.replicas, rq.q[:1], rp.load, rp.r.Uint64()); q < 0 {
			return false
		}
	}
	at := float64(now)
	x, dk := rp.lat[rp.order[k]], at-rp.ts[k]
	ts, order := rp.ts, rp.order
	if rp.rec != nil {
		ts, order = rp.byRep[q].ts, rp.byRep[q].order
	}
	pool := momentPool(rp.e, ts, order, rp.lat, at, float64(rq.plan.Delay)/2)
	rp.hedged = append(rp.hedged, momentCopy{x, dk, pool})
	rp.work += dk + 2*pool.meanMin(x-dk)
	rq.hedged = true
	rq.q[1], rq.live[1] = q, true
	rp.addCopy(q)
	rp.push(at+pool.xs[rp.r.IntN(len(pool.xs))], evAnswer, k, 1)
	return true
}

// Refused is decide.Runtime.Refused: the refusal is counted, and a copy
// refused busy although the replica picked for it is idle is counted as
// held back by the pause (too few primaries found an idle replica).
func (rp *replay) Refused(_ time.Duration, why hedge.Refusal, placed int) {
	if int(why) < len(rp.refused) {
		rp.refused[why]++
	}
	if why == hedge.RefusedBusy && placed >= 0 && rp.load(placed) == 0 {
		rp.paused++
	}
}

// Arm is decide.Runtime.Arm: the request's timer fires at at, late by the
// send lag, unless the request has asked maxAsks times.
func (rp *replay) Arm(at time.Duration) {
	rq := &rp.reqs[rp.cur]
	if rq.asks >= maxAsks {
		return
	}
	rq.asks++
	rp.push(float64(at)+rp.lag, evTimer, rp.cur, 0)
}

// heldBack describes the refusals of a replay of the default: how many
// times the library's rules held a copy back, by rule. A copy refused for
// want of an idle replica is asked for again, and each refusal counts.
func heldBack(held [decide.NumRefusals]int) string {
	var parts []string
	for why, n := range held {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%v %d times", hedge.Refusal(why), n))
		}
	}
	if len(parts) == 0 {
		return "In the default line's replay, no rule held a copy back."
	}
	return "In the default line's replay, the library's rules held copies back: " + strings.Join(parts, ", ") +
		" (busy: no idle replica, or the pause while fewer than a quarter of primaries find one; payoff: hedges on the same evidence were not paying; budget: no token; each ask counts)."
}
