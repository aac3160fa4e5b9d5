package sim

import (
	"math"
	"math/bits"
)

// rng is the simulator's random source: SplitMix64 (a Weyl sequence, the
// state advanced by a fixed odd constant, through splitmix64's
// finaliser), which passes the usual statistical batteries and has a
// period of 2^64, far beyond the few billion draws of the longest study
// run. It is a concrete type, not math/rand/v2's Source interface, so that
// its draws inline into the event loop: behind the interface, random
// numbers took a fifth to a quarter of the simulator's time (BENCHMARKS.md).
//
// Its methods return the distributions the engine needs: uniform
// floats and integers, exponential and normal variates. The exponential
// and normal ones use the ziggurat method (Marsaglia and Tsang, 2000),
// with tables computed once from the method's recurrence (zigExp, zigNorm)
// in float64 and 53-bit integers.
type rng struct{ s uint64 }

// seedRNG returns the generator of one of a run's random streams.
func seedRNG(seed, stream uint64) rng {
	return rng{s: splitmix64(seed ^ splitmix64(stream))}
}

// Uint64 returns 64 uniformly random bits: the state advanced by the
// Weyl constant, through the finaliser (splitmix64 does both). With
// Uint64 the generator is also a math/rand/v2 Source.
func (r *rng) Uint64() uint64 {
	x := splitmix64(r.s)
	r.s += 0x9e3779b97f4a7c15
	return x
}

// Float64 returns a uniform float in [0, 1) with 53 random bits.
func (r *rng) Float64() float64 {
	return float64(r.Uint64()>>11) * 0x1p-53
}

// IntN returns a uniform integer in [0, n); n must be positive. It maps 64
// random bits onto [0, n) by a multiplication and rejects the few draws
// that would make some values more likely than others (Lemire, 2019).
func (r *rng) IntN(n int) int {
	hi, lo := bits.Mul64(r.Uint64(), uint64(n))
	if lo < uint64(n) {
		thresh := -uint64(n) % uint64(n)
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), uint64(n))
		}
	}
	return int(hi)
}

// ExpFloat64 returns an exponential variate with mean 1. Nearly every
// draw takes one random number, a table lookup and a multiplication; the
// rare cases are in expSlow.
func (r *rng) ExpFloat64() float64 {
	u := r.Uint64()
	i := u & (zigN - 1)
	j := u >> 11
	if j < zigExp.k[i] {
		return float64(j) * zigExp.w[i]
	}
	return r.expSlow(i, j)
}

// expSlow finishes an exponential draw that fell outside the rectangle
// of layer i wholly under the curve: into the tail, if i is the base
// layer, or into the wedge, where it is accepted with the density's
// probability; a rejected draw starts over.
func (r *rng) expSlow(i, j uint64) float64 {
	for {
		if i == 0 {
			// The tail beyond zigExpR is the exponential again, shifted.
			return zigExpR - math.Log(1-r.Float64())
		}
		x := float64(j) * zigExp.w[i]
		if zigExp.f[i]+r.Float64()*(zigExp.f[i-1]-zigExp.f[i]) < math.Exp(-x) {
			return x
		}
		u := r.Uint64()
		i, j = u&(zigN-1), u>>11
		if j < zigExp.k[i] {
			return float64(j) * zigExp.w[i]
		}
	}
}

// NormFloat64 returns a standard normal variate (mean 0, variance 1), by
// the ziggurat of the normal density: one random number for nearly every
// draw, its bits split between the layer, the sign and the value.
func (r *rng) NormFloat64() float64 {
	u := r.Uint64()
	i, j := u&(zigN-1), u>>11
	if j < zigNorm.k[i] {
		return signed(float64(j)*zigNorm.w[i], u)
	}
	return r.normSlow(u)
}

