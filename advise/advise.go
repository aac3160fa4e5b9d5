package advise

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge/drill"
)

// DefaultPercentiles are the sample percentiles evaluated as hedge delays
// when Options.Percentiles is nil.
var DefaultPercentiles = []float64{50, 60, 70, 80, 90, 95, 99, 99.9}

// Options say what to evaluate. The zero value evaluates
// DefaultPercentiles with the independent estimate only (no load known).
type Options struct {
	// Percentiles are the sample percentiles to try as delays, each in
	// [1, 99.99]. Nil means DefaultPercentiles; empty means none.
	Percentiles []float64
	// Delays are fixed delays to try as well.
	Delays []time.Duration
	// Load is the servers' utilisation without hedging, in (0, 1), for the
	// queueing estimate. Zero infers it from the sample's send times (with
	// Servers) or, without them, skips the queueing estimate.
	Load float64
	// Servers is the number of single-slot servers of the queueing
	// estimate: replicas times the requests each serves at once. Zero
	// means the number of replicas the sample names, or 10.
	Servers int
	// Requests is the number of simulated requests per run of the
	// queueing estimate. Zero means 200,000.
	Requests int
	// Sizes are the queueing estimates to run. Nil means Fresh, Shared
	// and Stalled; Stalled runs only when the sample shows stalls to fit.
	Sizes []Sizes
	// InOrder says the input lists requests in the order they were sent,
	// so that the budget meets them in that order; otherwise (and without
	// send times) they meet it in a seeded random order.
	InOrder bool
	// Seed seeds the random order and the simulation. Zero means 1.
	Seed uint64
	// GRPCService and GRPCMethod name the method in the service-config
	// snippet; empty names every method ("name": [{}]).
	GRPCService, GRPCMethod string
	// SendLag is how long after its delay a hedge actually leaves the
	// client: the timer's lateness (the Go runtime's timers fire up to
	// about a millisecond late under load; hedge.Config.PreciseTimers
	// brings that to tens of microseconds) and, where a cancelled loser
	// closes its connection (HTTP/1.1), the dial of a new one for the
	// copy. Every prediction sends the copy at delay + SendLag, and a
	// primary that answers before then sends none. Zero means on time.
	SendLag time.Duration
	// SendLagP99, if above SendLag, makes the lag random: log-normal, with
	// median SendLag and 99th percentile SendLagP99 (LagPoints), as a
	// timer's lateness is; hedge.Stats.TimerLag's P50 and P99 give both.
	// The independent estimate weighs the lag's whole distribution; the
	// queueing estimate sends each copy SendLag late.
	SendLagP99 time.Duration
}

// Prediction is one way of predicting every choice.
type Prediction struct {
	// Kind is "independent", "independent-local" (with send times only),
	// "queue-fresh", "queue-shared" or "queue-stalls".
	Kind string
	// Title names it for people.
	Title string
	// Assumes lists what it takes for granted, one sentence each.
	Assumes []string
	// Today is the latency without hedging that its ratios compare with:
	// the sample's, or the simulated system's own unhedged run.
	Today Percentiles
	// Rows has two outcomes per choice: without the budget, then with it.
	Rows []Outcome
	// Default, in the queueing estimates, is the library's zero Config
	// (hedge.Config{}) simulated on the same script: a live p95 delay,
	// the default budget, and the rules that hold back hedges to busy
	// replicas and hedges that do not pay, which only a simulation of
	// the replicas can apply. Its Choice.Delay is the mean delay it used.
	// It is not among the rows the recommendation is chosen from: its
	// delay is not one to configure.
	Default *Outcome
}

// Recommendation is the hedge.Config advise recommends, if any.
type Recommendation struct {
	// Outcome is the recommended row of the deciding prediction.
	Outcome Outcome
	// Kind is the prediction it was judged by.
	Kind string
	// Why says how it was chosen.
	Why string
}

