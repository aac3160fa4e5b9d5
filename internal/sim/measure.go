package sim

import (
	"context"
	"math"
	"slices"

	"github.com/tailcut/hedge/quantile"

	"github.com/tailcut/hedge/internal/decide"
)

// RunResult holds the measures of one run, over its measured requests
// (those after the warm-up).
type RunResult struct {
	// Requests is how many requests were measured.
	Requests int
	// Mean and the nearest-rank percentiles of request latency, exact
	// over the measured requests.
	Mean, P50, P95, P99, P999 float64
	// UnitP95 is the p95 latency of the unit that is hedged: the
	// sub-request with Fanout > 1, else the request (equal to P95).
	UnitP95 float64
	// With Fanout > 1: LeafP50, LeafP99 and LeafP999 are the nearest-rank
	// percentiles of the measured sub-requests' latencies (each from its
	// own start; with FanoutNeed, of those that answered: a sub-request
	// cancelled once its request had enough has no latency, so these are
	// the fastest leaves'), and Copies is the mean number of copies the measured
	// requests' sub-requests placed, per request (Fanout with no hedge).
	LeafP50, LeafP99, LeafP999 float64
	Copies                     float64
	// HedgedFraction is the share of units that sent a second copy.
	HedgedFraction float64
	// MultiStarted is the share of units of which more than one copy
	// started service (0 for tied with instant cancellation).
	MultiStarted float64
	// ExtraWork is the work processed on all copies of the measured units,
	// partial work of cancelled copies included, divided by the total size
	// of their primary copies, minus 1.
	ExtraWork float64
	// Utilisation is the fraction of server-time with a copy in service,
	// over the measurement window (from the arrival of the first measured
	// request to the arrival of the first request after the last measured
	// one).
	Utilisation float64
	// Load is the load realised over that window: requests that arrived
	// in it per unit time, times Fanout, over Servers.
	Load float64
	// StalledFraction is the fraction of server-time spent stalled over
	// the same window.
	StalledFraction float64
	// Delay is the mean hedge delay in force when the measured units
	// arrived (0 when the strategy does not hedge, or when no measured
	// unit had a finite delay).
	Delay float64
	// Events is how many events the run processed.
	Events int64
	// Refused counts, for hedging strategies, the copies of measured units
	// that the library's Policy refused, indexed by hedge.Refusal:
	// Refused[hedge.RefusedBudget] is budget refusals. (A unit that has
	// sent MaxAttempts copies is not counted.)
	Refused [decide.NumRefusals]int64
	// ShadowHedges counts the copies of measured units that Shadow mode
	// would have sent.
	ShadowHedges int64
	// Preempted counts, with Config.LowPriorityCopies, the times a
	// primary took a server from a copy of a measured unit in service.
	Preempted int64
	// RefusedByServer counts, with Config.IdleOnlyCopies, the copies of
	// measured units that a busy server refused.
	RefusedByServer int64
	// SpareMoved counts, with strategy TiedSpare, the measured units that
	// their spare ran, on an idle server, in place of a primary that
	// would have waited.
	SpareMoved int64
	// Tail, with Config.Tail, holds the latency at each tail probability
	// of TailLevels: Tail[i] is the nearest-rank quantile 1 - TailLevels[i].
	Tail []float64
	// With Config.FanCall, for the measured fan-out requests: FanExtra is
	// the mean extra copies (hedges) their sub-requests sent per request
	// (divide by Fanout for the share of extra leaf requests), FanMost
	// the most one request sent, and FanPeak the most extra copies of one
	// request in flight at once (decide.Fan's Extra and Peak).
	// Refused[hedge.RefusedFanOut] counts the copies a request's own
	// budget or cap held back.
	FanExtra         float64
	FanMost, FanPeak int
}

// TailLevels are the tail probabilities P(latency > t) at which a run
// reports t when Config.Tail is set: enough points, spaced evenly on a log
// scale, to draw a CCDF from the median down to one request in 10,000.
var TailLevels = []float64{0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001, 0.0005, 0.0003, 0.0002, 0.0001}

// Simulator runs simulations, reusing its memory from one run to the next.
// A Simulator is not safe for concurrent use; use one per goroutine. The
// zero value is ready to use.
type Simulator struct {
	// Trace, if set, is told every decision of RunScript's runs: each
	// copy sent and each copy the library's Policy refused.
	Trace func(TraceEvent)
	// Done, if set, is told of every request as it completes, warm-up
	// included, in completion order: to follow latency over time, as a
	// recovery after a slowdown needs (Completion).
	Done func(Completion)

	e engine
}

