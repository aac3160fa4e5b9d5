package decide

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
	// RefusedBusy: the replica the copy would go to has more requests of
	// this Hedger in flight than Config.MaxReplicaLoad allows (by default,
	// it is not idle): no spare capacity to hedge into.
	RefusedBusy
	// RefusedPayoff: hedges sent on the same evidence (see Evidence) have
	// not been winning often enough to pay for themselves
	// (Config.PayoffWinRate).
	RefusedPayoff
	// RefusedFanOut: the copy is of a leaf of a fan-out request whose own
	// budget or cap on extra copies is spent (see Fan).
	RefusedFanOut
	// RefusedHead: the primary is at the head of this client's requests on
	// its replica (EvidenceHead) and has not yet waited HeadDelays delays;
	// the copy is asked for again when it has (see HeadAt).
	RefusedHead
	// RefusedRate: the cap on hedges per second (Live.Rate) is spent.
	RefusedRate
)

// NumRefusals is one more than the largest Refusal: the size of an array
// indexed by Refusal.
const NumRefusals = int(RefusedRate) + 1

// String names the refusal in snake_case: the one name it has in every
// report (metric labels, hedgectl's JSON, logs).
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
		return "in_flight"
	case RefusedBudget:
		return "budget"
	case RefusedMode:
		return "mode"
	case RefusedPushback:
		return "pushback"
	case RefusedBusy:
		return "busy"
	case RefusedPayoff:
		return "payoff"
	case RefusedFanOut:
		return "fan_out"
	case RefusedHead:
		return "head"
	case RefusedRate:
		return "rate"
	}
	return "Refusal(?)"
}

// Policy is the hedging decision of a Hedger, without a clock: when the
// next copy of a request is due, whether it may go and, if not, why. It
// holds what the requests of a Hedger share (the budget and its Shadow
// twin, the count of hedges in flight, the mode and rollout, the
// spare-capacity and payoff rules' state); each request keeps its own Plan.
//
// The live engine (hedge.Do) drives a Policy on the wall clock and the
// simulator in package sim drives one on virtual time: times are
// arguments, always measured from the same arbitrary origin, and the
// Policy never reads a clock. Every rule of a call that is about whether
// and when, rather than about running copies, is here and nowhere else;
// and so is the sequence that applies them to a request (Schedule, Fire
// and Try), which each engine drives through a Runtime of its own.
//
// A Policy is safe for concurrent use. Package hedge makes them from a
// hedge.Config (FromConfig, and each Hedger's own).
type Policy struct {
	// Read on every request, written rarely: together, apart from what
	// requests write.
	budget      *Budget // nil: unlimited
	shadowBud   *Budget // Shadow requests spend from a twin, never from the real budget
	maxAttempts int
	maxInFlight int64
	replicas    int
	maxLoad     int // most requests in flight on a hedge's replica; < 0: no check
	payoff      *payoff
	mode        *atomic.Int32 // the Mode in force
	rollout     atomic.Uint64 // math.Float64bits of the fraction of On requests
	partial     atomic.Bool   // rollout < 1: a request needs a draw
	horizon     atomic.Int64  // how long a server's load report counts (see Fresh), 0 before any delay
	about       string        // the delay and budget, described for String
	newEst      func() Estimator

	// Written by requests: each on a cache line of its own, so that a
	// write by one request does not evict what every other reads.
	_        [cacheLine]byte
	spare    atomic.Int64 // share of primaries placed on an idle replica, fixed point (spareOne)
	_        [cacheLine - 8]byte
	inFlight atomic.Int64
	_        [cacheLine - 8]byte
}

// cacheLine is the size of a cache line on the machines the module runs
// on, most of them: what keeps two fields apart.
const cacheLine = 64

// Config is what a Policy is made of, with every default already applied
// (package hedge applies them, from its Config, in one place).
type Config struct {
	// Budget is the budget hedges spend from, and Shadow its twin for
	// Shadow requests; both nil for no budget.
	Budget, Shadow *Budget
	// MaxAttempts is the most copies of one request, at least 1.
	MaxAttempts int
	// MaxInFlight is the most hedges in flight at once, 0 for no limit.
	MaxInFlight int
	// Replicas is the number of replicas, 0 when the engine does not pick
	// them.
	Replicas int
	// MaxLoad is the spare-capacity rule's most requests in flight on a
	// hedge's replica; negative turns the rule off.
	MaxLoad int
	// PayoffWinRate turns the payoff rule and the head wait on (positive)
	// or off (0 or negative); a class of hedges that wins at least this
	// share goes on whatever its waste (see payoff).
	PayoffWinRate float64
	// Mode is where the mode in force is read, once per request.
	Mode *atomic.Int32
	// Rollout is the share of On requests hedged, in [0, 1].
	Rollout float64
	// About describes the delay and budget, for String.
	About string
	// NewEstimator returns the delay estimator of a new operation class.
	NewEstimator func() Estimator
}