// Report is advise's answer.
type Report struct {
	// Source and N describe the sample; Today, Mean its latency.
	Source string
	N      int
	Today  Percentiles
	Mean   time.Duration
	// Notes are facts about the input (histogram resolution, small
	// sample) and the model.
	Notes []string
	// Diagnosis is where the sample suggests its slowness lives.
	Diagnosis Diagnosis
	// Choices are the delays evaluated, ascending.
	Choices []Choice
	// Predictions are the independent estimate, then the queueing
	// estimates that ran.
	Predictions []Prediction
	// Queue is the simulated system, when a queueing estimate ran, and
	// LoadFrom says where its load came from.
	Queue    *QueueModel
	LoadFrom string
	// Stalls is the stall process fitted for the stalled queueing
	// estimate, when it ran.
	Stalls *StallFit
	// Recommended is the recommended configuration, or nil with NoAdvice
	// saying why none is.
	Recommended *Recommendation
	NoAdvice    string
	// GRPCService and GRPCMethod are Options'.
	GRPCService, GRPCMethod string
	// SendLag and SendLagP99 are Options'.
	SendLag, SendLagP99 time.Duration
}

// ErrOptions is wrapped by the errors of invalid Options.
var ErrOptions = errors.New("invalid advise options")

// Advise evaluates hedging s's operation at each choice of delay, with and
// without the library's default budget, by the independent-copies
// estimate and, when the load is known, by the queueing estimate; it
// diagnoses where the slowness lives and recommends a configuration. It
// refuses a sample of fewer than MinSample latencies. It stops early with
// ctx's error.
func Advise(ctx context.Context, s *Sample, o Options) (*Report, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Requests == 0 {
		o.Requests = 200_000
	}
	pcts := o.Percentiles
	if pcts == nil {
		pcts = DefaultPercentiles
	}
	var errs []error
	for _, p := range pcts {
		if !(p >= 1 && p <= 99.99) {
			errs = append(errs, fmt.Errorf("percentile %v: use 1 to 99.99", p))
		}
	}
	for _, d := range o.Delays {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("delay %v: use a positive delay", d))
		}
	}
	if o.Load != 0 && !(o.Load > 0 && o.Load < 1) {
		errs = append(errs, fmt.Errorf("load %v: use a utilisation in (0, 1), such as 0.5, or 0 to infer it", o.Load))
	}
	if o.SendLag < 0 {
		errs = append(errs, fmt.Errorf("send lag %v: use 0 or more, such as 500us for the Go runtime's timers under load", o.SendLag))
	}
	if o.SendLagP99 != 0 && (o.SendLag <= 0 || o.SendLagP99 < o.SendLag) {
		errs = append(errs, fmt.Errorf("send lag p99 %v with a median of %v: give a positive median (SendLag) no larger than the p99, such as 50us and 1ms from hedge.Stats.TimerLag", o.SendLagP99, o.SendLag))
	}
	if o.Servers < 0 || o.Servers == 1 {
		errs = append(errs, fmt.Errorf("servers %d: use 2 or more (0: the replicas the sample names, or 10)", o.Servers))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrOptions, errors.Join(errs...))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := newEmpirical(s.sorted())
	rep := &Report{Source: s.Source, N: s.Len(), Today: e.percentiles(), Mean: time.Duration(e.mean()), GRPCService: o.GRPCService, GRPCMethod: o.GRPCMethod}
	rep.Notes = append(rep.Notes, s.Notes...)
	if s.Len() < 10000 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("With %d latencies the p99.9 rests on %d values: read its predictions as rough.", s.Len(), s.Len()/1000))
	}
	rep.Choices = choices(e, pcts, o.Delays)
	rep.SendLag, rep.SendLagP99 = o.SendLag, o.SendLagP99
	lags := LagPoints(o.SendLag, o.SendLagP99)
	switch {
	case len(lags) > 1:
		rep.Notes = append(rep.Notes, fmt.Sprintf("Copies leave a random time after their delay, log-normal with median %v and p99 %v: the independent estimate weighs the whole distribution, the queueing estimate hedges at delay + %v.", o.SendLag, o.SendLagP99, o.SendLag))
	case o.SendLag > 0:
		rep.Notes = append(rep.Notes, fmt.Sprintf("Copies leave %v after their delay (SendLag): every prediction hedges at delay + %v.", o.SendLag, o.SendLag))
	}
	rep.Diagnosis = diagnose(s, e)

	lat := make([]float64, s.Len())
	for i, d := range s.Latencies {
		lat[i] = float64(d)
	}
	order := replayOrder(s, o.InOrder, o.Seed)
	ind := Prediction{
		Kind:  "independent",
		Title: "Independent copies (exact, from the sample)",
		Today: rep.Today,
		Assumes: []string{
			"A copy's latency is a fresh, independent draw from the sample: latency = min(X1, delay + X2), computed exactly from the sample's distribution.",
			"One replica's latencies stand for all, and a copy adds no load: no queueing is modelled.",
			"Work is server time, taken equal to latency; losers are cancelled when the winner answers.",
			budgetOrder(s, o.InOrder),
		},
	}
	for _, c := range rep.Choices {
		for _, b := range []bool{false, true} {
			o, err := independent(ctx, e, lat, order, c, lags, b, rep.Today)
			if err != nil {
				return nil, err
			}
			ind.Rows = append(ind.Rows, o)
		}
	}
	rep.Predictions = append(rep.Predictions, ind)
	if s.hasTimes() {
		loc := Prediction{
			Kind:  "independent-local",
			Title: "Independent copies of the moment (from the sample's send times)",
			Today: rep.Today,
			Assumes: []string{
				"A copy's latency is drawn from the requests sent within half a delay of the copy's own send time (at most the 64 nearest), not from the whole sample: a copy sent into a burst of slowness is slow too. Informative, not among the estimates the recommendation is judged by.",
				"Otherwise as the independent estimate: one replica's latencies stand for all, a copy adds no load, and work is server time, taken equal to latency.",
			},
		}
		if len(lags) > 1 {
			loc.Assumes = append(loc.Assumes, fmt.Sprintf("Copies leave %v after their delay (the send lag's median).", o.SendLag))
		}
		for _, c := range rep.Choices {
			for _, b := range []bool{false, true} {
				row, err := local(ctx, e, s, lat, order, c, o.SendLag, b, rep.Today)
				if err != nil {
					return nil, err
				}
				loc.Rows = append(loc.Rows, row)
			}
		}
		r := o.Servers
		if r == 0 {
			r = s.replicaCount()
		}
		if r >= 2 {
			def, err := localDefault(ctx, e, s, lat, order, r, o.SendLag, o.Seed, rep.Today)
			if err != nil {
				return nil, err
			}
			loc.Default = &def
			loc.Assumes = append(loc.Assumes, fmt.Sprintf("The default line replays the library's spare-capacity rule on the occupancy the sample records: at each moment a hedge is asked for, the requests in flight then, spread at random over %d replicas, decide whether the copy finds an idle one (otherwise it is asked for again a delay later). Its delay is the sample's p95; its payoff rule is not replayed.", r))
		} else {
			rep.Notes = append(rep.Notes, "The moment-local estimate has no line for the library's default: it needs the number of replicas, from --servers or a replica field.")
		}
		rep.Predictions = append(rep.Predictions, loc)
	}

	m, from, note := queueModel(s, e, o)
	rep.LoadFrom = from
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if m != nil {
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("%w: queueing estimate: %w", ErrOptions, err)
		}
		rep.Queue = m
		sizes := o.Sizes
		if sizes == nil {
			sizes = []Sizes{Fresh, Shared, Stalled}
		}
		for _, sz := range sizes {
			var (
				today Percentiles
				rows  []Outcome
				def   Outcome
				fit   *StallFit
				err   error
			)
			switch {
			case sz != Stalled:
				today, rows, def, err = queueing(ctx, e, *m, sz, rep.Choices, o.SendLag)
			case rep.Diagnosis.Where == InRequests:
				rep.Notes = append(rep.Notes, "No stalled queueing estimate: the slowness looks like it lives in the requests (see below), not in servers that stall.")
				continue
			default:
				var note string
				fit, note, today, rows, def, err = queueStalls(ctx, e, *m, rep.Choices, o.SendLag)
				if err == nil && fit == nil {
					rep.Notes = append(rep.Notes, note)
					continue
				}
				rep.Stalls = fit
			}
			if err != nil {
				return nil, err
			}
			p := Prediction{Kind: "queue-" + sz.String(), Today: today, Rows: rows, Default: &def}
			common := []string{
				fmt.Sprintf("%d FCFS servers with one request in service each, two-choice placement, Poisson arrivals at load %.3g (%s); %d simulated requests, the library's own hedge.Policy deciding (sim.Simulator.RunScript, strategy default).", m.Servers, m.Load, from, m.Requests),
				fmt.Sprintf("The sample's %slatencies are the service times: queueing in the sample is counted twice, so the simulated system (p99 %v without hedging) is slower than today's. Ratios compare with it.", map[bool]string{true: "ordinary "}[sz == Stalled], round(today.P99)),
			}
			switch sz {
			case Fresh:
				p.Title = "Queueing, fresh sizes (simulated)"
				p.Assumes = append([]string{"Every copy draws its own service time from the sample: copies are independent, so a slow request is slow because of where and when it ran."}, common...)
			case Shared:
				p.Title = "Queueing, shared sizes (simulated)"
				p.Assumes = append([]string{"A request's copies share one service time drawn from the sample: a slow request is slow because of what it asks for, and its copy is as slow wherever it runs."}, common...)
			case Stalled:
				p.Title = "Queueing, stalling servers (simulated)"
				p.Assumes = append(stallAssumes(fit), common...)
			}
			rep.Predictions = append(rep.Predictions, p)
		}
	}
	recommend(rep)
	return rep, nil
}