// Completion is one request's end, reported to Simulator.Done.
type Completion struct {
	// Arrival is when the request arrived and Latency how long it took,
	// in time units.
	Arrival, Latency float64
	// Copies is how many copies it placed (1: no hedge went).
	Copies int
	// Measured says that the request counts in the run's results (it
	// arrived after the warm-up).
	Measured bool
	// Client is the client whose request it was, from 0 (see
	// Config.Clients).
	Client int
}

// Run validates c and runs it once with seed c.Seed.
func (s *Simulator) Run(c Config) (RunResult, error) {
	return s.RunContext(context.Background(), c)
}

// RunContext is Run that stops early, with ctx's error and no result,
// once ctx has ended: the event loop checks it every few thousand events.
func (s *Simulator) RunContext(ctx context.Context, c Config) (RunResult, error) {
	if err := c.Validate(); err != nil {
		return RunResult{}, err
	}
	e := &s.e
	e.init(c)
	e.doneFn = s.Done
	e.ctx = ctx
	e.run()
	e.doneFn, e.ctx = nil, nil
	if err := e.err; err != nil {
		e.err = nil
		return RunResult{}, err
	}
	return e.result(), nil
}

// Run runs c once on a fresh Simulator.
func Run(c Config) (RunResult, error) {
	var s Simulator
	return s.Run(c)
}

func (e *engine) result() RunResult {
	var r RunResult
	r.Requests = len(e.lat)
	sum := 0.0
	for _, x := range e.lat {
		sum += x
	}
	if len(e.lat) > 0 {
		r.Mean = sum / float64(len(e.lat))
	}
	qs := []float64{0.5, 0.95, 0.99, 0.999}
	if e.c.Tail {
		// One call for both lists: with many quantiles, quantiles selects
		// each in the part above the previous one, once for all.
		for _, l := range TailLevels {
			qs = append(qs, 1-l)
		}
		slices.Sort(qs)
		qs = slices.Compact(qs)
	}
	q := quantiles(e.lat, qs)
	at := func(p float64) float64 {
		i, _ := slices.BinarySearch(qs, p)
		return q[i]
	}
	r.P50, r.P95, r.P99, r.P999 = at(0.5), at(0.95), at(0.99), at(0.999)
	r.UnitP95 = r.P95
	if e.c.Tail {
		r.Tail = make([]float64, len(TailLevels))
		for i, l := range TailLevels {
			r.Tail[i] = at(1 - l)
		}
	}
	if e.c.Fanout > 1 {
		uq := quantiles(e.unitLat, []float64{0.5, 0.95, 0.99, 0.999})
		r.LeafP50, r.UnitP95, r.LeafP99, r.LeafP999 = uq[0], uq[1], uq[2], uq[3]
		if r.Requests > 0 {
			r.Copies = float64(e.copies) / float64(r.Requests)
		}
	}
	if e.units > 0 {
		r.HedgedFraction = float64(e.hedged) / float64(e.units)
		r.MultiStarted = float64(e.multiRan) / float64(e.units)
	}
	if e.sizeSum > 0 {
		r.ExtraWork = e.workSum/e.sizeSum - 1
	}
	if span := e.tEnd - e.tStart; span > 0 {
		r.Utilisation = e.busyInt / (span * float64(e.c.Servers))
		r.StalledFraction = e.stallInt / (span * float64(e.c.Servers))
		r.Load = float64(e.c.Requests-e.c.Warmup) * float64(e.c.Fanout) / (span * float64(e.c.Servers))
	}
	if e.delayN > 0 {
		r.Delay = e.delaySum / float64(e.delayN)
	}
	r.Events = e.events
	r.Refused = e.refused
	r.ShadowHedges = e.shadow
	r.Preempted = e.preempted
	r.RefusedByServer = e.refusedByServer
	r.SpareMoved = e.spareMoves
	if e.fanReqs > 0 {
		r.FanExtra = float64(e.fanExtra) / float64(e.fanReqs)
	}
	r.FanMost, r.FanPeak = e.fanMost, e.fanPeak
	return r
}

