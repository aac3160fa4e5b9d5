package hedge

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
)

// Refusal says why a Policy did not let a copy go. The zero value, Allowed,
// means it did.
type Refusal uint8

const (
	// Allowed: the copy may go.
	Allowed Refusal = iota
	// RefusedAttempts: MaxAttempts copies were sent already.
	RefusedAttempts
	// RefusedDeadline: the caller's deadline has passed, or (for a copy
	// sent on a delay) is nearer than the delay.
	RefusedDeadline
	// RefusedReplicas: every replica already holds a copy of the request.
	RefusedReplicas
	// RefusedInFlight: MaxHedgesInFlight hedges are running.
	RefusedInFlight
	// RefusedBudget: the budget has no token.
	RefusedBudget
	// RefusedMode: the request goes once (mode Off, MaxAttempts 1, or a
	// write without an idempotency key).
	RefusedMode
	// RefusedPushback: a server asked for no further copy of the request
	// (PushbackAfter with a negative delay).
	RefusedPushback
)

// String names the refusal.
func (r Refusal) String() string {
	switch r {
	case Allowed:
		return "allowed"
	case RefusedAttempts:
		return "attempts"
	case RefusedDeadline:
		return "deadline"
	case RefusedReplicas:
		return "replicas"
	case RefusedInFlight:
		return "in flight"
	case RefusedBudget:
		return "budget"
	case RefusedMode:
		return "mode"
	case RefusedPushback:
		return "pushback"
	}
	return "Refusal(?)"
}

// Policy is the hedging decision of a Hedger, without a clock: when the
// next copy of a request is due, whether it may go and, if not, why. It
// holds what the requests of a Hedger share (the budget and its Shadow
// twin, the count of hedges in flight, the mode and rollout); each request
// keeps its own Plan.
//
// The live engine (Do) drives a Policy on the wall clock and the simulator
// in package sim drives one on virtual time: times are arguments, always
// measured from the same arbitrary origin, and the Policy never reads a
// clock. Every rule of a call that is about whether and when, rather than
// about running copies, is here and nowhere else.
//
// A Policy is safe for concurrent use. Make one with NewPolicy, or get a
// Hedger's with Hedger.Policy.
type Policy struct {
	delay       Delay
	budget      *Budget
	shadowBud   *Budget // Shadow requests spend from a twin, never from the real budget
	maxAttempts int
	maxInFlight int64
	inFlight    atomic.Int64
	replicas    int
	sw          switchboard
}

// NewPolicy validates cfg and returns its Policy. Only the fields that
// decide are used: Delay, Budget, NoBudget, MaxAttempts, MaxHedgesInFlight,
// Replicas, Mode and Rollout; the others belong to the engine that runs
// the copies.
func NewPolicy(cfg Config) (*Policy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newPolicy(cfg), nil
}

// newPolicy applies the defaults to a valid cfg.
func newPolicy(cfg Config) *Policy {
	p := &Policy{
		delay:       cfg.Delay,
		budget:      cfg.Budget,
		maxAttempts: cfg.MaxAttempts,
		maxInFlight: int64(cfg.MaxHedgesInFlight),
		replicas:    cfg.Replicas,
	}
	if p.delay == nil {
		p.delay = Percentile{}
	}
	if p.maxAttempts == 0 {
		p.maxAttempts = 2
	}
	if p.budget == nil && !cfg.NoBudget {
		p.budget = DefaultBudget()
	}
	p.shadowBud = p.budget.twin()
	p.sw.mode = cfg.ModeVar
	if p.sw.mode == nil {
		p.sw.mode = new(ModeVar)
		p.sw.mode.v.Store(int32(cfg.Mode))
	}
	rollout := cfg.Rollout
	if rollout == 0 {
		rollout = 1
	}
	_ = p.sw.setRollout(rollout) // validated
	return p
}

// DefaultBudget returns a fresh copy of the budget a zero Config gets:
// NewBudget(0.1, 10), hedges on at most 10% of requests with bursts of 10.
func DefaultBudget() *Budget {
	b, _ := NewBudget(0.1, 10)
	return b
}