func budgetOrder(s *Sample, inOrder bool) string {
	const b = "With the budget, requests meet a fresh hedge.DefaultBudget() (10% of requests, burst 10) "
	switch {
	case s.hasTimes():
		return b + "in the order they were sent."
	case inOrder:
		return b + "in input order."
	}
	return b + "in a random order (the sample has no send times): bursts of slowness, which the budget caps harder, do not show."
}

// choices returns the delays to evaluate: the sample percentiles and the
// fixed delays, ascending, without duplicates.
func choices(e *empirical, pcts []float64, delays []time.Duration) []Choice {
	var cs []Choice
	for _, p := range pcts {
		// Three significant digits: a delay people can read and write.
		d := round(time.Duration(quantileOf(e.xs, p/100)))
		cs = append(cs, Choice{Label: "p" + strconv.FormatFloat(p, 'f', -1, 64), Percentile: p, Delay: d})
	}
	for _, d := range delays {
		cs = append(cs, Choice{Label: d.String(), Delay: d})
	}
	slices.SortStableFunc(cs, func(a, b Choice) int {
		switch {
		case a.Delay != b.Delay:
			return int(min(max(a.Delay-b.Delay, -1), 1))
		case a.Percentile != b.Percentile:
			return int(math.Copysign(1, a.Percentile-b.Percentile))
		}
		return 0
	})
	return slices.CompactFunc(cs, func(a, b Choice) bool { return a.Label == b.Label })
}

