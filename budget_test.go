package hedge

import (
	"math"
	"testing"
)

// TestBudgetRatio walks a ratio bucket through a fixed sequence: r is a
// request (credit), h a hedge attempt (true if allowed).
func TestBudgetRatio(t *testing.T) {
	b, err := NewBudget(0.25, 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		op     byte
		want   bool
		tokens float64
	}{
		{'h', true, 1}, {'h', true, 0}, {'h', false, 0}, // starts full at 2
		{'r', false, 0.25}, {'h', false, 0.25},
		{'r', false, 0.5}, {'r', false, 0.75}, {'r', false, 1}, {'h', true, 0},
		{'r', false, 0.25}, {'r', false, 0.5}, {'r', false, 0.75}, {'r', false, 1},
		{'r', false, 1.25}, {'r', false, 1.5}, {'r', false, 1.75}, {'r', false, 2},
		{'r', false, 2}, // capped at burst
	}
	for i, s := range steps {
		switch s.op {
		case 'r':
			b.dec().OnRequest()
		case 'h':
			if got := b.dec().TryHedge(); got != s.want {
				t.Fatalf("step %d: tryHedge = %v, want %v", i, got, s.want)
			}
		}
		b.dec().OnSuccess() // no effect on a ratio bucket
		b.dec().OnFailure()
		if got := b.Tokens(); got != s.tokens {
			t.Fatalf("step %d: %v tokens, want %v", i, got, s.tokens)
		}
	}
	b.dec().Refund()
	if b.Tokens() != 2 {
		t.Fatalf("refund above burst: %v tokens, want 2", b.Tokens())
	}
}

// TestBudgetLongRun checks the defining property: over many requests,
// hedges <= ratio*requests + burst, and a bucket that is always asked
// reaches that bound.
func TestBudgetLongRun(t *testing.T) {
	b, _ := NewBudget(0.05, 10)
	hedges := 0
	for range 100_000 {
		b.dec().OnRequest()
		if b.dec().TryHedge() {
			hedges++
		}
	}
	if hedges != 5000+10-1 && hedges != 5000+10 {
		t.Fatalf("%d hedges for 100,000 requests at 5%% with burst 10", hedges)
	}
}

// TestBudgetThrottle walks gRPC A6 semantics: hedges allowed while tokens >
// max/2; failures debit one, successes credit tokenRatio; hedges spend none.
func TestBudgetThrottle(t *testing.T) {
	b, err := NewThrottle(4, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if !b.dec().TryHedge() {
			t.Fatal("a full throttle must allow hedges")
		}
	}
	if b.Tokens() != 4 {
		t.Fatalf("%v tokens after two hedges, want 4: a throttle's hedges spend nothing", b.Tokens())
	}
	b.dec().OnFailure() // 3
	if !b.dec().TryHedge() {
		t.Fatal("3 > 2: hedge allowed")
	}
	b.dec().OnFailure() // 2
	if b.dec().TryHedge() {
		t.Fatal("2 is not > 2: hedge refused")
	}
	b.dec().OnRequest() // no effect on a throttle
	b.dec().OnSuccess() // 2.5
	if !b.dec().TryHedge() || b.Tokens() != 2.5 {
		t.Fatalf("after a success: %v tokens, want 2.5 and hedging allowed", b.Tokens())
	}
	for range 10 {
		b.dec().OnFailure()
	}
	if b.Tokens() != 0 {
		t.Fatalf("tokens %v, want floor 0", b.Tokens())
	}
	for range 20 {
		b.dec().OnSuccess()
	}
	if b.Tokens() != 4 {
		t.Fatalf("tokens %v, want cap 4", b.Tokens())
	}
}

func TestNilBudgetAllowsEverything(t *testing.T) {
	var b *Budget
	b.dec().OnRequest()
	b.dec().OnFailure()
	if !b.dec().TryHedge() || !math.IsInf(b.Tokens(), 1) || b.String() != "unlimited" {
		t.Fatal("a nil budget must allow every hedge")
	}
}

func TestBudgetRejectsBadArguments(t *testing.T) {
	for _, c := range []struct{ ratio, burst float64 }{
		{0, 10}, {-0.1, 10}, {1.5, 10}, {math.NaN(), 10}, {0.0001, 10}, {0.1, 0.5}, {0.1, math.Inf(1)},
	} {
		if _, err := NewBudget(c.ratio, c.burst); err == nil {
			t.Errorf("NewBudget(%v, %v) succeeded", c.ratio, c.burst)
		}
	}
	for _, c := range []struct{ max, ratio float64 }{{0, 0.1}, {1001, 0.1}, {10, 0}, {10, 11}, {0.0005, 0.0005}} {
		if _, err := NewThrottle(c.max, c.ratio); err == nil {
			t.Errorf("NewThrottle(%v, %v) succeeded", c.max, c.ratio)
		}
	}
}

// BenchmarkBudget measures one request credit plus one hedge attempt.
func BenchmarkBudget(b *testing.B) {
	bud, _ := NewBudget(0.05, 10)
	b.ReportAllocs()
	for b.Loop() {
		bud.dec().OnRequest()
		bud.dec().TryHedge()
	}
}
