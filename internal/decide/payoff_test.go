package decide

import (
	"testing"
	"time"
)

// TestPayoffBoundaryWinRate checks the payoff rule where a class's win
// rate is exactly the minimum and its waste above maxWaste: it pays. Worked
// by hand in the rule's fixed point (rateOne = 2^20, averages over 32):
//
//   - MinWinRate 31/32 gives min = 31/32 * 2^20 = 1,015,808;
//   - one losing hedge moves the win rate from 2^20 to
//     2^20 - 2^20/32 = 1,015,808 = min, and the waste from 0 to
//     16*2^20/32 = 524,288 for a loser that ran 16 delays (the cap),
//     above maxWasteFixed = 2*2^20/5 = 419,430;
//   - a second loss takes the rate to 1,015,808 - 1,015,808/32 =
//     984,064 < min and the waste to 524,288 + (16*2^20 - 524,288)/32 =
//     1,032,192: it no longer pays.
//
// The hedge goes through the Policy as an engine's does (Check, Admit,
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
	lose := func() {
		t.Helper()
		var pl Plan
		p.Begin(&pl, 0, fixed(delay), Never, false, nil)
		if why := p.Check(&pl, delay, false); why != Allowed {
			t.Fatalf("check: %v", why)
		}
		if _, why := p.Admit(&pl, 0, EvidenceHead); why != Allowed {
			t.Fatalf("admit: %v (rate %d, waste %d)", why, p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load())
		}
		p.Succeeded(&pl, delay+16*delay, false) // the hedge lost after 16 delays
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

	lose()
	if r, w := p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load(); r != 1_015_808 || w != 524_288 {
		t.Fatalf("after one loss: rate %d, waste %d; want 1015808, 524288", r, w)
	}
	if got := p.WinRate(EvidenceHead); got != 31.0/32 {
		t.Fatalf("WinRate = %v, want exactly the minimum 31/32", got)
	}
	if !p.payoff.pays(EvidenceHead) {
		t.Fatal("a win rate exactly at the minimum does not pay")
	}
	if why := shadow(); why != Allowed {
		t.Fatalf("shadow hedge at a win rate exactly at the minimum: %v, want allowed", why)
	}

	lose()
	if r, w := p.payoff.rate[EvidenceHead].Load(), p.payoff.waste[EvidenceHead].Load(); r != 984_064 || w != 1_032_192 {
		t.Fatalf("after two losses: rate %d, waste %d; want 984064, 1032192", r, w)
	}
	if p.payoff.pays(EvidenceHead) {
		t.Fatal("a win rate below the minimum with costly losers pays")
	}
	if why := shadow(); why != RefusedPayoff {
		t.Fatalf("shadow hedge below the minimum: %v, want payoff", why)
	}
}

// TestPayoffBoundaryWaste checks the other side of the rule: a class whose
// win rate is below the minimum but whose waste is exactly maxWaste pays.
// With MinWinRate 1 (min = 2^20) one loss after 12.8 delays gives a rate
// of 1,015,808 < min and a waste of int(12.8*2^20)/32 = 13,421,772/32 =
// 419,430 = maxWasteFixed. A loser that ran 12.9 delays makes it
// 419,430 + (13,526,630 - 419,430)/32 = 419,430 + 409,600 = 829,030.
func TestPayoffBoundaryWaste(t *testing.T) {
	p := newPayoff(1)
	p.outcome(EvidenceBehind, false, float64(128*time.Millisecond)/float64(10*time.Millisecond))
	if r, w := p.rate[EvidenceBehind].Load(), p.waste[EvidenceBehind].Load(); r != 1_015_808 || w != 419_430 {
		t.Fatalf("rate %d, waste %d; want 1015808, 419430", r, w)
	}
	if !p.pays(EvidenceBehind) {
		t.Fatal("a waste exactly at maxWaste does not pay")
	}
	p.outcome(EvidenceBehind, false, 12.9)
	if r, w := p.rate[EvidenceBehind].Load(), p.waste[EvidenceBehind].Load(); r != 984_064 || w != 829_030 {
		t.Fatalf("rate %d, waste %d; want 984064, 829030", r, w)
	}
	if p.pays(EvidenceBehind) {
		t.Fatal("a waste above maxWaste and a win rate below the minimum pay")
	}
}