// queueModel returns the queueing estimate's system, where its load comes
// from, and a note when it cannot run.
func queueModel(s *Sample, e *empirical, o Options) (*QueueModel, string, string) {
	servers := o.Servers
	replicas := s.replicaCount()
	serversFrom := "--servers"
	if servers == 0 {
		servers, serversFrom = 10, "default"
		if replicas >= 2 {
			servers, serversFrom = replicas, "the replicas in the sample"
		}
	}
	m := &QueueModel{Load: o.Load, Servers: servers, Requests: o.Requests, Seed: o.Seed}
	if o.Load > 0 {
		return m, "--load", ""
	}
	if !s.hasTimes() {
		return nil, "", "No queueing estimate: the load is unknown. Give --load (the servers' utilisation, such as 0.5), or a sample with send times (--time-field) and --servers."
	}
	t0, t1 := s.Times[0], s.Times[0]
	for _, t := range s.Times {
		if t.Before(t0) {
			t0 = t
		}
		if t.After(t1) {
			t1 = t
		}
	}
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		return nil, "", "No queueing estimate: every request has the same send time, so the load cannot be inferred; give --load."
	}
	rate := float64(s.Len()-1) / span
	load := rate * e.mean() / 1e9 / float64(servers)
	from := fmt.Sprintf("inferred: %.4g requests/s x mean latency %v over %d servers (%s)", rate, round(time.Duration(e.mean())), servers, serversFrom)
	if !(load < 0.98) {
		return nil, "", fmt.Sprintf("No queueing estimate: the inferred load, %s, is %.3g, at or above capacity; the servers must serve several requests at once: give --servers (replicas x concurrency) or --load.", from, load)
	}
	m.Load = max(load, 0.001)
	return m, from, ""
}

