package decide

import (
	"sync/atomic"
	"testing"
	"time"
)

// nopRuntime is a Runtime that sends nothing and arms nothing: the
// decision's own cost, without an engine's.
type nopRuntime struct{ armed time.Duration }

func (*nopRuntime) Place(time.Duration) (int, int, bool)  { return 0, 0, false }
func (*nopRuntime) Evidence() Evidence                    { return EvidenceBehind }
func (*nopRuntime) Launch(time.Duration, int, Grant) bool { return true }
func (*nopRuntime) Refused(time.Duration, Refusal, int)   {}
func (r *nopRuntime) Arm(at time.Duration)                { r.armed = at }

// benchPolicy is the Policy of a zero hedge.Config with replicas: a ratio
// budget of 10% with a burst of 10, two copies at most, the payoff rule
// and the spare-capacity rule on.
func benchPolicy() *Policy {
	b := &Budget{Credit: TokenScale / 10, Max: 10 * TokenScale}
	s := &Budget{Credit: TokenScale / 10, Max: 10 * TokenScale}
	b.Level.Store(b.Max)
	s.Level.Store(s.Max)
	return New(Config{Budget: b, Shadow: s, MaxAttempts: 2, Replicas: 3, PayoffWinRate: DefaultPayoffWinRate, Mode: new(atomic.Int32), Rollout: 1})
}

// BenchmarkDecideNoHedge is the decision's cost for a request that does
// not hedge, as both engines pay it: Begin, Schedule (which arms the
// timer), then Succeeded and the primary's sample when it answers before
// the delay. BENCHMARKS.md ("The decision's cost") keeps its numbers.
func BenchmarkDecideNoHedge(b *testing.B) {
	p, est, rt := benchPolicy(), Estimator(fixed(time.Millisecond)), &nopRuntime{}
	var pl Plan
	now := time.Duration(0)
	b.ReportAllocs()
	for b.Loop() {
		now += time.Microsecond
		p.Begin(&pl, now, est, Never, false, nil)
		p.Schedule(&pl, now, rt)
		p.Succeeded(&pl, now+100*time.Microsecond, false)
		if s, _, ok := pl.PrimarySample(now+100*time.Microsecond, true, Never); ok {
			est.Observe(now, s)
		}
	}
}

// BenchmarkDecideHedge is the decision's cost for a request whose timer
// fires and whose hedge is asked for: BenchmarkDecideNoHedge's steps and
// Fire (Check, Place, Evidence, Admit, Launch), on a request whose
// primary waits behind earlier work (EvidenceBehind), so that the copy
// goes at the delay when the budget and payoff rule allow it.
func BenchmarkDecideHedge(b *testing.B) {
	p, est, rt := benchPolicy(), Estimator(fixed(time.Millisecond)), &nopRuntime{}
	var pl Plan
	now := time.Duration(0)
	b.ReportAllocs()
	for b.Loop() {
		now += time.Microsecond
		p.Begin(&pl, now, est, Never, false, nil)
		p.Schedule(&pl, now, rt)
		p.Fire(&pl, rt.armed, rt)
		p.Succeeded(&pl, rt.armed+100*time.Microsecond, false)
	}
}
