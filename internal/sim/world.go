package sim

import "math"

// sizer draws service requirements (sizes) for a world. It is a plain value
// with the random source passed in, so one engine can draw request sizes and
// fresh copy sizes from different streams.
type sizer struct {
	kind  World
	fresh bool // each copy draws its own size

	// hyperexponential (balanced means)
	p1, rate1, rate2 float64
	// lognormal
	mu, sigma float64
}

func newSizer(c Config) sizer {
	s := sizer{kind: c.World}
	switch c.World {
	case Noise:
		s.fresh = true
	case BigJobs, Mixed:
		s.p1, s.rate1, s.rate2 = H2Params(c.SCV)
	case LogNormal:
		s.fresh = !c.SameSize
		s.sigma = c.Sigma
		s.mu = -c.Sigma * c.Sigma / 2
	}
	return s
}

// H2Params returns the balanced-means two-phase hyperexponential with mean 1
// and squared coefficient of variation c2 >= 1: with probability p1 a size
// is Exp(rate1), otherwise Exp(rate2), where p1 = (1+sqrt((c2-1)/(c2+1)))/2,
// rate1 = 2 p1 and rate2 = 2 (1-p1). Each phase contributes half the mean.
func H2Params(c2 float64) (p1, rate1, rate2 float64) {
	p1 = (1 + math.Sqrt((c2-1)/(c2+1))) / 2
	return p1, 2 * p1, 2 * (1 - p1)
}

// draw returns one size with mean 1.
func (s *sizer) draw(r *rng) float64 {
	switch s.kind {
	case BigJobs, Mixed:
		if r.Float64() < s.p1 {
			return r.ExpFloat64() / s.rate1
		}
		return r.ExpFloat64() / s.rate2
	case LogNormal:
		return math.Exp(s.mu + s.sigma*r.NormFloat64())
	default: // Noise, Stalls
		return r.ExpFloat64()
	}
}
