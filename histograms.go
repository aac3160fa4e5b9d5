package hedge

import (
	"slices"
	"strings"

	"github.com/tailcut/hedge/quantile"
)

// Histograms is a copy of the bucket counts behind the latency
// Distributions of one operation class, for exporters that keep buckets of
// their own (a Prometheus native histogram, an OpenTelemetry exponential
// histogram). Values are nanoseconds, in the log-linear buckets of package
// quantile (64 per power of two, see quantile.Bucket); each field is the
// histogram of the Stats field of the same name.
//
// Reading them is scrape-side work only: the [Hedger] records into these
// histograms whether or not anyone reads them, so [Histograms] adds nothing
// to a call of Do.
type Histograms struct {
	Op string // operation class

	Latency   quantile.Counts // Stats.Latency: what callers saw
	Primary   quantile.Counts // Stats.Primary: the primary alone, censored
	HedgePath quantile.Counts // Stats.HedgePath: hedge copies from send to success
	Holdout   quantile.Counts // Stats.Holdout: the rollout's control group
}

func (st *opState) histograms() Histograms {
	return Histograms{
		Op:        st.name,
		Latency:   addCounts(st.latency.Counts(nil), st.alone.Counts(nil)),
		Primary:   addCounts(st.primary.Counts(nil), st.alone.Counts(nil)),
		HedgePath: st.hedge.Counts(nil),
		Holdout:   st.holdout.Counts(nil),
	}
}

// Histograms returns the latency bucket counts of every operation class
// seen so far, sorted by name, like Stats. A copy taken while calls run is
// consistent within each histogram (its Count is the sum of its buckets)
// but not with a Stats snapshot taken at another moment; once calls stop,
// each Count equals the Count of the matching [Distribution] of Stats.
func (h *Hedger) Histograms() []Histograms {
	ops := h.classes()
	out := make([]Histograms, 0, len(ops))
	for _, st := range ops {
		out = append(out, st.histograms())
	}
	slices.SortFunc(out, func(a, b Histograms) int { return strings.Compare(a.Op, b.Op) })
	return out
}

// addCounts returns the counts of the values of a and b together: their
// buckets, each in increasing order, merged, and the counts of a bucket
// both hold added. It is how Latency and Primary take in opState.alone.
func addCounts(a, b quantile.Counts) quantile.Counts {
	if len(b.Buckets) == 0 {
		a.Sum += b.Sum
		return a
	}
	if len(a.Buckets) == 0 {
		b.Sum += a.Sum
		return b
	}
	out := quantile.Counts{Count: a.Count + b.Count, Sum: a.Sum + b.Sum,
		Buckets: make([]quantile.Bucket, 0, len(a.Buckets)+len(b.Buckets))}
	i, j := 0, 0
	for i < len(a.Buckets) || j < len(b.Buckets) {
		switch {
		case j == len(b.Buckets) || i < len(a.Buckets) && a.Buckets[i].Lo < b.Buckets[j].Lo:
			out.Buckets = append(out.Buckets, a.Buckets[i])
			i++
		case i == len(a.Buckets) || b.Buckets[j].Lo < a.Buckets[i].Lo:
			out.Buckets = append(out.Buckets, b.Buckets[j])
			j++
		default:
			x := a.Buckets[i]
			x.Count += b.Buckets[j].Count
			out.Buckets = append(out.Buckets, x)
			i++
			j++
		}
	}
	return out
}