// quantiles returns the nearest-rank quantiles qs (ascending fractions) of
// xs, exactly. It may reorder xs.
//
// Quickselect over all of a run's latencies costs a few percent of the run:
// about three comparisons per value, each a coin toss for the branch
// predictor. So a few quantiles of many values are each bracketed first
// (bracketSelect): a pass over xs leaves a few percent of the values to
// select among. Otherwise, and for a quantile whose bracket misses, each
// quantile is selected in the part of xs above the previous one, which
// costs less than a pass per quantile when there are many.
func quantiles(xs []float64, qs []float64) []float64 {
	out := make([]float64, len(qs))
	n := len(xs)
	if n == 0 {
		return out
	}
	var sample, buf []float64
	if n >= bracketMin && len(qs) <= maxBracketed {
		// Evenly spaced through xs, whose order (completion order) has
		// nothing to do with the values'.
		sample = make([]float64, min(n/16, 8192))
		for i := range sample {
			sample[i] = xs[i*n/len(sample)]
		}
		slices.Sort(sample)
	}
	lo := 0
	for i, q := range qs {
		k := quantile.Rank(q, n) - 1
		if sample != nil {
			var ok bool
			if out[i], buf, ok = bracketSelect(xs, k, sample, buf[:0]); ok {
				continue
			}
		}
		k = max(k, lo)
		selectK(xs[lo:], k-lo)
		out[i] = xs[k]
		lo = k
	}
	return out
}

// quantiles brackets at most maxBracketed quantiles of at least
// bracketMin values.
const (
	bracketMin   = 4096
	maxBracketed = 4
)

// bracketSelect returns the value of rank k (from 0) in xs, without
// reordering xs, and reports whether it found it. sample is a sorted sample
// of xs: two of its values hold rank k between them with a wide margin
// (four standard deviations of a sample rank, plus two). One pass counts
// the values below the lower one and gathers those between the two into
// buf, and rank k is selected among these. It is not found only if the
// sample misrepresents xs: for independent values, about one time in
// 10,000.
func bracketSelect(xs []float64, k int, sample, buf []float64) (float64, []float64, bool) {
	n, s := len(xs), float64(len(sample))
	p := (float64(k) + 0.5) / float64(n)
	d := 4*math.Sqrt(s*p*(1-p)) + 2
	lo, hi := math.Inf(-1), math.Inf(1)
	if i := math.Floor(p*s - d); i >= 0 {
		lo = sample[int(i)]
	}
	if i := math.Ceil(p*s + d); i < s {
		hi = sample[int(i)]
	}
	below := 0
	for _, x := range xs {
		// Counted without a branch: up to half the values are below lo.
		ge := b2i(x >= lo)
		below += 1 - ge
		if ge&b2i(x <= hi) != 0 {
			buf = append(buf, x)
		}
	}
	r := k - below
	if r < 0 || r >= len(buf) {
		return 0, buf, false
	}
	selectK(buf, r)
	return buf[r], buf, true
}

