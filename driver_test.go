package hedge_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/decide"
)

// driverLog is a decide.Runtime that records what the driver asks of it.
type driverLog struct {
	place    int  // the replica Place returns
	canSend  bool // what Launch returns
	launched []int
	refused  []hedge.Refusal
	armed    []time.Duration
}

func (r *driverLog) Place(time.Duration) (int, int, bool) { return r.place, 0, false }
func (r *driverLog) Evidence() decide.Evidence            { return decide.EvidenceHead }
func (r *driverLog) Launch(_ time.Duration, replica int, _ decide.Grant) bool {
	if r.canSend {
		r.launched = append(r.launched, replica)
	}
	return r.canSend
}
func (r *driverLog) Refused(_ time.Duration, why hedge.Refusal, _ int) {
	r.refused = append(r.refused, why)
}
func (r *driverLog) Arm(at time.Duration) { r.armed = append(r.armed, at) }

// The driver's sequence on a virtual clock: the primary's Schedule arms
// the timer a delay later; each Fire sends the copy due, to the replica
// Place chose, and arms the next until MaxAttempts, which is not counted
// as a refusal. A copy no replica can take is undone (its budget token
// and slot come back) and counted as hedge.RefusedReplicas.
func TestDriverSequence(t *testing.T) {
	const d = 10 * time.Millisecond
	p, err := decide.FromConfig(hedge.Config{Delay: hedge.Fixed(d), NoBudget: true, MaxAttempts: 3, Replicas: 3, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	var pl decide.Plan
	rt := &driverLog{place: -1, canSend: true}
	p.Begin(&pl, 0, hedge.NewEstimator(hedge.Fixed(d)), hedge.Never, false, nil)
	p.Schedule(&pl, 0, rt)
	if !slices.Equal(rt.armed, []time.Duration{d}) || len(rt.launched) != 0 {
		t.Fatalf("after the primary: armed %v, launched %v; want the timer at %v and nothing sent", rt.armed, rt.launched, d)
	}
	if why := p.Fire(&pl, d, rt); why != decide.Allowed {
		t.Fatalf("first fire: %v", why)
	}
	if why := p.Fire(&pl, 2*d, rt); why != decide.Allowed {
		t.Fatalf("second fire: %v", why)
	}
	if why := p.Fire(&pl, 3*d, rt); why != decide.RefusedAttempts {
		t.Fatalf("third fire: %v, want %v", why, decide.RefusedAttempts)
	}
	if !slices.Equal(rt.armed, []time.Duration{d, 2 * d}) || len(rt.launched) != 2 || len(rt.refused) != 0 || pl.Copies != 3 {
		t.Fatalf("armed %v, launched %v, refused %v, copies %d", rt.armed, rt.launched, rt.refused, pl.Copies)
	}

	// A copy that no replica can take, with a budget and a slot to give back.
	b, _ := hedge.NewBudget(0.1, 1)
	p, err = decide.FromConfig(hedge.Config{Delay: hedge.Fixed(d), Budget: b, MaxHedgesInFlight: 1, Replicas: 3, PayoffWinRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	pl = decide.Plan{}
	rt = &driverLog{place: 1, canSend: false}
	p.Begin(&pl, 0, hedge.NewEstimator(hedge.Fixed(d)), hedge.Never, false, nil)
	tokens := b.Tokens()
	if why := p.Fire(&pl, d, rt); why != hedge.RefusedReplicas {
		t.Fatalf("fire with no replica to take the copy: %v, want %v", why, hedge.RefusedReplicas)
	}
	if !slices.Equal(rt.refused, []hedge.Refusal{hedge.RefusedReplicas}) || pl.Copies != 1 || p.InFlight() != 0 || b.Tokens() != tokens {
		t.Fatalf("refused %v, copies %d, in flight %d, tokens %v (want %v)", rt.refused, pl.Copies, p.InFlight(), b.Tokens(), tokens)
	}
}
