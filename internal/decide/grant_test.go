package decide

import (
	"testing"
	"time"
)

// An admission that is undone gives back everything it took: the
// in-flight slot, the budget token, the payoff probe token, and the copy's
// place and evidence in the Plan, so that the same copy can be admitted
// again at once, as if the first admission had never happened.
func TestGrantUndo(t *testing.T) {
	const delay = time.Millisecond
	b := &Budget{Max: TokenScale} // one token, which requests do not refill: a second admission needs the first one's back
	b.Level.Store(TokenScale)
	p := New(Config{Budget: b, Shadow: &Budget{}, MaxInFlight: 1, Replicas: 3, MaxAttempts: 3, PayoffWinRate: 0.2, Rollout: 1}) // a new class's win rate, 1/4, is above 0.2: it pays
	var pl Plan
	p.Begin(&pl, 0, fixed(delay), Never, false, nil)
	at := HeadDelays * delay // a primary at the head of its replica has waited long enough
	if why := p.Check(&pl, at, false); why != Allowed {
		t.Fatalf("check: %v", why)
	}
	tokens, probes := b.Level.Load(), p.payoff.probe[EvidenceHead].Load()
	g, why := p.Admit(&pl, 0, EvidenceHead)
	if why != Allowed {
		t.Fatalf("admit: %v", why)
	}
	if !g.HoldsSlot() || p.InFlight() != 1 || pl.Copies != 2 || pl.Evidence != EvidenceHead || pl.HedgeAt != at {
		t.Fatalf("after admission: slot %v, in flight %d, copies %d, evidence %v, hedge at %v", g.HoldsSlot(), p.InFlight(), pl.Copies, pl.Evidence, pl.HedgeAt)
	}
	g.Undo()
	if p.InFlight() != 0 || b.Level.Load() != tokens || pl.Copies != 1 || pl.Evidence != EvidenceNone || pl.HedgeAt != Never {
		t.Fatalf("after undo: in flight %d, tokens %d (want %d), copies %d, evidence %v, hedge at %v", p.InFlight(), b.Level.Load(), tokens, pl.Copies, pl.Evidence, pl.HedgeAt)
	}
	if got := p.payoff.probe[EvidenceHead].Load(); got < probes {
		t.Fatalf("payoff probe tokens %d after undo, %d before admission", got, probes)
	}
	if _, why := p.Admit(&pl, 0, EvidenceHead); why != Allowed {
		t.Fatalf("admission after undo: %v", why)
	}
	// The zero Grant took nothing: undoing it changes nothing.
	before := p.InFlight()
	Grant{}.Undo()
	if p.InFlight() != before {
		t.Fatal("the zero Grant gave back a slot")
	}
}

// fixed is an Estimator of a fixed delay.
type fixed time.Duration

func (f fixed) Delay(time.Duration) time.Duration { return time.Duration(f) }
func (fixed) Observe(_, _ time.Duration)          {}
