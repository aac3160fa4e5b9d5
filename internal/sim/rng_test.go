package sim

import (
	"math"
	"testing"
)

// ksDistance returns the Kolmogorov-Smirnov distance between the sample
// xs and the continuous distribution function cdf, to within 1/ksBins: it
// counts the sample in ksBins bins of equal probability, rather than
// sorting it, which keeps a test of millions of draws fast under -race.
func ksDistance(xs []float64, cdf func(float64) float64) float64 {
	counts := make([]int, ksBins)
	for _, x := range xs {
		counts[min(int(cdf(x)*ksBins), ksBins-1)]++
	}
	n := float64(len(xs))
	d, cum := 0.0, 0
	for k, c := range counts {
		cum += c
		d = max(d, math.Abs(float64(cum)/n-float64(k+1)/ksBins))
	}
	return d
}

const ksBins = 1 << 16

// The critical KS distance at significance 0.001 is 1.95/sqrt(n); the
// seeds are fixed, so each check is a fixed draw that a correct generator
// passes, while a wrong table or a misplaced bit moves the distance far
// beyond it.
const ksCrit = 1.95

func TestExpFloat64Distribution(t *testing.T) {
	// Four million draws: a ziggurat that accepted its wedges whole (about
	// one draw in a hundred falls in one) is off Exp(1) by a KS distance
	// of 0.0017, twice the critical one at this size (and within it at a
	// million).
	const n = 4_000_000
	r := seedRNG(1, 1)
	xs := make([]float64, n)
	sum, sum2, tail8, tailR := 0.0, 0.0, 0, 0
	for i := range xs {
		x := r.ExpFloat64()
		if x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			t.Fatalf("draw %d: %v", i, x)
		}
		xs[i] = x
		sum += x
		sum2 += x * x
		if x > 8 {
			tail8++
		}
		if x > zigExpR {
			tailR++
		}
	}
	mean := sum / n
	variance := sum2/n - mean*mean
	// Standard errors: 1/sqrt(n) = 0.0005 for the mean, about 0.0022 for
	// the variance (fourth moment 9); five of them.
	if math.Abs(mean-1) > 0.0025 || math.Abs(variance-1) > 0.011 {
		t.Errorf("mean %.4f, variance %.4f; want 1 and 1", mean, variance)
	}
	// The tail beyond the base layer: expected n e^-r = 1,817, e^-8 n = 1,342.
	for _, c := range []struct {
		name string
		got  int
		want float64
	}{{"x > 8", tail8, n * math.Exp(-8)}, {"x > r", tailR, n * math.Exp(-zigExpR)}} {
		if math.Abs(float64(c.got)-c.want) > 5*math.Sqrt(c.want) {
			t.Errorf("%s: %d draws, want about %.0f", c.name, c.got, c.want)
		}
	}
	if d := ksDistance(xs, func(x float64) float64 { return 1 - math.Exp(-x) }); d > ksCrit/math.Sqrt(n) {
		t.Errorf("KS distance from Exp(1): %.5f, beyond %.5f", d, ksCrit/math.Sqrt(n))
	}
}

func TestNormFloat64Distribution(t *testing.T) {
	const n = 4_000_000 // as for ExpFloat64: enough to see wedges accepted whole
	r := seedRNG(2, 7)
	xs := make([]float64, n)
	sum, sum2 := 0.0, 0.0
	for i := range xs {
		x := r.NormFloat64()
		xs[i] = x
		sum += x
		sum2 += x * x
	}
	mean := sum / n
	variance := sum2/n - mean*mean
	// Standard errors 0.0005 and 0.0007; five of them.
	if math.Abs(mean) > 0.0025 || math.Abs(variance-1) > 0.0035 {
		t.Errorf("mean %.4f, variance %.4f; want 0 and 1", mean, variance)
	}
	cdf := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	if d := ksDistance(xs, cdf); d > ksCrit/math.Sqrt(n) {
		t.Errorf("KS distance from N(0,1): %.5f, beyond %.5f", d, ksCrit/math.Sqrt(n))
	}
}

