package bench

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestGateSlowScalesWorkWhileOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Gate
		done := make(chan error, 1)
		go func() { done <- g.Slow(context.Background(), 3, time.Second) }()
		synctest.Wait()
		if got := g.Scale(10 * time.Millisecond); got != 30*time.Millisecond {
			t.Errorf("during a 3x slowdown Scale(10ms) = %v, want 30ms", got)
		}
		time.Sleep(time.Second)
		if err := <-done; err != nil {
			t.Fatalf("Slow: %v", err)
		}
		if got := g.Scale(10 * time.Millisecond); got != 10*time.Millisecond {
			t.Errorf("after the slowdown Scale(10ms) = %v, want 10ms", got)
		}
		if err := g.Slow(context.Background(), 0.5, time.Second); err == nil || !strings.Contains(err.Error(), ">= 1") {
			t.Errorf("Slow with factor 0.5: %v, want an error asking for a factor >= 1", err)
		}
		g.Close()
		if err := g.Slow(context.Background(), 2, time.Second); err != ErrGateClosed {
			t.Errorf("Slow on a closed gate: %v, want ErrGateClosed", err)
		}
	})
}

func TestRecoveryOptionsValidate(t *testing.T) {
	o := RecoveryOptions{Loads: []float64{1.2}, Configs: []string{"hope"}, Factor: 0.5}.Defaults()
	err := o.Validate()
	if err == nil {
		t.Fatal("bad options validated")
	}
	for _, want := range []string{"load 1.2", "hope", "factor 0.5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := (RecoveryOptions{}).Defaults().Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

// TestRunRecoveryShort runs a short comparison on real loopback servers
// and checks what it reports: every window of the measured span, the
// calls of the whole span counted once, and a slowdown that shows in the
// latency. Timing on a shared machine is too noisy to judge the recovery
// here; docs/default.md reports full runs.
func TestRunRecoveryShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers for a few seconds")
	}
	o := RecoveryOptions{
		Loads: []float64{0.3}, Configs: []string{"none-two-choice", DefaultStrategy},
		Service: 2 * time.Millisecond, Factor: 5,
		Warmup: 100 * time.Millisecond, Before: 300 * time.Millisecond, Slow: 300 * time.Millisecond, After: 400 * time.Millisecond,
		Window: 100 * time.Millisecond, Repeats: 1,
	}.Defaults()
	rs, err := RunRecovery(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want one per configuration", len(rs))
	}
	for _, r := range rs {
		if len(r.Windows) != 10 {
			t.Errorf("%s: %d windows, want 10 of 100ms over 1s", r.Config, len(r.Windows))
		}
		calls := 0
		for _, w := range r.Windows {
			calls += w.Calls
		}
		// r.Rate calls/s for 1 s: Poisson, so loosely.
		if want := r.Rate; float64(calls) < 0.7*want || float64(calls) > 1.3*want || r.Errors != 0 {
			t.Errorf("%s: %d calls, %d errors; want about %.0f and none", r.Config, calls, r.Errors, want)
		}
		if r.Baseline <= 0 || r.Peak < r.Baseline {
			t.Errorf("%s: mean before %v, peak %v", r.Config, r.Baseline, r.Peak)
		}
	}
	var sb strings.Builder
	if err := WriteRecoveryTable(&sb, o, rs); err != nil || !strings.Contains(sb.String(), "| 0.30 | default |") {
		t.Errorf("table: %v\n%s", err, sb.String())
	}
}