// FromConfig returns the Policy of a hedge.Config (passed as any, since
// this package cannot name it), validated and with its defaults, as
// hedge.New makes a Hedger's. Package hedge sets it when it is
// initialised, so that the simulator and the tools that drive a Policy
// without a Hedger decide as a Hedger with the same Config does.
var FromConfig func(cfg any) (*Policy, error)

// New returns the Policy of cfg.
func New(cfg Config) *Policy {
	p := &Policy{
		budget:      cfg.Budget,
		shadowBud:   cfg.Shadow,
		maxAttempts: cfg.MaxAttempts,
		maxInFlight: int64(cfg.MaxInFlight),
		replicas:    cfg.Replicas,
		maxLoad:     cfg.MaxLoad,
		payoff:      newPayoff(cfg.PayoffWinRate),
		mode:        cfg.Mode,
		about:       cfg.About,
		newEst:      cfg.NewEstimator,
	}
	if p.replicas == 0 {
		p.maxLoad = -1 // no replica's load to see
	}
	if p.mode == nil {
		p.mode = new(atomic.Int32)
	}
	p.spare.Store(spareOne)
	_ = p.SetRollout(cfg.Rollout)
	return p
}

// SetRollout sets the share of On requests that are hedged; the others
// run in Shadow as the control group (Plan.Holdout).
func (p *Policy) SetRollout(f float64) error {
	if math.IsNaN(f) || f < 0 || f > 1 {
		return fmt.Errorf("hedge: rollout %v is outside [0, 1]: use e.g. 0.01 to hedge 1%% of requests and shadow the rest", f)
	}
	p.rollout.Store(math.Float64bits(f))
	p.partial.Store(f < 1)
	return nil
}

// Rollout returns the share of On requests that are hedged.
func (p *Policy) Rollout() float64 { return math.Float64frombits(p.rollout.Load()) }

// String describes the decision in a few words, for labels and logs:
// "p95 of the last 1000 primary latencies (none before 100), budget
// ratio(0.1, burst=10), at most 2 copies", then the rollout when it is
// not 1 (the mode is the Hedger's to describe: see hedge.Hedger.String).
func (p *Policy) String() string {
	var b strings.Builder
	b.WriteString(p.about)
	fmt.Fprintf(&b, ", at most %d copies", p.maxAttempts)
	if p.maxInFlight > 0 {
		fmt.Fprintf(&b, ", at most %d hedges in flight", p.maxInFlight)
	}
	if p.payoff != nil {
		fmt.Fprintf(&b, ", %v", p.payoff)
	}
	switch {
	case p.maxLoad == 0:
		b.WriteString(", hedges only to an idle replica")
	case p.maxLoad > 0:
		fmt.Fprintf(&b, ", hedges only to a replica with at most %d in flight", p.maxLoad)
	}
	if f := p.Rollout(); f < 1 {
		fmt.Fprintf(&b, ", rollout %g", f)
	}
	return b.String()
}

// NewEstimator returns the delay estimator of a new operation class, to
// pass to Begin for each of its requests and to feed with the latencies
// that Plan.PrimarySample gives.
func (p *Policy) NewEstimator() Estimator { return p.newEst() }