func TestFloat64AndIntN(t *testing.T) {
	const n = 1_000_000
	r := seedRNG(3, 3)
	xs := make([]float64, n)
	for i := range xs {
		x := r.Float64()
		if x < 0 || x >= 1 {
			t.Fatalf("Float64 = %v, outside [0, 1)", x)
		}
		xs[i] = x
	}
	if d := ksDistance(xs, func(x float64) float64 { return x }); d > ksCrit/math.Sqrt(n) {
		t.Errorf("KS distance from U(0,1): %.5f", d)
	}
	// Chi-square of IntN over 10 and over 7 values (9 and 6 degrees of
	// freedom; 27.9 and 22.5 are their 0.001 critical values).
	for _, c := range []struct {
		k    int
		crit float64
	}{{10, 27.9}, {7, 22.5}} {
		counts := make([]int, c.k)
		for range n {
			v := r.IntN(c.k)
			if v < 0 || v >= c.k {
				t.Fatalf("IntN(%d) = %d", c.k, v)
			}
			counts[v]++
		}
		e := float64(n) / float64(c.k)
		chi := 0.0
		for _, o := range counts {
			chi += (float64(o) - e) * (float64(o) - e) / e
		}
		if chi > c.crit {
			t.Errorf("IntN(%d): chi-square %.1f beyond %.1f: %v", c.k, chi, c.crit, counts)
		}
	}
	// IntN's rejection must keep a large n exact: with n = 3·2^61 a plain
	// multiply-shift maps 3, 3 and 2 of every 8 equally likely inputs to
	// values that are 0, 1 and 2 modulo 3, so a third of the draws would
	// become a quarter.
	const big = 3 << 61
	rem2 := 0
	for range 100_000 {
		if r.IntN(big)%3 == 2 {
			rem2++
		}
	}
	if math.Abs(float64(rem2)/100_000-1.0/3) > 0.01 {
		t.Errorf("IntN(3<<61): %.4f of draws are 2 modulo 3, want 0.3333", float64(rem2)/100_000)
	}
}

// TestZigguratLayers checks the ziggurats' construction: the layers'
// areas equal, and the top layer reaching the density's peak.
func TestZigguratLayers(t *testing.T) {
	const m = 1 << 53
	for _, z := range []struct {
		name string
		t    *zigTable
		v    float64
		f    func(float64) float64
	}{
		{"exponential", &zigExp, zigExpV, func(x float64) float64 { return math.Exp(-x) }},
		{"normal", &zigNorm, zigNormV, func(x float64) float64 { return math.Exp(-x * x / 2) }},
	} {
		for i := 1; i < zigN; i++ {
			x := z.t.w[i] * m
			area := x * (z.t.f[i-1] - z.t.f[i])
			if math.Abs(area-z.v)/z.v > 1e-6 {
				t.Errorf("%s layer %d: area %.9g, want %.9g", z.name, i, area, z.v)
			}
		}
		// The top layer's inner edge, from the recurrence, is at 0.
		x1 := z.t.w[1] * m
		if top := z.f(x1) + z.v/x1; math.Abs(top-1) > 1e-6 {
			t.Errorf("%s: the top layer reaches %.9f, want 1", z.name, top)
		}
	}
}

func BenchmarkRNG(b *testing.B) {
	r := seedRNG(1, 1)
	b.Run("Exp", func(b *testing.B) {
		s := 0.0
		for b.Loop() {
			s += r.ExpFloat64()
		}
		_ = s
	})
	b.Run("Norm", func(b *testing.B) {
		s := 0.0
		for b.Loop() {
			s += r.NormFloat64()
		}
		_ = s
	})
	b.Run("IntN", func(b *testing.B) {
		s := 0
		for b.Loop() {
			s += r.IntN(10)
		}
		_ = s
	})
}
