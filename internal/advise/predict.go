package advise

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/drill"
)

// Choice is one hedge delay that advise evaluates: a percentile of the
// sample or a fixed delay the user asked for.
type Choice struct {
	// Label names the choice: "p90", "p99.9" or a duration such as "25ms".
	Label string
	// Percentile is the sample percentile the delay is (0 for a fixed
	// delay given by the user).
	Percentile float64
	// Delay is the hedge delay: hedge.Fixed(Delay).
	Delay time.Duration
}

// Config returns the hedge.Config of the choice: plain hedging, as both
// estimates model it. The delay is hedge.Fixed(Delay), at most two copies
// go, and the budget is the library's default (a fresh
// hedge.DefaultBudget()) or none. The library's evidence rules are
// turned off (MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1):
// latencies alone say nothing of replicas' queues or of which hedges win,
// so neither estimate could account for them. With them on, the library
// sends fewer hedges where they would not pay than these rows predict.
func (c Choice) Config(budget bool) hedge.Config {
	cfg := hedge.Config{Delay: hedge.Fixed(c.Delay), MaxAttempts: 2, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}
	if budget {
		cfg.Budget = hedge.DefaultBudget()
	} else {
		cfg.NoBudget = true
	}
	return cfg
}

// Outcome is what one prediction says of one choice, with or without the
// budget.
type Outcome struct {
	Choice Choice
	// Budget reports whether the library's default budget (10% of
	// requests, burst 10) capped the hedges.
	Budget bool
	// HedgeRate is the share of requests that sent a hedge; with at most
	// two copies it is also the extra requests per request.
	HedgeRate float64
	// P50, P99 and P999 are the predicted latency percentiles with
	// hedging, and the ratios their quotients by today's (Prediction.Today).
	P50, P99, P999                time.Duration
	P50Ratio, P99Ratio, P999Ratio float64
	// ExtraWork is server time spent on all copies over the time spent
	// without hedging, minus 1; losers are cancelled when the winner
	// answers. It differs from HedgeRate: a hedge runs only until one
	// copy answers, and a cancelled slow primary stops costing.
	ExtraWork float64
	// Verdict is the row's outcome in the drill's words (see Judge).
	Verdict drill.Outcome
}

// Judge gives an outcome its verdict by the p99 (P99.Judge).
func Judge(o Outcome) drill.Outcome { return P99.Judge(o) }

// Objective is the tail percentile that advise's verdicts and its
// recommendation are judged by. The zero value is P99.
type Objective int

const (
	// P99 judges by the p99: it rests on ten times as many latencies as
	// the p99.9, so that a sample of a few thousand says something of it.
	P99 Objective = iota
	// P999 judges by the p99.9, for slowness too rare to reach the p99
	// (a stall that catches one request in 500).
	P999
)

// String returns "p99" or "p99.9".
func (obj Objective) String() string {
	if obj == P999 {
		return "p99.9"
	}
	return "p99"
}

// other is the percentile that must not rise: the p99.9 for P99, the
// p99 for P999.
func (obj Objective) other() Objective { return 1 - obj }

// ratio returns o's ratio to today at the objective's percentile.
func (obj Objective) ratio(o Outcome) float64 {
	if obj == P999 {
		return o.P999Ratio
	}
	return o.P99Ratio
}

// ParseObjective reads an objective: p99 or p99.9 (the "p" optional). Its
// error wraps ErrOptions.
func ParseObjective(s string) (Objective, error) {
	switch strings.TrimPrefix(strings.TrimSpace(s), "p") {
	case "99":
		return P99, nil
	case "99.9":
		return P999, nil
	}
	return 0, fmt.Errorf("%w: objective %q: use p99 or p99.9", ErrOptions, s)
}

// Judge gives an outcome its verdict, the drill's rules applied to a
// prediction: EXCESS LOAD when the extra requests or the extra work exceed
// drill.LoadLimit percent; TAIL CUT when the objective's percentile falls
// below today's by more than TailMargin and the other (the p99.9 for the
// p99, the p99 for the p99.9) does not rise by more than it; NO TAIL GAIN
// otherwise. (The drill judges the p95 of twenty requests; with
// thousands, the p99 or the p99.9 is the tail that hedging is for.)
func (obj Objective) Judge(o Outcome) drill.Outcome {
	limit := float64(drill.LoadLimit) / 100
	switch {
	case o.HedgeRate > limit || o.ExtraWork > limit:
		return drill.ExcessLoad
	case obj.ratio(o) < 1-TailMargin && !(obj.other().ratio(o) > 1+TailMargin):
		return drill.TailCut
	}
	return drill.NoTailGain
}

