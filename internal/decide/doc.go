// Package decide is the hedging decision, without a clock: the Policy
// that says when the next copy of a request is due, whether it may go
// and, if not, why (a Refusal), and the driver (Policy.Schedule, Fire and
// Try) that applies those rules to a request in one sequence.
//
// Package hedge makes a Policy from a hedge.Config and drives it on the
// wall clock (hedge.Do); the simulator in package sim drives the very same
// Policy on virtual time, and advise replays it on a recorded sample.
// Each engine supplies a Runtime: where a copy goes, how it is sent, how a
// timer is armed. Times are durations from an origin the engine chooses;
// nothing here reads a clock, starts a goroutine or allocates per request.
//
// It is internal: users configure the decision through hedge.Config and
// read its effects in hedge.Stats. The package exists so that the engines
// of this module share one copy of every rule.
package decide

import (
	"math"
	"math/rand/v2"
	"time"
)

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
// latencies: hedge.Estimator.
type Estimator interface {
	Delay(now time.Duration) time.Duration
	Observe(now, latency time.Duration)
}

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