// signed gives x (>= 0) the sign of bit 8 of u, a bit neither the layer
// (bits 0 to 7) nor the value (bits 11 to 63) uses, by moving that bit
// into the sign bit: a branch on a random bit would be mispredicted every
// other draw.
func signed(x float64, u uint64) float64 {
	return math.Float64frombits(math.Float64bits(x) | (u&(1<<8))<<55)
}

// normSlow finishes a normal draw from u that fell outside the part of its
// layer wholly under the curve: into the tail beyond zigNormR (Marsaglia's
// method for the normal tail), or into the wedge, accepted with the
// density's probability; a rejected draw starts over.
func (r *rng) normSlow(u uint64) float64 {
	for {
		i, j := u&(zigN-1), u>>11
		if i == 0 {
			for {
				x := -math.Log(1-r.Float64()) / zigNormR
				y := -math.Log(1 - r.Float64())
				if y+y >= x*x {
					return signed(zigNormR+x, u)
				}
			}
		}
		x := float64(j) * zigNorm.w[i]
		if j < zigNorm.k[i] || zigNorm.f[i]+r.Float64()*(zigNorm.f[i-1]-zigNorm.f[i]) < math.Exp(-x*x/2) {
			return signed(x, u)
		}
		u = r.Uint64()
	}
}

// The ziggurats: zigN layers of equal area under the density (e^-x for
// the exponential, e^(-x²/2) for the normal, unnormalised), the base layer
// (index 0) reaching to R and holding the tail beyond it. R is the
// method's for 256 layers; V, each layer's area, follows from it (the
// base layer's rectangle and its tail), and TestZigguratLayers checks that
// the layers built from both close at the density's peak.
const (
	zigN     = 256
	zigExpR  = 7.69711747013104972
	zigExpV  = 3.949659822581572e-3
	zigNormR = 3.6541528853610088
)

// zigNormV is the normal ziggurat's layer area: R f(R) plus the tail's
// area, sqrt(pi/2) erfc(R/sqrt 2).
var zigNormV = zigNormR*math.Exp(-zigNormR*zigNormR/2) + math.Sqrt(math.Pi/2)*math.Erfc(zigNormR/math.Sqrt2)

// zigTable is a ziggurat's tables, for 53-bit draws j: layer i accepts j
// at once if j < k[i] (the part of the layer wholly under the curve),
// returning j*w[i]; f[i] is the density at the layer's outer edge.
type zigTable struct {
	k [zigN]uint64
	w [zigN]float64
	f [zigN]float64
}

var (
	zigExp  = newZiggurat(zigExpR, zigExpV, func(x float64) float64 { return math.Exp(-x) }, func(y float64) float64 { return -math.Log(y) })
	zigNorm = newZiggurat(zigNormR, zigNormV, func(x float64) float64 { return math.Exp(-x * x / 2) }, func(y float64) float64 { return math.Sqrt(-2 * math.Log(y)) })
)

// newZiggurat computes a ziggurat's tables for the density f (decreasing
// on [0, inf), f(0) = 1, finv its inverse), layer area v and base edge r.
// Layer zigN-1 is the one just above the base, with its outer edge at r;
// each layer above it is narrower, with x[i-1] such that the layer between
// f(x[i]) and f(x[i-1]) has area v: f(x[i-1]) = f(x[i]) + v/x[i].
func newZiggurat(r, v float64, f, finv func(float64) float64) zigTable {
	const m = 1 << 53
	var t zigTable
	x := r
	q := v / f(x) // the base layer's width: a rectangle and the tail
	t.k[0] = uint64(x / q * m)
	t.w[0] = q / m
	t.f[0] = 1
	t.w[zigN-1] = x / m
	t.f[zigN-1] = f(x)
	for i := zigN - 2; i >= 1; i-- {
		nx := finv(v/x + f(x))
		t.k[i+1] = uint64(nx / x * m)
		x = nx
		t.f[i] = f(x)
		t.w[i] = x / m
	}
	t.k[1] = 0 // the top layer's inner edge is 0: nothing is wholly under the curve
	return t
}
