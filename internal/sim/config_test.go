package sim

import (
	"math"
	"testing"
	"time"
)

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
