package decide

import (
	"testing"
	"time"
)

// TestPayoffBoundaryWinRate checks the payoff rule at its edges, worked by
// hand in the rule's fixed point (rateOne = 2^20; a class's k-th outcome
// moves its averages by 1/min(k + payoffPrior, 32) of the difference,
// truncated toward zero):
//
//   - MinWinRate 31/32 gives min = 31/32 * 2^20 = 1,015,808, and a new
//     class starts at a win rate of exactly min and a waste of exactly
//     maxWasteFixed = 2*2^20/5 = 419,430: at both edges, it pays;
//   - its first hedge loses after running 16 delays (the cap): with a
//     weight of 1/5, the win rate goes to 1,015,808 - 1,015,808/5 =
//     812,647 < min, the waste to 419,430 + (16*2^20 - 419,430)/5 =
//     3,690,987 > maxWasteFixed: it no longer pays;
//   - its second hedge wins: with a weight of 1/6, the win rate goes to
//     812,647 + (2^20 - 812,647)/6 = 851,968, the waste to 3,690,987 -
//     3,690,987/6 = 3,075,823: it still does not pay.
//
// The hedges go through the Policy as an engine's do (Check, Admit,
// Succeeded), and a Shadow request reads the rule without its soft gate.
func TestPayoffBoundaryWinRate(t *testing.T) {
	const delay = 10 * time.Millisecond
	p := New(Config{MaxAttempts: 2, Replicas: 3, MinWinRate: 31.0 / 32, Rollout: 1})
	if p.payoff.min != 1_015_808 {
		t.Fatalf("min = %d, want 1015808", p.payoff.min)
	}
	if maxWasteFixed != 419_430 {
		t.Fatalf("maxWasteFixed = %d, want 419430", maxWasteFixed)
	}
	hedge := func(won bool, ranFor time.Duration) {
		t.Helper()
		var pl Plan
		p.Begin(&pl, 0, fixed(delay), Never, false, nil)
		if why := p.Check(&pl, delay, false); why != Allowed {
			t.Fatalf("check: %v", why)
		}
		if _, why := p.Admit(&pl, 0, EvidenceHead); why != Allowed {
			t.Fatalf("admit: %v (rate %d, waste %d)", why, p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load())
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
		_, why := p.Admit(&pl, 0, EvidenceHead)
		return why
	}
	averages := func(rate, waste int64) {
		t.Helper()
		if r, w := p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load(); r != rate || w != waste {
			t.Fatalf("rate %d, waste %d; want %d, %d", r, w, rate, waste)
		}
	}

	averages(1_015_808, 419_430)
	if got := p.WinRate(EvidenceHead); got != 31.0/32 {
		t.Fatalf("WinRate = %v, want exactly the minimum 31/32", got)
	}
	if !p.payoff.pays(EvidenceHead) {
		t.Fatal("a new class, at the minimum win rate and the most waste, does not pay")
	}
	if why := shadow(); why != Allowed {
		t.Fatalf("shadow hedge of a new class: %v, want allowed", why)
	}

	hedge(false, 16*delay)
	averages(812_647, 3_690_987)
	if p.payoff.pays(EvidenceHead) {
		t.Fatal("a class below the minimum with costly losers pays")
	}
	if why := shadow(); why != RefusedPayoff {
		t.Fatalf("shadow hedge below the minimum: %v, want payoff", why)
	}

	p.payoff.probe[EvidenceHead].Store(rateOne) // a probe token, so that the next hedge goes whatever the soft gate draws
	hedge(true, delay)
	averages(851_968, 3_075_823)
	if p.payoff.pays(EvidenceHead) {
		t.Fatal("one win after a costly loss pays")
	}
}

// TestPayoffBoundaryWaste checks the other side of the rule: a class whose
// win rate is below the minimum but whose waste is exactly maxWaste pays.
// With MinWinRate 1 (min = 2^20), a first loss after 0.4 delays gives
// int(0.4*2^20) = 419,430 = maxWasteFixed, so the waste stays there, and
// a rate of 2^20 - 2^20/5 = 838,861 < min. A second loss after 0.5
// delays (524,288) makes the waste 419,430 + (524,288 - 419,430)/6 =
// 436,906 and the rate 838,861 - 838,861/6 = 699,051.
func TestPayoffBoundaryWaste(t *testing.T) {
	p := newPayoff(1)
	p.outcome(EvidenceBehind, false, 0.4)
	if r, w := p.rate[EvidenceBehind].Load(), p.waste[EvidenceBehind].Load(); r != 838_861 || w != 419_430 {
		t.Fatalf("rate %d, waste %d; want 838861, 419430", r, w)
	}
	if !p.pays(EvidenceBehind) {
		t.Fatal("a waste exactly at maxWaste does not pay")
	}
	p.outcome(EvidenceBehind, false, 0.5)
	if r, w := p.rate[EvidenceBehind].Load(), p.waste[EvidenceBehind].Load(); r != 699_051 || w != 436_906 {
		t.Fatalf("rate %d, waste %d; want 699051, 436906", r, w)
	}
	if p.pays(EvidenceBehind) {
		t.Fatal("a waste above maxWaste and a win rate below the minimum pay")
	}
}

// TestPayoffPriorWeighsFourHedges: a class's averages after k outcomes
// weigh its start as payoffPrior hedges would, until 32 outcomes; after
// that they move by 1/32 per outcome. A class that wins every time from
// the minimum rate r0 has, after k wins, 1 - (1 - r0)*4/(4 + k) up to
// truncation: above the minimum from the first win.
func TestPayoffPriorWeighsFourHedges(t *testing.T) {
	p := newPayoff(0.35)
	r0 := p.rate[EvidenceHead].Load()
	for k := int64(1); k <= 40; k++ {
		p.outcome(EvidenceHead, true, 0)
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