// MaxAttempts returns the most copies of one request.
func (p *Policy) MaxAttempts() int { return p.maxAttempts }

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
	// Evidence is what the engine saw when the first hedge went (see
	// Admit); a win is credited to hedges of that kind.
	Evidence Evidence

	// HedgeAt is when the first hedge went (Never before).
	HedgeAt time.Duration
	// Fan is the fan-out request the request is a leaf of, or nil. The
	// engine sets it after Begin, for every request (Begin leaves it).
	Fan *Fan
	// Holdout marks a request that the rollout kept in Shadow while the
	// mode is On: one of the control group, whose latency is what the
	// hedged requests' would be without hedging (Stats.Holdout).
	Holdout bool

	// Live is what a running Hedger's live settings change for the
	// request (see Live), or nil. The engine sets it before Begin, which
	// reads it once.
	Live *Live

	max     int           // the most copies of the request (MaxAttempts, or Live's)
	retry   bool          // the copy being decided replaces one that failed
	held    bool          // the next copy is due after a server's pushback (Hold): it replaces a copy that failed
	checkAt time.Duration // when Check ran
	probe   bool          // the first hedge went on a payoff probe token
}

// Single reports whether the request goes once, whatever happens.
func (pl *Plan) Single() bool { return pl.Mode == Off }

// HeadAt returns when a copy of a primary at the head of this client's
// requests on its replica may go: once the primary has waited HeadDelays
// delays (Never when no copy is due; at once with a delay of zero), or,
// for a leaf of a fan-out, once the sibling trigger calls it a straggler
// if that is sooner: its siblings on other replicas have answered, which
// a slow replica explains and work queued everywhere does not.
func (pl *Plan) HeadAt() time.Duration {
	at := Never
	switch {
	case pl.Delay <= 0:
		at = pl.Start
	case pl.Delay != Never:
		at = AddSat(pl.Start, time.Duration(min(float64(pl.Delay)*HeadDelays, float64(Never/2))))
	}
	return min(at, pl.straggleAt())
}

// straggleAt returns when the sibling trigger of the request's fan-out
// calls it a straggler, or Never for a request that is no leaf or while
// the trigger has not started.
func (pl *Plan) straggleAt() time.Duration {
	if pl.Fan == nil {
		return Never
	}
	return AddSat(pl.Start, pl.Fan.Straggler())
}

// Begin starts the Plan of a request whose primary is sent at now: it
// snapshots the mode (applying the rollout with a draw from r, nil for the
// global source), credits the budget for the request, and reads the delay
// from est, the request's operation class's estimator. deadline is the
// caller's deadline, or Never. once marks a request that must not be
// copied (a write without an idempotency key).
func (p *Policy) Begin(pl *Plan, now time.Duration, est Estimator, deadline time.Duration, once bool, r *rand.Rand) {
	pl.Start, pl.Deadline, pl.Copies, pl.Stopped, pl.Evidence, pl.HedgeAt, pl.Holdout, pl.held, pl.probe = now, deadline, 1, false, EvidenceNone, Never, false, false, false
	pl.retry, pl.checkAt = false, 0
	pl.max = pl.Live.maxAttempts(p)
	if once || pl.max == 1 {
		pl.Mode, pl.Delay = Off, Never
		return
	}
	pl.Mode, pl.Holdout = p.draw(r)
	if pl.Live != nil && pl.Live.Mode > pl.Mode {
		pl.Mode, pl.Holdout = pl.Live.Mode, false
	}
	if pl.Mode == Off {
		pl.Delay = Never
		return
	}
	if b := p.bucket(pl); b != nil {
		b.OnRequest()
	}
	if pl.Mode == On {
		p.payoff.request()
	}
	pl.Evidence = EvidenceNone
	pl.Delay = est.Delay(now)
	p.setHorizon(pl.Delay)
}

// draw snapshots the mode for one request, applying the rollout, and
// reports whether the rollout held the request out (Plan.Holdout).
func (p *Policy) draw(r *rand.Rand) (m Mode, holdout bool) {
	m = Mode(p.mode.Load())
	if m == On && p.partial.Load() {
		if f := math.Float64frombits(p.rollout.Load()); uniform(r) >= f {
			return Shadow, true
		}
	}
	return m, false
}

// bucket is the budget a request spends from, or nil for none.
func (p *Policy) bucket(pl *Plan) *Budget {
	if l := pl.Live; l != nil && l.Budget != nil {
		if pl.Mode == Shadow {
			return l.Shadow
		}
		return l.Budget
	}
	if pl.Mode == Shadow {
		return p.shadowBud
	}
	return p.budget
}

