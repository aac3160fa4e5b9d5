package sim

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	for _, w := range []World{Noise, Stalls, BigJobs, Mixed, LogNormal} {
		for _, st := range []Strategy{None, HedgeFixed, HedgeP95Live, HedgeQuietBudget, Tied} {
			for _, ro := range []Routing{TwoChoice, Random, LeastLoaded, Pool} {
				c := DefaultConfig()
				c.World, c.Strategy, c.Routing = w, st, ro
				// A smoke test: it logs, and fails only on an error or
				// a panic, so under the race detector a shorter run
				// exercises the same paths.
				c.Requests = scaled(50000)
				c.Warmup = c.Requests / 10
				c.Load = 0.8
				c.Delay = 2
				s, err := RunPoint(context.Background(), c, 2, 2)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%-9s %-18s %-12s mean %.3f p99 %.3f hedged %.3f extra %.3f util %.3f stalled %.4f delay %.2f multi %.3f",
					w, st, ro, s.Mean.Value, s.P99.Value, s.HedgedFraction.Value, s.ExtraWork.Value, s.Utilisation.Value, s.StalledFraction.Value, s.Delay.Value, s.MultiStarted.Value)
			}
		}
	}
}

// toDuration is math.Round of the scaled time, exactly: on the values
// where a shortcut could differ (just below a half, the top of the exact
// range), on what the engine passes (times and latencies of every scale),
// and on what it never passes (negative, huge, NaN).
func TestToDurationIsRound(t *testing.T) {
	check := func(x float64) {
		t.Helper()
		if got, want := toDuration(x), time.Duration(math.Round(x*float64(Unit))); got != want {
			t.Fatalf("toDuration(%v) = %d, want %d", x, got, want)
		}
	}
	for _, x := range []float64{
		0, 0.5e-6, 0.49999999999999994e-6, math.Nextafter(0.5e-6, 0), math.Nextafter(0.5e-6, 1),
		1e-6, 1.5e-6, 2.5e-6, float64(1<<52) / 1e6, math.Nextafter(float64(1<<52)/1e6, 0),
		float64(1<<53) / 1e6, 1e300, -1, -0.5e-6, math.Inf(1), math.Inf(-1), math.NaN(),
	} {
		check(x)
	}
	r := seedRNG(1, 2)
	for range scaled(200_000) {
		x := r.ExpFloat64() * math.Pow(10, float64(r.IntN(20)-10))
		check(x)
		check(math.Nextafter(x, 0))
		check(math.Floor(x*1e6)/1e6 + 0.5e-6) // near a half nanosecond
	}
}

// TestDepTree checks the completion tree against a scan: after every
// update, at tree sizes that do and do not fill their last level, the
// root names a server whose time is the earliest, and that time.
func TestDepTree(t *testing.T) {
	r := seedRNG(4, 4)
	for _, servers := range []int{1, 2, 3, 7, 10, 16, 33} {
		var d depTree
		d.reset(servers)
		times := make([]float64, servers)
		for i := range times {
			times[i] = math.Inf(1)
		}
		for step := range 5000 {
			s := int32(r.IntN(servers))
			v := math.Inf(1)
			switch r.IntN(4) {
			case 0: // idle
			case 1: // a tie with another server's time
				v = times[r.IntN(servers)]
			default:
				v = math.Floor(r.Float64()*100) / 4 // ties are common
			}
			times[s] = v
			d.set(s, v)
			want := math.Inf(1)
			for _, x := range times {
				want = min(want, x)
			}
			got, gt := d.min()
			if gt != want || (!math.IsInf(want, 1) && times[got] != want) {
				t.Fatalf("%d servers, step %d: min() = server %d at %v, want time %v (times %v)", servers, step, got, gt, want, times)
			}
		}
	}
}
