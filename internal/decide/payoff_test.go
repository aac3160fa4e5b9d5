package decide

import (
	"testing"
	"time"
)

// TestPayoffBoundaryWinRate checks the payoff rule from a new class on,
// worked by hand in the rule's fixed point (rateOne = 2^20; a class's
// k-th outcome moves its averages by 1/min(k + payoffPrior, 32) of the
// difference, truncated toward zero; a class with win rate r may waste
// allowed(r) = 419,430 + 419,430*r/2^20):
//
//   - a new class starts just short of paying: a win rate of 2^20/4 =
//     262,144 and a waste of 3*2^20/5 = 629,145 > allowed = 524,287;
//   - its first hedge (a probe) wins: with a weight of 1/5 the win rate
//     goes to 262,144 + 786,432/5 = 419,430, the waste to 629,145 -
//     629,145/5 = 503,316 <= allowed = 587,201: it pays;
//   - its second hedge loses after running 16 delays (the cap): with a
//     weight of 1/6 the win rate goes to 419,430 - 419,430/6 = 349,525,
//     the waste to 503,316 + (16*2^20 - 503,316)/6 = 3,215,632 > allowed
//     = 559,239: it no longer pays;
//   - its third hedge, a probe (the class does not pay, and the soft
//     gate's odds are (559,239/3,215,632)^8, about 1e-6), wins a whole
//     delay after it went, more than half the delay its primary had
//     waited: with a weight of 1/7, 449,389 and 2,756,256 > 599,185: it
//     still does not pay;
//   - its fourth hedge, a probe too, wins at once: a copy that answers
//     within half the time its primary had waited shows the request was
//     not big, its server was slow, and the class starts over as a new
//     one with this win as its first outcome: 419,430 and 503,316 again,
//     and it pays.
//
// PayoffWinRate 31/32 is never reached, so the win rate counts only through
// allowed. The hedges go through the Policy as an engine's do (Check,
// Admit, Succeeded), behind an earlier request so that the head wait does
// not hold them, and a Shadow request reads the rule without its soft
// gate.
func TestPayoffBoundaryWinRate(t *testing.T) {
	const delay = 10 * time.Millisecond
	p := New(Config{MaxAttempts: 2, Replicas: 3, PayoffWinRate: 31.0 / 32, Rollout: 1})
	if p.payoff.min != 1_015_808 {
		t.Fatalf("min = %d, want 1015808", p.payoff.min)
	}
	if maxWaste != 419_430 {
		t.Fatalf("maxWaste = %d, want 419430", maxWaste)
	}
	hedge := func(won bool, ranFor time.Duration) {
		t.Helper()
		var pl Plan
		p.Begin(&pl, 0, fixed(delay), Never, false, nil)
		if why := p.Check(&pl, delay, false); why != Allowed {
			t.Fatalf("check: %v", why)
		}
		p.payoff.probe[EvidenceBehind].Store(rateOne) // a probe token, so that the hedge goes whatever the soft gate draws
		if _, why := p.Admit(&pl, 0, EvidenceBehind); why != Allowed {
			t.Fatalf("admit: %v (rate %d, waste %d)", why, p.payoff.rate[EvidenceBehind].Load(), p.payoff.waste[EvidenceBehind].Load())
		}
		p.Succeeded(&pl, delay+ranFor, won)
	}
	shadow := func() Refusal {
		var pl Plan
		p.Begin(&pl, 0, fixed(delay), Never, false, nil)
		pl.Mode = Shadow
		if why := p.Check(&pl, delay, false); why != Allowed {
			t.Fatalf("shadow check: %v", why)
		}
		_, why := p.Admit(&pl, 0, EvidenceBehind)
		return why
	}
	averages := func(rate, waste int64, pays bool) {
		t.Helper()
		if r, w := p.payoff.rate[EvidenceBehind].Load(), p.payoff.waste[EvidenceBehind].Load(); r != rate || w != waste {
			t.Fatalf("rate %d, waste %d; want %d, %d", r, w, rate, waste)
		}
		if got := p.payoff.pays(EvidenceBehind); got != pays {
			t.Fatalf("rate %d, waste %d: pays %v, want %v", rate, waste, got, pays)
		}
		want := RefusedPayoff
		if pays {
			want = Allowed
		}
		if why := shadow(); why != want {
			t.Fatalf("shadow hedge at rate %d, waste %d: %v, want %v", rate, waste, why, want)
		}
	}

	averages(262_144, 629_145, false)
	if got := p.WinRate(EvidenceBehind); got != 0.25 {
		t.Fatalf("WinRate = %v, want 1/4 for a new class", got)
	}
	hedge(true, 0)
	averages(419_430, 503_316, true)
	hedge(false, 16*delay)
	averages(349_525, 3_215_632, false)
	hedge(true, delay)
	averages(449_389, 2_756_256, false)
	hedge(true, 0)
	averages(419_430, 503_316, true)
}

