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
		Latency:   st.latency.Counts(nil),
		Primary:   st.primary.Counts(nil),
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