// String describes the decision in a few words, for labels and logs:
// "p95 of the last 1000 primary latencies (none before 100), budget
// ratio(0.1, burst=10), at most 2 copies", then the mode and rollout when
// they are not On and 1.
func (p *Policy) String() string {
	var b strings.Builder
	b.WriteString(describeDelay(p.delay))
	if p.budget == nil {
		b.WriteString(", no budget")
	} else {
		fmt.Fprintf(&b, ", budget %v", p.budget)
	}
	fmt.Fprintf(&b, ", at most %d copies", p.maxAttempts)
	if p.maxInFlight > 0 {
		fmt.Fprintf(&b, ", at most %d hedges in flight", p.maxInFlight)
	}
	if m := p.sw.mode.Mode(); m != On {
		fmt.Fprintf(&b, ", mode %v", m)
	}
	if f := math.Float64frombits(p.sw.rollout.Load()); f < 1 {
		fmt.Fprintf(&b, ", rollout %g", f)
	}
	return b.String()
}

// describeDelay names a Delay.
func describeDelay(d Delay) string {
	switch d := d.(type) {
	case Fixed:
		return "fixed delay " + FormatDelay(time.Duration(d))
	case Percentile:
		d = d.withDefaults()
		return fmt.Sprintf("p%g of the last %d primary latencies (none before %d)", d.P, d.Window, d.MinSamples)
	case *Percentile:
		return describeDelay(*d)
	}
	return fmt.Sprintf("%T delay", d)
}

// Delay returns the Delay the Policy's estimators are made from.
func (p *Policy) Delay() Delay { return p.delay }

// MaxAttempts returns the most copies of one request.
func (p *Policy) MaxAttempts() int { return p.maxAttempts }

// Budget returns the budget in force (nil when unlimited).
func (p *Policy) Budget() *Budget { return p.budget }

// Plan is the decision state of one request, started by Policy.Begin. Its
// fields are read-only for the engine; the Policy's methods update them.
type Plan struct {
	// Start is when the primary was sent.
	Start time.Duration
	// Delay is the delay in force for this request (Never for none).
	Delay time.Duration
	// Deadline is the caller's deadline, or Never.
	Deadline time.Duration
	// Copies counts the copies sent, the primary included (in Shadow,
	// those that would have been).
	Copies int
	// Mode is the request's mode: On sends copies, Shadow decides and
	// counts without sending, Off sends the primary alone.
	Mode Mode
	// Stopped is set when a server asked for no further copy.
	Stopped bool
}

// Single reports whether the request goes once, whatever happens.
func (pl *Plan) Single() bool { return pl.Mode == Off }

// Begin starts the Plan of a request whose primary is sent at now: it
// snapshots the mode (applying the rollout with a draw from r, nil for the
// global source), credits the budget for the request, and reads the delay
// from est, the request's operation class's estimator. deadline is the
// caller's deadline, or Never. once marks a request that must not be
// copied (a write without an idempotency key).
func (p *Policy) Begin(pl *Plan, now time.Duration, est Estimator, deadline time.Duration, once bool, r *rand.Rand) {
	pl.Start, pl.Deadline, pl.Copies, pl.Stopped = now, deadline, 1, false
	if once || p.maxAttempts == 1 {
		pl.Mode, pl.Delay = Off, Never
		return
	}
	if pl.Mode = p.mode(r); pl.Mode == Off {
		pl.Delay = Never
		return
	}
	if b := p.bucket(pl); b != nil {
		b.OnRequest()
	}
	pl.Delay = est.Delay(now)
}

// mode snapshots the mode for one request, applying the rollout.
func (p *Policy) mode(r *rand.Rand) Mode {
	m := Mode(p.sw.mode.v.Load())
	if m == On && p.sw.partial.Load() {
		if f := math.Float64frombits(p.sw.rollout.Load()); uniform(r) >= f {
			return Shadow
		}
	}
	return m
}

func uniform(r *rand.Rand) float64 {
	if r == nil {
		return rand.Float64()
	}
	return r.Float64()
}

// bucket is the budget a request spends from.
func (p *Policy) bucket(pl *Plan) *Budget {
	if pl.Mode == Shadow {
		return p.shadowBud
	}
	return p.budget
}