// TailMargin is how far a predicted p99 must fall below today's to count
// as a tail cut (5%), a margin for the noise of the estimates.
const TailMargin = 0.05

// Percentiles is today's p50, p99 and p99.9.
type Percentiles struct {
	P50, P99, P999 time.Duration
}

// empirical is the distribution of a sample: sorted values and their
// prefix sums.
type empirical struct {
	xs     []float64 // ascending, ns
	prefix []float64 // prefix[i] = xs[0] + ... + xs[i-1]
}

func newEmpirical(sorted []float64) *empirical {
	e := &empirical{xs: sorted, prefix: make([]float64, len(sorted)+1)}
	for i, x := range sorted {
		e.prefix[i+1] = e.prefix[i] + x
	}
	return e
}

// above returns how many of sorted exceed t.
func above(sorted []float64, t float64) int {
	return len(sorted) - sort.Search(len(sorted), func(i int) bool { return sorted[i] > t })
}

// surv returns P(X > t).
func (e *empirical) surv(t float64) float64 {
	if t < 0 {
		return 1
	}
	return float64(above(e.xs, t)) / float64(len(e.xs))
}

// meanMin returns E[min(X, a)].
func (e *empirical) meanMin(a float64) float64 {
	if a <= 0 {
		return 0
	}
	k := sort.Search(len(e.xs), func(i int) bool { return e.xs[i] > a })
	return (e.prefix[k] + a*float64(len(e.xs)-k)) / float64(len(e.xs))
}

func (e *empirical) mean() float64 { return e.prefix[len(e.xs)] / float64(len(e.xs)) }

func (e *empirical) percentiles() Percentiles {
	return Percentiles{
		P50:  time.Duration(quantileOf(e.xs, 0.5)),
		P99:  time.Duration(quantileOf(e.xs, 0.99)),
		P999: time.Duration(quantileOf(e.xs, 0.999)),
	}
}

// replayOrder returns the order in which requests met the budget: by send
// time when every latency has one, in input order if inOrder, else a
// seeded random order (a sample with no order must not meet the budget
// sorted).
func replayOrder(s *Sample, inOrder bool, seed uint64) []int {
	idx := make([]int, s.Len())
	for i := range idx {
		idx[i] = i
	}
	switch {
	case s.hasTimes():
		slices.SortStableFunc(idx, func(a, b int) int { return s.Times[a].Compare(s.Times[b]) })
	case inOrder:
	default:
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	}
	return idx
}

// independent predicts a choice with the copy's latency an independent
// draw from the sample: latency = min(X1, d + X2), where d is the delay
// plus the send lag, computed exactly from
// the empirical distribution given which requests hedge. Without the
// budget every request slower than d hedges; with it, the requests meet a
// fresh hedge.DefaultBudget in order (the library's own bucket, credited
// once per request), and those it refuses keep their latency.
func independent(ctx context.Context, e *empirical, lat []float64, order []int, c Choice, lags []time.Duration, budget bool, today Percentiles) (Outcome, error) {
	if len(lags) > 1 {
		return independentLags(ctx, e, lat, order, c, lags, budget, today)
	}
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	d := float64(c.Delay + lags[0])
	b := newBudgetGate(budget)
	var plain, hedged []float64
	work := 0.0
	for _, i := range order {
		x := lat[i]
		if b.request(x > d) {
			hedged = append(hedged, x)
			// E[2L - d] with L = min(x, d + X2): the primary runs until
			// L, the hedge from d until L.
			work += d + 2*e.meanMin(x-d)
			continue
		}
		plain = append(plain, x)
		work += x
	}
	slices.Sort(plain)
	slices.Sort(hedged)
	n := float64(len(lat))
	sl := func(t float64) float64 {
		return (float64(above(plain, t)) + float64(above(hedged, t))*e.surv(t-d)) / n
	}
	q := func(p float64) time.Duration {
		// Nearest rank on the exact distribution: the least t with
		// P(L <= t) >= p. L jumps only at sample values (a primary
		// answers) and at d plus a sample value (a hedge answers).
		target := 1 - p + 1e-12
		first := func(cands []float64, shift float64) float64 {
			k := sort.Search(len(cands), func(i int) bool { return sl(cands[i]+shift) <= target })
			if k == len(cands) {
				return math.Inf(1)
			}
			return cands[k] + shift
		}
		return time.Duration(math.Min(first(e.xs, 0), first(e.xs, d)))
	}
	o := Outcome{Choice: c, Budget: budget, HedgeRate: float64(len(hedged)) / n}
	o.P50, o.P99, o.P999 = q(0.5), q(0.99), q(0.999)
	o.ExtraWork = work/e.prefix[len(e.xs)] - 1
	o.ratios(today)
	o.Verdict = Judge(o)
	return o, nil
}

