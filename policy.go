package hedge

import (
	"fmt"
	"time"

	"github.com/tailcut/hedge/internal/decide"
)

// Refusal says why a copy was not sent: [Event.Refusal], and the index
// of [Stats.Refused]. Its String is the one name each refusal has
// everywhere: the "reason" label of the metrics (hedgeprom, hedgeotel),
// the key of hedgectl's "refused" object, and the word in [Stats.String]
// and [Event.String] (budget, in_flight, busy, payoff, fan_out, head,
// rate, deadline, replicas).
type Refusal = decide.Refusal

// The refusals that [Stats.Refused] counts.
const (
	// RefusedDeadline: the caller's deadline has passed, or (for a copy
	// sent on a delay) is nearer than the delay.
	RefusedDeadline Refusal = decide.RefusedDeadline
	// RefusedReplicas: every replica already holds a copy of the request.
	RefusedReplicas Refusal = decide.RefusedReplicas
	// RefusedInFlight: MaxHedgesInFlight hedges are running.
	RefusedInFlight Refusal = decide.RefusedInFlight
	// RefusedBudget: the budget has no token.
	RefusedBudget Refusal = decide.RefusedBudget
	// RefusedBusy: the replica the copy would go to has more requests of
	// this [Hedger] in flight than [Config.MaxReplicaLoad] allows (by
	// default, it is not idle), or too few recent primaries found an idle
	// replica: no spare capacity to hedge into.
	RefusedBusy Refusal = decide.RefusedBusy
	// RefusedPayoff: hedges of the same kind have not been paying for
	// themselves ([Config.PayoffWinRate]).
	RefusedPayoff Refusal = decide.RefusedPayoff
	// RefusedFanOut: the copy is of a leaf of a fan-out request ([DoFan])
	// whose own budget or cap on extra copies ([FanOut.Hedges],
	// [FanOut.InFlight]) is spent.
	RefusedFanOut Refusal = decide.RefusedFanOut
	// RefusedHead: the primary is at the head of this [Hedger]'s requests
	// on its replica and has not yet waited three delays; the copy is
	// asked for again when it has ([Config.PayoffWinRate]).
	RefusedHead Refusal = decide.RefusedHead
)

// The modes of package hedge and of the decision are one set of values.
var _ = [1]struct{}{}[int(On)-int(decide.On)+int(Shadow)-int(decide.Shadow)+int(Off)-int(decide.Off)]

// DefaultBudget returns a fresh copy of the budget a zero Config gets:
// NewBudget(0.1, 10), hedges on at most 10% of requests with bursts of 10.
func DefaultBudget() *Budget {
	b, _ := NewBudget(0.1, 10)
	return b
}

// newPolicy applies the defaults of a valid cfg and returns its decision,
// spending from b (budgetOf(cfg)) and reading the mode from mv
// (modeVarOf(cfg)). This is the one place where a Config's decision
// fields get their defaults.
func newPolicy(cfg Config, b *Budget, mv *ModeVar) *decide.Policy {
	dc := decide.Config{
		MaxAttempts:   cfg.MaxAttempts,
		MaxInFlight:   cfg.MaxHedgesInFlight,
		Replicas:      cfg.Replicas,
		MaxLoad:       cfg.MaxReplicaLoad,
		PayoffWinRate: cfg.PayoffWinRate,
		Mode:          &mv.v,
		Rollout:       cfg.Rollout,
	}
	if dc.PayoffWinRate == 0 {
		dc.PayoffWinRate = decide.DefaultPayoffWinRate
	}
	if dc.MaxAttempts == 0 {
		dc.MaxAttempts = 2
	}
	if dc.Rollout == 0 {
		dc.Rollout = 1
	}
	if b != nil {
		dc.Budget, dc.Shadow = b.dec(), b.twin().dec()
	}
	d := delayOf(cfg)
	dc.NewEstimator = func() decide.Estimator { return d.newEstimator() }
	dc.About = describeDelay(d)
	if b == nil {
		dc.About += ", no budget"
	} else {
		dc.About += fmt.Sprintf(", budget %v", b)
	}
	return decide.New(dc)
}

// delayOf is cfg's Delay, or the default.
func delayOf(cfg Config) Delay {
	if cfg.Delay == nil {
		return Percentile{}
	}
	return cfg.Delay
}

// budgetOf is cfg's Budget, a fresh default one, or nil with NoBudget.
func budgetOf(cfg Config) *Budget {
	if cfg.Budget == nil && !cfg.NoBudget {
		return DefaultBudget()
	}
	return cfg.Budget
}

// modeVarOf is the [ModeVar] a [Hedger] made from cfg reads its mode from.
func modeVarOf(cfg Config) *ModeVar {
	if mv, ok := cfg.Mode.(*ModeVar); ok {
		return mv
	}
	mv := new(ModeVar)
	if cfg.Mode != nil {
		mv.v.Store(int32(cfg.Mode.Mode()))
	}
	return mv
}

// describeDelay names a Delay.
func describeDelay(d Delay) string {
	switch d := d.(type) {
	case Fixed:
		return "fixed delay " + formatDelay(time.Duration(d))
	case Percentile:
		d = d.withDefaults()
		return fmt.Sprintf("p%g of the last %d primary latencies (none before %d)", d.P, d.Window, d.MinSamples)
	case *Percentile:
		return describeDelay(*d)
	}
	return fmt.Sprintf("%T delay", d)
}

func init() {
	decide.FromConfig = func(c any) (*decide.Policy, error) {
		cfg := c.(Config)
		if err := cfg.validate(); err != nil {
			return nil, err
		}
		return newPolicy(cfg, budgetOf(cfg), modeVarOf(cfg)), nil
	}
}