// Due returns when the next copy of the request is due if none fails
// before: the delay after from (when the last copy went), or Never. A
// request whose deadline is nearer than that has no copy due; Due reports
// it with RefusedDeadline, once, for the engine to count.
func (p *Policy) Due(pl *Plan, from time.Duration) (time.Duration, Refusal) {
	if pl.Mode == Off || pl.Stopped || pl.Copies >= p.maxAttempts {
		return Never, Allowed
	}
	at := addSat(from, pl.Delay)
	if at == Never {
		return Never, Allowed
	}
	if at > pl.Deadline {
		return Never, RefusedDeadline
	}
	return at, Allowed
}

// Next decides whether one more copy of the request may go at now, and
// counts it in the Plan if so. afterFailure marks a copy that replaces one
// that failed with a retryable error: it is not a bet on slowness, so only
// a deadline already past refuses it, not one nearer than the delay.
//
// The checks run in a fixed order, and the first that fails is the
// refusal: the request's mode, MaxAttempts, the deadline, a free replica,
// MaxHedgesInFlight, the budget. An allowed hedge holds an in-flight slot
// (when MaxHedgesInFlight is set, and not in Shadow) until Done, and has
// spent a budget token.
func (p *Policy) Next(pl *Plan, now time.Duration, afterFailure bool) Refusal {
	switch {
	case pl.Mode == Off:
		return RefusedMode
	case pl.Copies >= p.maxAttempts:
		return RefusedAttempts
	case pl.Stopped:
		return RefusedPushback
	case now >= pl.Deadline || (!afterFailure && pl.Delay != Never && addSat(now, pl.Delay) > pl.Deadline):
		return RefusedDeadline
	case p.replicas > 0 && pl.Copies >= p.replicas:
		return RefusedReplicas
	}
	slot := p.maxInFlight > 0 && pl.Mode != Shadow
	if slot {
		for {
			n := p.inFlight.Load()
			if n >= p.maxInFlight {
				return RefusedInFlight
			}
			if p.inFlight.CompareAndSwap(n, n+1) {
				break
			}
		}
	}
	if !p.bucket(pl).TryHedge() {
		if slot {
			p.inFlight.Add(-1)
		}
		return RefusedBudget
	}
	pl.Copies++
	return Allowed
}

// Hold applies a server's pushback received at now (see PushbackAfter):
// with a negative after, no further copy of the request goes; otherwise
// the next copy is due after that long, in place of the delay, and the
// copies after it follow the delay again. It returns when the next copy
// is due, or Never.
func (p *Policy) Hold(pl *Plan, now, after time.Duration) time.Duration {
	if after < 0 {
		pl.Stopped = true
		return Never
	}
	if pl.Mode == Off || pl.Copies >= p.maxAttempts {
		return Never
	}
	return addSat(now, after)
}

// HoldsSlot reports whether a hedge allowed for this request holds an
// in-flight slot, to be given back with Done when it returns.
func (p *Policy) HoldsSlot(pl *Plan) bool { return p.maxInFlight > 0 && pl.Mode == On }

// Done gives back the in-flight slot of a hedge copy that returned (one
// for which HoldsSlot was true when it went).
func (p *Policy) Done() { p.inFlight.Add(-1) }

// InFlight returns the hedges holding an in-flight slot now.
func (p *Policy) InFlight() int64 { return p.inFlight.Load() }

// Failed records a copy that failed in a way another copy could fix (a
// retryable error), or a pushback, before the request was decided: a
// throttle budget is debited for it, as gRPC's is.
func (p *Policy) Failed(pl *Plan) {
	if pl.Mode == On {
		p.budget.OnFailure()
	}
}

// Succeeded records a request that succeeded: a throttle budget is
// credited for it.
func (p *Policy) Succeeded(pl *Plan) {
	if pl.Mode == On {
		p.budget.OnSuccess()
	}
}

// PrimarySample returns what the request's delay estimator is fed when
// its primary copy ends at now (see Percentile for why): its latency if it
// succeeded, whether it won or not; if it failed or was cancelled after a
// hedge won at hedgeWon, the censored lower bound hedgeWon - Start; and no
// sample for a primary that failed otherwise (hedgeWon is Never when no
// hedge won). censored is set for the lower bound.
func (pl *Plan) PrimarySample(now time.Duration, succeeded bool, hedgeWon time.Duration) (sample time.Duration, censored, ok bool) {
	switch {
	case succeeded:
		return now - pl.Start, false, true
	case hedgeWon != Never:
		return hedgeWon - pl.Start, true, true
	}
	return 0, false, false
}