// independentLags is independent for a copy that leaves a random time
// after its delay, lags[k] with equal weights: the exact distribution for
// each lag, mixed. A request whose primary answers before its copy would
// leave sends none, so the hedge rate falls as the lag grows. With the
// budget, each lag meets a budget of its own, so a request hedges in the
// share of the lags that leave before its primary answers.
func independentLags(ctx context.Context, e *empirical, lat []float64, order []int, c Choice, lags []time.Duration, budget bool, today Percentiles) (Outcome, error) {
	k := float64(len(lags))
	n := float64(len(lat))
	ds := make([]float64, len(lags))
	hedged := make([][]float64, len(lags)) // sorted: the primaries that sent a copy, for each lag
	work, nh := 0.0, 0
	for j, lag := range lags {
		if err := ctx.Err(); err != nil {
			return Outcome{}, err
		}
		d := float64(c.Delay + lag)
		ds[j] = d
		b := newBudgetGate(budget)
		for _, i := range order {
			x := lat[i]
			if b.request(x > d) {
				hedged[j] = append(hedged[j], x)
				work += d + 2*e.meanMin(x-d)
				continue
			}
			work += x
		}
		slices.Sort(hedged[j])
		nh += len(hedged[j])
	}
	all := e.xs // every request: a plain one answers at x, a hedged one at min(x, d + X2)
	sl := func(t float64) float64 {
		s := 0.0
		for j, h := range hedged {
			a := float64(above(h, t))
			s += float64(above(all, t)) - a + a*e.surv(t-ds[j])
		}
		return s / k / n
	}
	// L is a step function of t with jumps at whole nanoseconds (sample
	// values, and delays plus lags plus sample values).
	hi := all[len(all)-1] + slices.Max(ds) + all[len(all)-1] + 1
	o := Outcome{Choice: c, Budget: budget, HedgeRate: float64(nh) / k / n}
	o.P50, o.P99, o.P999 = bisectQuantile(sl, 0.5, hi), bisectQuantile(sl, 0.99, hi), bisectQuantile(sl, 0.999, hi)
	o.ExtraWork = work/k/e.prefix[len(e.xs)] - 1
	o.ratios(today)
	o.Verdict = Judge(o)
	return o, nil
}

// local is the independent estimate with each copy's latency drawn from
// the requests sent within half a delay of the copy's own send time (the
// primary's plus the delay and the lag), instead of from the whole sample:
// a copy meets the conditions of its moment, as the requests sent then
// did, so a copy sent into a burst of slowness (an overloaded client, a
// slow network, every replica busy) is slow too. It needs send times, and
// order must list the requests in the order they were sent. A copy draws
// from at most localPool requests, the nearest to its send time; a copy
// whose window holds no request (requests sparse beside the delay) draws
// from the nearest request sent before its send time and the nearest
// after, the requests of its moment all the same.
func local(ctx context.Context, e *empirical, s *Sample, lat []float64, order []int, c Choice, lag time.Duration, budget bool, today Percentiles) (Outcome, error) {
	d := float64(c.Delay + lag)
	ts := sendTimes(s, order)
	b := newBudgetGate(budget)
	var hedged []momentCopy
	work := 0.0
	for k, i := range order {
		if k%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return Outcome{}, err
			}
		}
		x := lat[i]
		if b.request(x > d) {
			pool := momentPool(e, ts, order, lat, ts[k]+d, float64(c.Delay)/2)
			hedged = append(hedged, momentCopy{x, d, pool})
			work += d + 2*pool.meanMin(x-d)
			continue
		}
		work += x
	}
	o := momentOutcome(e, lat, hedged, work)
	o.Choice, o.Budget = c, budget
	o.ratios(today)
	o.Verdict = Judge(o)
	return o, nil
}

// sendTimes returns the send times of the requests in order, in ns after
// the first.
func sendTimes(s *Sample, order []int) []float64 {
	t0 := s.Times[order[0]]
	ts := make([]float64, len(order))
	for k, i := range order {
		ts[k] = float64(s.Times[i].Sub(t0))
	}
	return ts
}