// recommend picks the recommended configuration: among the rows with the
// budget (the library's guard against the day everything is slow, which
// no sample shows), those judged TAIL CUT by every deciding prediction,
// the one with the lowest p99 of the most pessimistic of them, preferring
// less extra work within 2% of it; rows without the budget only if none
// with it qualifies. The deciding predictions are the independent one and
// the fresh queueing one, or the shared one when the slowness looks like
// it lives in the requests.
func recommend(rep *Report) {
	byKind := map[string]*Prediction{}
	for i := range rep.Predictions {
		byKind[rep.Predictions[i].Kind] = &rep.Predictions[i]
	}
	var deciding []*Prediction
	if rep.Diagnosis.Where == InRequests {
		rep.NoAdvice = "Do not hedge this operation: its slowness looks like it lives in the requests, where a copy is as slow as the original (see above)."
		if p := byKind["queue-shared"]; p != nil {
			deciding = append(deciding, p)
		} else {
			return
		}
	} else {
		deciding = append(deciding, byKind["independent"])
		if p := byKind["queue-fresh"]; p != nil {
			deciding = append(deciding, p)
		}
	}
	type cand struct {
		i          int
		p99, work  float64
		byKind     string
		withBudget bool
	}
	for _, budget := range []bool{true, false} {
		var cs []cand
		for i := range deciding[0].Rows {
			if deciding[0].Rows[i].Budget != budget {
				continue
			}
			ok := true
			c := cand{i: i, withBudget: budget}
			for _, p := range deciding {
				r := p.Rows[i]
				if r.Verdict != drill.TailCut {
					ok = false
					break
				}
				if r.P99Ratio >= c.p99 {
					c.p99, c.byKind = r.P99Ratio, p.Kind
				}
				c.work = max(c.work, r.ExtraWork)
			}
			if ok {
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			continue
		}
		best := cs[0]
		for _, c := range cs {
			if c.p99 < best.p99 {
				best = c
			}
		}
		pick := best
		for _, c := range cs {
			if c.p99 <= best.p99+0.02 && c.work < pick.work {
				pick = c
			}
		}
		var kinds []string
		for _, p := range deciding {
			kinds = append(kinds, p.Kind)
		}
		why := fmt.Sprintf("TAIL CUT in every deciding prediction (%s) with %s; of those, the lowest p99 (ratio %.2f, by %s), preferring less extra work within 0.02 of it.",
			strings.Join(kinds, ", "), map[bool]string{true: "the default budget", false: "no budget (no row with the budget cut the tail)"}[budget], best.p99, best.byKind)
		rep.Recommended = &Recommendation{Outcome: deciding[0].Rows[pick.i], Kind: deciding[0].Kind, Why: why}
		if rep.Diagnosis.Where == InRequests {
			rep.NoAdvice = ""
		}
		return
	}
	if rep.NoAdvice == "" {
		rep.NoAdvice = "No delay cuts the p99 by more than 5% without excess load in every deciding prediction: hedging would cost more than it buys here."
	}
}