// selectK reorders a so that a[k] is the value of rank k (from 0), with no
// larger value before it and no smaller one after it. Quickselect with a
// median-of-three pivot; the data here are random, so the expected linear
// time is what it gets.
func selectK(a []float64, k int) {
	lo, hi := 0, len(a)-1
	for hi > lo {
		if hi-lo < 16 {
			// insertion sort the small range
			for i := lo + 1; i <= hi; i++ {
				x := a[i]
				j := i - 1
				for j >= lo && a[j] > x {
					a[j+1] = a[j]
					j--
				}
				a[j+1] = x
			}
			return
		}
		mid := int(uint(lo+hi) >> 1)
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		p := a[mid]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// Now a[lo..j] <= p <= a[i..hi], and a[j+1..i-1] == p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

// Estimate is a mean across runs and its standard error (the standard
// deviation across runs divided by the square root of their number; 0 for
// a single run).
type Estimate struct {
	Value float64 `json:"value"`
	SE    float64 `json:"se"`
}

func estimate(xs []float64) Estimate {
	n := float64(len(xs))
	if n == 0 {
		return Estimate{}
	}
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= n
	if n < 2 {
		return Estimate{Value: m}
	}
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return Estimate{Value: m, SE: math.Sqrt(v/(n-1)) / math.Sqrt(n)}
}

// Summary aggregates the runs of one point.
type Summary struct {
	Config Config
	Runs   []RunResult
	// Mean, the percentiles and the other measures: the mean across runs
	// and its standard error.
	Mean, P50, P95, P99, P999 Estimate
	UnitP95                   Estimate
	// LeafP50, LeafP99, LeafP999 and Copies are RunResult's (Fanout > 1).
	LeafP50, LeafP99, LeafP999, Copies Estimate
	HedgedFraction                     Estimate
	MultiStarted                       Estimate
	ExtraWork                          Estimate
	Utilisation                        Estimate
	StalledFraction                    Estimate
	Delay                              Estimate
	// Preempted, RefusedByServer and SpareMoved are RunResult's per
	// measured request.
	Preempted, RefusedByServer, SpareMoved Estimate
	// FanExtra is RunResult.FanExtra, FanRefused the copies refused by
	// the fan-out requests' own budget or cap per measured request, and
	// FanMost and FanPeak the largest of RunResult's over the runs
	// (Config.FanCall).
	FanExtra, FanRefused Estimate
	FanMost, FanPeak     int
	Events               int64
	// Tail, with Config.Tail, is the mean across runs of RunResult.Tail.
	Tail []Estimate
}

// Summarize aggregates runs of the point c.
func Summarize(c Config, runs []RunResult) Summary {
	s := Summary{Config: c, Runs: runs}
	col := func(f func(*RunResult) float64) Estimate {
		xs := make([]float64, len(runs))
		for i := range runs {
			xs[i] = f(&runs[i])
		}
		return estimate(xs)
	}
	s.Mean = col(func(r *RunResult) float64 { return r.Mean })
	s.P50 = col(func(r *RunResult) float64 { return r.P50 })
	s.P95 = col(func(r *RunResult) float64 { return r.P95 })
	s.P99 = col(func(r *RunResult) float64 { return r.P99 })
	s.P999 = col(func(r *RunResult) float64 { return r.P999 })
	s.UnitP95 = col(func(r *RunResult) float64 { return r.UnitP95 })
	s.LeafP50 = col(func(r *RunResult) float64 { return r.LeafP50 })
	s.LeafP99 = col(func(r *RunResult) float64 { return r.LeafP99 })
	s.LeafP999 = col(func(r *RunResult) float64 { return r.LeafP999 })
	s.Copies = col(func(r *RunResult) float64 { return r.Copies })
	s.HedgedFraction = col(func(r *RunResult) float64 { return r.HedgedFraction })
	s.MultiStarted = col(func(r *RunResult) float64 { return r.MultiStarted })
	s.ExtraWork = col(func(r *RunResult) float64 { return r.ExtraWork })
	s.Utilisation = col(func(r *RunResult) float64 { return r.Utilisation })
	s.StalledFraction = col(func(r *RunResult) float64 { return r.StalledFraction })
	s.Delay = col(func(r *RunResult) float64 { return r.Delay })
	s.Preempted = col(func(r *RunResult) float64 { return float64(r.Preempted) / float64(max(1, r.Requests)) })
	s.RefusedByServer = col(func(r *RunResult) float64 { return float64(r.RefusedByServer) / float64(max(1, r.Requests)) })
	s.SpareMoved = col(func(r *RunResult) float64 { return float64(r.SpareMoved) / float64(max(1, r.Requests)) })
	s.FanExtra = col(func(r *RunResult) float64 { return r.FanExtra })
	s.FanRefused = col(func(r *RunResult) float64 {
		return float64(r.Refused[decide.RefusedFanOut]) / float64(max(1, r.Requests))
	})
	for _, r := range runs {
		s.Events += r.Events
		s.FanMost, s.FanPeak = max(s.FanMost, r.FanMost), max(s.FanPeak, r.FanPeak)
	}
	if c.Tail && len(runs) > 0 {
		s.Tail = make([]Estimate, len(TailLevels))
		for i := range TailLevels {
			s.Tail[i] = col(func(r *RunResult) float64 { return r.Tail[i] })
		}
	}
	return s
}

// Ratio returns a/b for two per-run measures of paired points (run i of
// each shares its seed) and the standard error of the ratio by the delta
// method on the paired differences a_i - R b_i, which is valid whether or
// not the pairs are correlated.
func Ratio(a, b []float64) Estimate {
	if len(a) != len(b) || len(a) == 0 {
		return Estimate{Value: math.NaN()}
	}
	ea, eb := estimate(a), estimate(b)
	if eb.Value == 0 {
		return Estimate{Value: math.NaN()}
	}
	R := ea.Value / eb.Value
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - R*b[i]
	}
	ed := estimate(d)
	return Estimate{Value: R, SE: ed.SE / eb.Value}
}