// TestPayoffBoundaryWaste checks the rule's edges with averages set by
// hand: a class with a win rate of 1/2 (2^19) may waste 419,430 +
// 419,430/2 = 629,145 and goes on at exactly that, not one above it;
// with PayoffWinRate 1/2 the same class goes on whatever its waste, and with
// PayoffWinRate 1 (the zero Config's) a class never goes on for winning
// alone.
func TestPayoffBoundaryWaste(t *testing.T) {
	set := func(p *payoff, rate, waste int64) {
		p.rate[EvidenceBehind].Store(rate)
		p.waste[EvidenceBehind].Store(waste)
	}
	p := newPayoff(1)
	if got := allowed(1 << 19); got != 629_145 {
		t.Fatalf("allowed(2^19) = %d, want 629145", got)
	}
	set(p, 1<<19, 629_145)
	if !p.pays(EvidenceBehind) {
		t.Fatal("a waste exactly at the allowance does not pay")
	}
	set(p, 1<<19, 629_146)
	if p.pays(EvidenceBehind) {
		t.Fatal("a waste above the allowance pays with PayoffWinRate 1")
	}
	set(p, rateOne-1, 16*rateOne)
	if p.pays(EvidenceBehind) {
		t.Fatal("with PayoffWinRate 1, a class pays for winning alone")
	}
	q := newPayoff(0.5)
	set(q, 1<<19, 16*rateOne)
	if !q.pays(EvidenceBehind) {
		t.Fatal("with PayoffWinRate 1/2, a class at that win rate does not pay")
	}
	set(q, 1<<19-1, 16*rateOne)
	if q.pays(EvidenceBehind) {
		t.Fatal("with PayoffWinRate 1/2, a class just below it and costly losers pays")
	}
}

// TestPayoffPriorWeighsFourHedges: a class's averages after k outcomes
// weigh its start as payoffPrior hedges would, until 32 outcomes; after
// that they move by 1/32 per outcome. A class that wins every time from
// the starting rate r0 has, after k wins, 1 - (1 - r0)*4/(4 + k) up to
// truncation: above the start from the first win.
func TestPayoffPriorWeighsFourHedges(t *testing.T) {
	p := newPayoff(0.35)
	r0 := p.rate[EvidenceHead].Load()
	for k := int64(1); k <= 40; k++ {
		p.outcome(EvidenceHead, true, 0, false)
		got := p.rate[EvidenceHead].Load()
		if k <= 28 {
			want := float64(rateOne) - float64(rateOne-r0)*4/float64(4+k)
			if d := float64(got) - want; d > 0 || d < -float64(k) {
				t.Fatalf("after %d wins: rate %d, want %.0f (less at most %d of truncation)", k, got, want, k)
			}
		}
		if got <= r0 {
			t.Fatalf("after %d wins the rate %d is not above the start %d", k, got, r0)
		}
	}
}

// TestPayoffWasteOfAnEarlyCopy: a losing copy's waste is a share of the
// delay, or of the time its primary had waited when it went if that was
// shorter (a straggler's copy sent early by the sibling trigger): losing
// 5ms after a wait of 1ms wastes five times the bet, not half a 10ms
// delay.
func TestPayoffWasteOfAnEarlyCopy(t *testing.T) {
	const delay = 10 * time.Millisecond
	for _, c := range []struct {
		name      string
		sentAt    time.Duration
		wantWaste float64
	}{
		{"at the delay", delay, 0.5},
		{"early", time.Millisecond, 5},
		{"after the delay", 3 * delay, 0.5},
	} {
		p := New(Config{MaxAttempts: 2, Replicas: 3, PayoffWinRate: 0.2, Rollout: 1, MaxLoad: -1})
		var pl Plan
		p.Begin(&pl, 0, fixed(delay), Never, false, nil)
		if _, why := p.Admit(&pl, 0, EvidenceBehind); why != Allowed {
			t.Fatalf("%s: Admit = %v", c.name, why)
		}
		pl.HedgeAt = c.sentAt
		before := p.Waste(EvidenceBehind)
		p.Succeeded(&pl, c.sentAt+5*time.Millisecond, false)
		// The average moves by (waste - before) / (1 + payoffPrior) on
		// the class's first outcome.
		got := before + (c.wantWaste-before)/(1+payoffPrior)
		if w := p.Waste(EvidenceBehind); w < got-1e-3 || w > got+1e-3 {
			t.Errorf("%s: waste %.4f after a loser that ran 5ms; want %.4f (a waste of %v)", c.name, w, got, c.wantWaste)
		}
	}
}