// Due returns when the next copy of the request is due if none fails
// before: the delay after from (when the last copy went), or Never. A
// leaf of a fan-out (Plan.Fan) that has sent no copy yet is due earlier
// when its siblings say it is a straggler (Fan.Straggler after it went),
// but never before from. A request whose deadline is nearer than that has no copy
// due; Due reports it with RefusedDeadline, once, for the engine to
// count.
func (p *Policy) Due(pl *Plan, from time.Duration) (time.Duration, Refusal) {
	if pl.Mode == Off || pl.Stopped || pl.Copies >= pl.max {
		return Never, Allowed
	}
	at := AddSat(from, pl.Delay)
	if pl.Copies == 1 {
		if s := pl.straggleAt(); s < at {
			at = max(s, from)
		}
	}
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
// Next is Check then Admit, for an engine that does not know where the
// copy would go nor what its primary's replica is doing. An engine that
// picks replicas calls Check, picks the replica, then calls Admit with its
// load and the evidence, so that the spare-capacity and payoff rules see
// them.
func (p *Policy) Next(pl *Plan, now time.Duration, afterFailure bool) Refusal {
	if why := p.Check(pl, now, afterFailure); why != Allowed {
		return why
	}
	_, why := p.Admit(pl, -1, EvidenceNone)
	return why
}

// Check runs the first checks of a further copy, those that do not
// depend on where it would go, in a fixed order (the first that fails is
// the refusal): the request's mode (Off, or live settings stopped since
// it began: see Live.Stop), MaxAttempts, a server's pushback, the
// deadline, a free replica. It takes nothing: a copy that passes must go
// through Admit.
func (p *Policy) Check(pl *Plan, now time.Duration, afterFailure bool) Refusal {
	afterFailure = afterFailure || pl.held
	pl.retry, pl.held, pl.checkAt = afterFailure, false, now
	switch {
	case pl.Mode == Off || pl.Live.stop():
		return RefusedMode
	case pl.Copies >= pl.max:
		return RefusedAttempts
	case pl.Stopped:
		return RefusedPushback
	case now >= pl.Deadline || (!afterFailure && pl.Delay != Never && AddSat(now, pl.Delay) > pl.Deadline):
		return RefusedDeadline
	case p.replicas > 0 && pl.Copies >= p.replicas:
		return RefusedReplicas
	}
	return Allowed
}

// Failover decides whether a copy may go at now in place of one that
// never reached its server (see ErrNotSent), and counts it in the Plan if
// so. Only Check's rules apply, as for any copy after a failure: such a
// copy is the request itself, sent again, and takes no budget token nor
// in-flight slot, and the spare-capacity and payoff rules, which are about
// bets on slowness, do not see it.
func (p *Policy) Failover(pl *Plan, now time.Duration) Refusal {
	if why := p.Check(pl, now, true); why != Allowed {
		return why
	}
	pl.Copies++
	return Allowed
}

// ChecksLoad reports whether Admit looks at the load of the copy's
// replica: whether an engine should pick the replica before Admit.
func (p *Policy) ChecksLoad() bool { return p.maxLoad >= 0 }

// Admit runs the last checks of a copy that passed Check, in order:
//
//   - the spare-capacity rule (Config.MaxReplicaLoad): load is the
//     requests of this Hedger in flight on the replica the copy would go
//     to, or -1 when unknown, which passes;
//   - the head wait (with the payoff rule): a primary at the head of
//     this client's requests on its replica (ev is EvidenceHead) must have
//     waited HeadDelays delays (see Plan.HeadAt);
//   - the payoff rule (Config.PayoffWinRate): ev is what the engine saw of
//     the primary's replica (EvidenceNone when it cannot tell), and hedges
//     sent on the same evidence must have been paying (see payoff);
//   - MaxHedgesInFlight;
//   - for a leaf of a fan-out (Plan.Fan), the fan-out's own budget and
//     cap (see Fan);
//   - the cap on hedges per second of the request's Live settings
//     (Live.Rate), for copies that are sent (not in Shadow);
//   - the budget.
//
// A copy that replaces one that failed (Check's afterFailure) is not a bet
// on slowness: the first two rules do not apply to it. An allowed copy is
// counted in the Plan, and its Grant says what it took: an in-flight slot
// (when MaxHedgesInFlight is set, and not in Shadow), to be given back
// with Done when the copy returns; a budget token; a payoff probe token.
// An engine that cannot send an allowed copy after all gives everything
// back with Grant.Undo. The spare-capacity and payoff rules apply in
// Shadow mode too, except that Shadow copies, never sent, neither spend
// nor earn payoff tokens.
func (p *Policy) Admit(pl *Plan, load int, ev Evidence) (Grant, Refusal) {
	var g Grant
	why := p.admit(pl, load, ev, &g)
	return g, why
}

// admit is Admit, filling in g (zero, and left zero on a refusal), so
// that the driver's Try neither copies a Grant back nor undoes one
// through a copy.
func (p *Policy) admit(pl *Plan, load int, ev Evidence, g *Grant) Refusal {
	bet := !pl.retry
	if bet && p.maxLoad >= 0 && (load > p.maxLoad || p.spare.Load() < minSpare*spareOne) {
		return RefusedBusy
	}
	if bet && p.payoff != nil && ev.waits() && pl.checkAt < pl.HeadAt() {
		return RefusedHead
	}
	g.p, g.pl, g.ev = p, pl, ev
	// The payoff rule measures a class's waste in delays: a copy sent at
	// once (a delay of zero) gives it nothing to learn from, and is not
	// judged by it.
	judged := bet && pl.Delay > 0
	g.paid = judged && pl.Mode == On && p.payoff != nil
	probe := false
	if g.paid {
		var ok bool
		if ok, probe = p.payoff.try(ev); !ok {
			*g = Grant{}
			return RefusedPayoff
		}
	}
	if judged && pl.Mode == Shadow && !p.payoff.pays(ev) {
		*g = Grant{}
		return RefusedPayoff
	}
	g.slot = p.maxInFlight > 0 && pl.Mode != Shadow
	if g.slot {
		for {
			n := p.inFlight.Load()
			if n >= p.maxInFlight {
				g.slot = false
				g.undo()
				*g = Grant{}
				return RefusedInFlight
			}
			if p.inFlight.CompareAndSwap(n, n+1) {
				break
			}
		}
	}
	if g.fan = pl.Fan != nil && pl.Mode != Shadow; g.fan && !pl.Fan.take() {
		g.fan = false
		g.undo()
		*g = Grant{}
		return RefusedFanOut
	}
	if r := pl.Live.rate(); r != nil && pl.Mode == On {
		if !r.take(pl.checkAt) {
			g.undo()
			*g = Grant{}
			return RefusedRate
		}
		g.rate = r
	}
	if g.bucket = p.bucket(pl); g.bucket != nil && !g.bucket.TryHedge() {
		g.bucket = nil
		g.undo()
		*g = Grant{}
		return RefusedBudget
	}
	if bet && pl.Copies == 1 {
		g.first, g.prevEv, g.prevAt, g.prevProbe = true, pl.Evidence, pl.HedgeAt, pl.probe
		pl.Evidence, pl.HedgeAt, pl.probe = ev, pl.checkAt, probe
	}
	pl.Copies++
	g.counted = true
	return Allowed
}

// Grant is what Admit took for one copy. Its zero value took nothing.
type Grant struct {
	p         *Policy
	pl        *Plan
	bucket    *Budget // the budget a token came from, or nil
	rate      *Rate   // the cap on hedges per second a token came from, or nil
	ev        Evidence
	prevEv    Evidence      // the Plan's evidence before a first hedge set it
	prevAt    time.Duration // and its HedgeAt
	prevProbe bool          // and its probe
	slot      bool          // an in-flight slot
	fan       bool          // a token and a slot of the fan-out (Plan.Fan)
	paid      bool          // a payoff probe token
	first     bool          // the request's first hedge: it set the Plan's evidence
	counted   bool          // the copy is counted in the Plan
}

// HoldsSlot reports whether the copy holds an in-flight slot
// (Config.MaxHedgesInFlight), to be given back with Policy.Done when it
// returns.
func (g Grant) HoldsSlot() bool { return g.slot }

// HoldsFanSlot reports whether the copy holds a slot of its fan-out
// request's cap (Plan.Fan), to be given back with Fan.Done when it
// returns.
func (g Grant) HoldsFanSlot() bool { return g.fan }

// Shadow reports whether the copy is one Shadow mode decides and counts
// without sending.
func (g Grant) Shadow() bool { return g.pl != nil && g.pl.Mode == Shadow }

// Undo gives back everything the admission took, for a copy an engine
// could not send after all (no replica left to take it): the in-flight
// slot, the budget token, the payoff token and the copy's place in the
// Plan, which is as it was before Admit. Call it at most once, and only
// for a copy that never went.
func (g Grant) Undo() {
	(&g).undo()
	if g.counted {
		g.pl.Copies--
		if g.first {
			g.pl.Evidence, g.pl.HedgeAt, g.pl.probe = g.prevEv, g.prevAt, g.prevProbe
		}
	}
}

// undo gives back the slot, token and payoff token g holds.
func (g *Grant) undo() {
	if g.slot {
		g.p.inFlight.Add(-1)
	}
	if g.fan {
		g.pl.Fan.give()
	}
	if g.bucket != nil {
		g.bucket.Refund()
	}
	if g.rate != nil {
		g.rate.give()
	}
	if g.paid {
		g.p.payoff.refund(g.ev)
	}
}

// Counted reports whether an engine counts a refusal (in Stats and the
// simulator's tallies): every one but those that say the request sends no
// more copies of its own accord (MaxAttempts reached, mode Off, a
// server's pushback), which are not a copy held back.
func Counted(why Refusal) bool {
	return why != Allowed && why != RefusedAttempts && why != RefusedMode && why != RefusedPushback
}

// Retries reports whether a copy refused for why may be asked for again
// later (when the next delay has passed, or for RefusedHead at the
// Plan's HeadAt), rather than never: a replica that is busy now may be
// idle then, a fan-out whose cap is full now may have a slot then
// (RefusedFanOut), a primary at the head of its replica may still be
// waiting then (RefusedHead), and a stall lasts longer than a delay.
// Other refusals are final for the request.
func (p *Policy) Retries(pl *Plan, why Refusal) bool {
	return (why == RefusedBusy || why == RefusedFanOut || why == RefusedHead) && pl.Delay > 0 && pl.Delay != Never
}

// Hold applies a server's pushback received at now (see PushbackAfter):
// with a negative after, no further copy of the request goes; otherwise
// the next copy is due after that long, in place of the delay, and the
// copies after it follow the delay again. That next copy replaces the
// one the server turned away: Check treats it as a copy after a failure,
// not a bet on slowness. It returns when the next copy is due, or Never.
func (p *Policy) Hold(pl *Plan, now, after time.Duration) time.Duration {
	if after < 0 {
		pl.Stopped = true
		return Never
	}
	if pl.Mode == Off || pl.Copies >= pl.max {
		return Never
	}
	pl.held = true
	return AddSat(now, after)
}

// Done gives back the in-flight slot of a hedge copy that returned (one
// whose Grant.HoldsSlot was true when it went).
func (p *Policy) Done() { p.inFlight.Add(-1) }

// InFlight returns the hedges holding an in-flight slot now.
func (p *Policy) InFlight() int64 { return p.inFlight.Load() }

// Failed records a copy that failed in a way another copy could fix (a
// retryable error), or a pushback, before the request was decided: a
// throttle budget is debited for it, as gRPC's is.
func (p *Policy) Failed(pl *Plan) {
	if b := p.bucket(pl); pl.Mode == On && b != nil {
		b.OnFailure()
	}
}

// Succeeded records a request that succeeded at now, won by a hedge copy
// or not: a throttle budget is credited for it, and the payoff rule learns
// whether its hedge won and, if it lost, how long it ran for nothing. A
// probe that won with its copy answering within half the time its primary
// had waited when it went starts a class that does not pay over (see
// payoff.outcome).
func (p *Policy) Succeeded(pl *Plan, now time.Duration, byHedge bool) {
	if pl.Mode == On {
		if b := p.bucket(pl); b != nil {
			b.OnSuccess()
		}
		if pl.Copies > 1 && pl.HedgeAt != Never && pl.Delay > 0 && pl.Delay != Never {
			// The copy answered in under half the time its primary had
			// waited: the primary's server was slow, not the request big.
			quick := byHedge && 2*(now-pl.HedgeAt) <= pl.HedgeAt-pl.Start
			// A loser's waste is a share of the delay, or of the time
			// its primary had waited when it went if that was shorter (a
			// leaf the sibling trigger called a straggler early): a copy
			// sent after one unit and losing after five more wasted five
			// times what it bet, not a share of a delay it never waited.
			bet := min(pl.Delay, max(pl.HedgeAt-pl.Start, 1))
			p.payoff.outcome(pl.Evidence, byHedge, float64(now-pl.HedgeAt)/float64(bet), pl.probe && quick)
		}
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