// momentPool returns what a copy sent at at draws its latency from: the
// requests sent within w of it (ts ascending, order their indices), at
// most localPool of them, the nearest; when none was, the nearest sent
// before at and the nearest after (the whole sample for an empty ts).
func momentPool(e *empirical, ts []float64, order []int, lat []float64, at, w float64) *empirical {
	m := sort.SearchFloat64s(ts, at)
	lo := max(sort.SearchFloat64s(ts, at-w), m-localPool/2)
	hi := min(sort.Search(len(ts), func(j int) bool { return ts[j] > at+w }), m+localPool/2)
	if lo >= hi {
		lo, hi = max(m-1, 0), min(m+1, len(ts))
		if lo >= hi {
			return e
		}
	}
	xs := make([]float64, 0, hi-lo)
	for _, j := range order[lo:hi] {
		xs = append(xs, lat[j])
	}
	slices.Sort(xs)
	return newEmpirical(xs)
}

// momentCopy is a hedged request of a moment-local estimate: its
// primary's latency x, the copy sent d after it, drawing from pool.
type momentCopy struct {
	x, d float64
	pool *empirical
}

// momentOutcome computes the percentiles, hedge rate and extra work of a
// moment-local estimate whose hedged requests are hedged, work being the
// expected server time of all requests.
func momentOutcome(e *empirical, lat []float64, hedged []momentCopy, work float64) Outcome {
	hx := make([]float64, len(hedged))
	for i, h := range hedged {
		hx[i] = h.x
	}
	slices.Sort(hx)
	n := float64(len(lat))
	sl := func(t float64) float64 {
		v := float64(above(e.xs, t) - above(hx, t))
		for _, h := range hedged {
			if h.x > t {
				v += h.pool.surv(t - h.d)
			}
		}
		return v / n
	}
	o := Outcome{HedgeRate: float64(len(hedged)) / n}
	maxD := 0.0
	for _, h := range hedged {
		maxD = max(maxD, h.d)
	}
	hi := e.xs[len(e.xs)-1] + maxD + e.xs[len(e.xs)-1] + 1
	o.P50, o.P99, o.P999 = bisectQuantile(sl, 0.5, hi), bisectQuantile(sl, 0.99, hi), bisectQuantile(sl, 0.999, hi)
	o.ExtraWork = work/e.prefix[len(e.xs)] - 1
	return o
}

// localPool is the most requests a copy of the moment-local estimate
// draws from: enough for a distribution, few enough that a large sample
// at a high rate does not hold a copy of its window per hedge.
const localPool = 64

// bisectQuantile returns the least t in [0, hi] with sl(t) <= 1 - p, sl
// being a survival function that jumps only at whole nanoseconds: the
// upper end of a bracket narrower than a nanosecond is the jump, once
// truncated.
func bisectQuantile(sl func(float64) float64, p, hi float64) time.Duration {
	target := 1 - p + 1e-12
	lo := 0.0
	for hi-lo > 1e-3 {
		mid := (lo + hi) / 2
		if sl(mid) <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return time.Duration(math.Ceil(hi - 1e-3))
}

// LagPoints returns the send lags a prediction weighs equally: lag alone
// when p99 is zero or equal to it, else points of the log-normal
// distribution whose median is lag and whose 99th percentile is p99 (a
// timer's lateness is mostly small with a long tail; hedge.Stats.TimerLag
// gives both).
func LagPoints(lag, p99 time.Duration) []time.Duration {
	if p99 <= lag || lag <= 0 {
		return []time.Duration{lag}
	}
	const k = 100
	z99 := math.Sqrt2 * math.Erfinv(2*0.99-1)
	sigma := math.Log(float64(p99)/float64(lag)) / z99
	out := make([]time.Duration, k)
	for i := range out {
		z := math.Sqrt2 * math.Erfinv(2*(float64(i)+0.5)/k-1)
		out[i] = time.Duration(math.Round(float64(lag) * math.Exp(sigma*z)))
	}
	return out
}

// ratios fills the ratio fields from today's percentiles.
func (o *Outcome) ratios(today Percentiles) {
	r := func(a, b time.Duration) float64 {
		if b <= 0 {
			return math.NaN()
		}
		return float64(a) / float64(b)
	}
	o.P50Ratio, o.P99Ratio, o.P999Ratio = r(o.P50, today.P50), r(o.P99, today.P99), r(o.P999, today.P999)
}
