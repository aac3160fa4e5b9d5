// Package decide is the hedging decision, without a clock. A [Policy]
// says when the next copy of a request is due, whether it may go and, if
// not, why (a [Refusal]). Its driver ([Policy.Schedule], [Policy.Fire]
// and [Policy.Try]) applies those rules to a request in one sequence.
//
// Package hedge makes a Policy from a hedge.Config and drives it on the
// wall clock (hedge.Do). The simulator in package sim drives the very
// same Policy on virtual time. Advise replays it on a recorded sample.
// Each engine supplies a [Runtime]: where a copy goes, how it is sent,
// how a timer is armed. Times are durations from an origin the engine
// chooses. Nothing here reads a clock, starts a goroutine or allocates
// per request.
//
// A running Hedger's live settings (hedge.Hedger.SetLive) reach a request
// through its Plan ([Live]): a more cautious mode, MaxAttempts, a budget
// and a cap on hedges per second ([Rate], RefusedRate). A request reads
// them once, when it begins. A nil Live is the Policy's own settings, as
// in the simulator.
//
// It is internal: users configure the decision through hedge.Config and
// read its effects in hedge.Stats. The package exists so that the
// engines of this module share one copy of every rule.
//
// # The payoff rule
//
// The payoff rule is what hedge.Config.PayoffWinRate sets. It stops
// hedges that do not pay, and keeps those that do.
//
// Hedges are classed by what the client saw of the primary's replica
// when the hedge came due ([Evidence]). A primary waiting behind earlier
// work of this client there is held up by it: its copy may go at the
// delay. A primary at the head of this client's work there may be slow
// itself, stuck with its server, or queued behind other clients' work,
// which the client cannot see. Its copy waits until the primary has
// waited [HeadDelays] delays (RefusedHead), or until the sibling
// trigger calls a fan-out's leaf a straggler (Plan.HeadAt).
//
// For each class the Policy keeps running averages over about the last
// 32 hedges: the share that won, and the time losers ran for nothing,
// per hedge and as a share of the delay (or of the time the primary had
// waited when its copy went, if that was shorter, as for a straggler
// whose siblings had answered). A class goes on while that
// waste is at most 0.4 of a delay times one plus its win rate. It also
// goes on while at least PayoffWinRate of its hedges win. Otherwise it
// is refused (RefusedPayoff).
//
// A refused class still sends a probe now and then (one in 5,000
// requests), which tells when it pays again. A probe whose copy wins in
// under half the time its primary had waited starts the class over. So
// a burst of slowness on every replica, whose copies all lost, does not
// keep hedging off after the burst.
//
// A new class starts just short of paying: a win rate of 1/4 and a
// waste of 0.6, weighed as four hedges. Its first hedges go at about
// one in four, and their outcomes decide.
//
// So where copies take as long as their primaries (big requests),
// hedging stops by itself. Where a slow server is the cause, it goes on.
// The default, [DefaultPayoffWinRate], is 1: no class goes on for
// winning alone. With many clients on the replicas, copies that jump
// other clients' queues win for their requests, while the work they add
// lands on everyone's (docs/default.md, "Many clients"). A negative
// PayoffWinRate turns the rule and the head wait off.
//
// # Cost
//
// Every request pays Begin, Schedule and Succeeded; only a request whose
// timer fires pays Fire (Check, Admit, the Runtime's Place and Launch).
// On the 2-core test machine, one core, no engine (BenchmarkDecideNoHedge
// and BenchmarkDecideHedge): about 20 ns for a request that does not
// hedge, and 45-55 ns for one whose hedge is asked for. No allocation.
//
// That is a small share of either engine:
//
//   - hedge.Do without a hedge, about 200-250 ns of CPU on the loaded
//     test machine: the two clock reads (start and end) take a quarter,
//     the primary's context (the one allocation, 24 bytes) and the write
//     barriers a sixth, the timer queue a fourteenth, the pooled call's
//     Get, Put and reset a twentieth, its one latency record a
//     thirtieth. The decision takes about 10 ns, 5%.
//   - the simulator (BenchmarkRunYardstick, about 240 ns per request):
//     this package, the Picker included, is about a sixth; the event
//     loop, its queues and random draws are the rest. The simulator
//     reads a queue's load for the Picker in place (Picker.Pair and
//     Choose), with no call through a function value.
//
// So keep what runs on every request to loads of fields that requests do
// not write: no allocation, no map, no interface call but the
// Estimator's, no compare-and-swap unless a count changes. A Budget is a
// concrete type for that reason, and the Policy keeps the counts that
// requests write (spare, inFlight) on cache lines of their own. Work that
// only a hedge needs (the payoff rule, placement, the grant) runs in
// Fire. BENCHMARKS.md ("The decision's cost") has the commands, and the
// numbers before and after each change.
package decide

import (
	"math"
	"math/rand/v2"
	"time"
)

// DefaultPayoffWinRate is the payoff rule's win rate when
// hedge.Config.PayoffWinRate is zero: no class of hedges goes on for
// winning alone (see the package doc).
const DefaultPayoffWinRate = 1

// Never is a time, or a delay, that does not come: hedge.Never.
const Never = time.Duration(math.MaxInt64)

// Mode is a request's mode, with hedge.Mode's values (package hedge checks
// that they agree when it compiles).
type Mode int32

const (
	// On sends copies.
	On Mode = iota
	// Shadow decides and counts without sending.
	Shadow
	// Off sends the primary alone.
	Off
)

// Estimator is the delay of an operation class, learnt from its
// latencies: the state a hedge.Delay keeps for each class. Time reaches
// it only as arguments (now is a monotonic reading); it never reads the
// clock.
type Estimator interface {
	// Delay returns how long after a copy is sent the next copy should
	// go, or Never.
	Delay(now time.Duration) time.Duration
	// Observe records the latency of one completed request, as the
	// engine chooses it (hedge records the primary's own).
	Observe(now, latency time.Duration)
}

// DelayOf, set by package hedge, returns a hedge.Delay (as any) whose
// every operation class reads est: a delay that the module's tests can
// switch while their Hedger runs.
var DelayOf func(est Estimator) any

// AddSat returns t + d, or Never when that would reach or pass Never.
func AddSat(t, d time.Duration) time.Duration {
	if d >= Never-t {
		return Never
	}
	return t + d
}

// uniform draws from r in [0, 1), or from the global source when r is nil.
func uniform(r *rand.Rand) float64 {
	if r == nil {
		return rand.Float64()
	}
	return r.Float64()
}
