package hedge

import (
	"slices"
	"testing"
	"time"
)

// recorder is a Runtime that records what the driver asks of it.
type recorder struct {
	place    int  // the replica Place returns
	canSend  bool // what Launch returns
	launched []int
	refused  []Refusal
	armed    []time.Duration
}

func (r *recorder) Place(time.Duration) (int, int) { return r.place, 0 }
func (r *recorder) Evidence() Evidence             { return EvidenceHead }
func (r *recorder) Launch(_ time.Duration, replica int, _ Grant) bool {
	if r.canSend {
		r.launched = append(r.launched, replica)
	}
	return r.canSend
}
func (r *recorder) Refused(_ time.Duration, why Refusal, _ int) { r.refused = append(r.refused, why) }
func (r *recorder) Arm(at time.Duration)                        { r.armed = append(r.armed, at) }

// The driver's sequence on a virtual clock: the primary's Schedule arms
// the timer a delay later; each Fire sends the copy due, to the replica
// Place chose, and arms the next until MaxAttempts, which is not counted
// as a refusal. A copy no replica can take is undone (its budget token
// and slot come back) and counted as RefusedReplicas.
func TestDriverSequence(t *testing.T) {
	const d = 10 * time.Millisecond
	p, err := NewPolicy(Config{Delay: Fixed(d), NoBudget: true, MaxAttempts: 3, Replicas: 3, MaxReplicaLoad: AnyReplicaLoad, MinWinRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	var pl Plan
	rt := &recorder{place: -1, canSend: true}
	p.Begin(&pl, 0, Fixed(d).NewEstimator(), Never, false, nil)
	p.Schedule(&pl, 0, rt)
	if !slices.Equal(rt.armed, []time.Duration{d}) || len(rt.launched) != 0 {
		t.Fatalf("after the primary: armed %v, launched %v; want the timer at %v and nothing sent", rt.armed, rt.launched, d)
	}
	if why := p.Fire(&pl, d, rt); why != Allowed {
		t.Fatalf("first fire: %v", why)
	}
	if why := p.Fire(&pl, 2*d, rt); why != Allowed {
		t.Fatalf("second fire: %v", why)
	}
	if why := p.Fire(&pl, 3*d, rt); why != RefusedAttempts {
		t.Fatalf("third fire: %v, want %v", why, RefusedAttempts)
	}
	if !slices.Equal(rt.armed, []time.Duration{d, 2 * d}) || len(rt.launched) != 2 || len(rt.refused) != 0 || pl.Copies != 3 {
		t.Fatalf("armed %v, launched %v, refused %v, copies %d", rt.armed, rt.launched, rt.refused, pl.Copies)
	}

	// A copy that no replica can take, with a budget and a slot to give back.
	b, _ := NewBudget(0.1, 1)
	p, err = NewPolicy(Config{Delay: Fixed(d), Budget: b, MaxHedgesInFlight: 1, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	pl = Plan{}
	rt = &recorder{place: 1, canSend: false}
	p.Begin(&pl, 0, Fixed(d).NewEstimator(), Never, false, nil)
	tokens := b.Tokens()
	if why := p.Fire(&pl, d, rt); why != RefusedReplicas {
		t.Fatalf("fire with no replica to take the copy: %v, want %v", why, RefusedReplicas)
	}
	if !slices.Equal(rt.refused, []Refusal{RefusedReplicas}) || pl.Copies != 1 || p.InFlight() != 0 || b.Tokens() != tokens {
		t.Fatalf("refused %v, copies %d, in flight %d, tokens %v (want %v)", rt.refused, pl.Copies, p.InFlight(), b.Tokens(), tokens)
	}
}
