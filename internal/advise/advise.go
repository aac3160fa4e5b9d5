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

	"github.com/tailcut/hedge/internal/drill"
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
	// queueing estimate. Zero infers it from the sample's send times or,
	// without them, skips the queueing estimate.
	Load float64
	// Replicas is the number of replicas the requests were spread over:
	// the moment-local default line replays the spare-capacity rule on
	// them, and the queueing estimate simulates Replicas x Concurrency
	// servers. Zero means the number the sample names (a replica field),
	// or for the queueing estimate 10. One is refused: a copy needs
	// another replica.
	Replicas int
	// Concurrency is how many requests each replica serves at once: the
	// queueing estimate's servers have one slot each, so a replica is
	// Concurrency of them. Zero means 1.
	Concurrency int
	// Servers is the queueing estimate's number of single-slot servers
	// (replicas x concurrency) as one number, as the --servers flag gave
	// it. It cannot also say how many replicas the replay has, so Advise
	// refuses it with Replicas or Concurrency, and on a sample with send
	// times that does not name its replicas; give Replicas and
	// Concurrency instead.
	Servers int
	// Objective is the tail percentile the verdicts and the
	// recommendation are judged by: P99 (the zero value) or P999.
	Objective Objective
	// PlainHedging makes the recommended configuration the plain hedging
	// the rows predict, with the library's spare-capacity and payoff rules
	// turned off (MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1).
	// By default the recommendation keeps them: they only hold back hedges
	// that find every replica busy or do not win, which latencies alone
	// cannot foresee.
	PlainHedging bool
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
	// In the moment-local estimate, it is the zero Config's own decision
	// replayed on the sample's requests (see the package doc), with the
	// sample's p95 for delay. It is not among the rows the recommendation
	// is chosen from: its delay is not one to configure.
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
	// Predicted is the recommended configuration as the library runs it
	// (Outcome.LibraryConfig: its spare-capacity and payoff rules on,
	// unless Options.PlainHedging), predicted by PredictedKind, the
	// prediction whose default line leads the report: the moment-local
	// replay or the queueing simulation, each driving the library's own
	// decision. The rows, and so Outcome, model plain hedging, which the
	// rules may hold back far below. Nil when no prediction can apply the
	// rules (no load, and no send times with replicas): Outcome's hedge
	// rate is then an upper bound.
	Predicted     *Outcome
	PredictedKind string
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
	// Objective and PlainHedging are Options': the percentile the
	// verdicts are judged by, and whether the recommendation turns the
	// library's evidence rules off.
	Objective    Objective
	PlainHedging bool
}

// ErrOptions is wrapped by the errors of invalid Options.
var ErrOptions = errors.New("invalid advise options")

// ErrServers is wrapped, with ErrOptions, by the error of Options.Servers
// where it is ambiguous: given with Replicas or Concurrency, or on a
// sample with send times that does not name its replicas, where it could
// be the replicas the replay needs or replicas x concurrency.
var ErrServers = errors.New("servers is ambiguous: give --replicas (the replicas the requests were spread over) and, if each serves several requests at once, --concurrency (the queueing estimate simulates replicas x concurrency servers)")

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
	if o.Replicas < 0 || o.Replicas == 1 {
		errs = append(errs, fmt.Errorf("replicas %d: use 2 or more, a copy needs another replica (0: the replicas the sample names)", o.Replicas))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency %d: use 1 or more requests each replica serves at once (0: 1)", o.Concurrency))
	}
	switch {
	case o.Servers < 0 || o.Servers == 1:
		errs = append(errs, fmt.Errorf("servers %d: use 2 or more (0: replicas x concurrency)", o.Servers))
	case o.Servers > 0 && (o.Replicas > 0 || o.Concurrency > 0):
		errs = append(errs, fmt.Errorf("servers %d with replicas %d and concurrency %d: %w", o.Servers, o.Replicas, o.Concurrency, ErrServers))
	case o.Servers > 0 && s.hasTimes() && !s.hasReplicas():
		errs = append(errs, fmt.Errorf("servers %d on a sample with send times: %w", o.Servers, ErrServers))
	}
	if o.Objective != P99 && o.Objective != P999 {
		errs = append(errs, fmt.Errorf("objective %d: use P99 or P999", o.Objective))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrOptions, errors.Join(errs...))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := newEmpirical(s.sorted())
	rep := &Report{Source: s.Source, N: s.Len(), Today: e.percentiles(), Mean: time.Duration(e.mean()), GRPCService: o.GRPCService, GRPCMethod: o.GRPCMethod,
		Objective: o.Objective, PlainHedging: o.PlainHedging}
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
				"A copy's latency is drawn from the requests sent within half a delay of the copy's own send time (at most the 64 nearest; when none was, the nearest before and after), not from the whole sample: a copy sent into a burst of slowness is slow too. Informative, not among the estimates the recommendation is judged by.",
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
		r := o.Replicas
		if r == 0 {
			r = s.replicaCount()
		}
		if r >= 2 {
			def, held, err := localDefault(ctx, e, s, lat, order, r, o.SendLag, o.Seed, rep.Today)
			if err != nil {
				return nil, err
			}
			loc.Default = &def
			spread := fmt.Sprintf("spread at random over %d replicas as the library's picker spreads them (a copy drawing from its moment's requests on every replica)", r)
			if replicaNames(s, r) != nil {
				spread = fmt.Sprintf("each on the replica of %d it was sent to (a copy drawing from its moment's requests on the replica it goes to)", r)
			}
			loc.Assumes = append(loc.Assumes,
				fmt.Sprintf("The default line replays the sample's requests in the order they were sent, %s, and lets the library's own decision (decide.Policy, driven as Do drives it) rule on every copy: the sample's p95 for delay (where the live p95 of primaries settles), the spare-capacity rule on the occupancy the replay records (a copy only to an idle replica, asked for again a delay later; none while fewer than a quarter of primaries find their replica idle), the payoff rule (hedges classed by what the client saw of the primary's replica, held back while they neither win nor lose cheaply, learning from the replay's own outcomes) and the default budget.", spread),
				"Approximations of the default line: the delay is the sample's p95 throughout, where the library's follows the latencies as they move; the primaries' latencies are the sample's whatever the copies do (a copy adds no load to the servers), and a copy's latency is drawn from its moment's requests, one draw deciding the replay's course (which copy answers first, what the rules learn) while the percentiles and work average over the whole pool.",
				heldBack(held))
		} else {
			rep.Notes = append(rep.Notes, "The moment-local estimate has no line for the library's default: it needs the number of replicas, from --replicas or a replica field.")
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
				fmt.Sprintf("%d FCFS servers with one request in service each, two-choice placement, Poisson arrivals at load %.3g (%s); %d simulated requests, the library's own decide.Policy deciding (sim.Simulator.RunScript, strategy default).", m.Servers, m.Load, from, m.Requests),
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
	// Every row's verdict by the objective: the estimates judge by the p99.
	for i := range rep.Predictions {
		p := &rep.Predictions[i]
		for j := range p.Rows {
			p.Rows[j].Verdict = o.Objective.Judge(p.Rows[j])
		}
		if p.Default != nil {
			p.Default.Verdict = o.Objective.Judge(*p.Default)
		}
	}
	recommend(rep)
	if err := predictRecommended(ctx, rep, e, s, lat, order, o); err != nil {
		return nil, err
	}
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
// from, and a note when it cannot run. Its servers are Options.Servers, or
// the replicas (Options.Replicas, the sample's, or 10) times
// Options.Concurrency.
func queueModel(s *Sample, e *empirical, o Options) (*QueueModel, string, string) {
	servers, serversFrom := o.Servers, "--servers"
	if servers == 0 {
		r, rFrom := o.Replicas, "--replicas"
		if r == 0 {
			r, rFrom = 10, "10 replicas by default"
			if n := s.replicaCount(); n >= 2 {
				r, rFrom = n, "the replicas in the sample"
			}
		}
		k := max(o.Concurrency, 1)
		servers, serversFrom = r*k, rFrom
		if o.Concurrency > 0 {
			serversFrom = fmt.Sprintf("%d replicas (%s) x %d (--concurrency)", r, rFrom, k)
		}
	}
	m := &QueueModel{Load: o.Load, Servers: servers, Requests: o.Requests, Seed: o.Seed}
	if o.Load > 0 {
		return m, "--load", ""
	}
	if !s.hasTimes() {
		return nil, "", "No queueing estimate: the load is unknown. Give --load (the servers' utilisation, such as 0.5), or a sample with send times (--time-field) and --replicas."
	}
	r := activeRate(s.Times)
	if !(r.rate > 0) {
		return nil, "", "No queueing estimate: every request has the same send time, so the load cannot be inferred; give --load."
	}
	load := r.rate * e.mean() / 1e9 / float64(servers)
	from := fmt.Sprintf("inferred: %.4g requests/s x mean latency %v over %d servers (%s)", r.rate, round(time.Duration(e.mean())), servers, serversFrom)
	if r.idle > 0 {
		from += fmt.Sprintf("; the rate over the %v in which requests were sent, leaving out %d idle gaps longer than %v (%v in all)", round(r.active), r.idle, round(r.gap), round(r.idleTime))
	}
	if !(load < 0.98) {
		return nil, "", fmt.Sprintf("No queueing estimate: the inferred load, %s, is %.3g, at or above capacity; the servers must serve several requests at once: give --concurrency (the requests each replica serves at once) or --load.", from, load)
	}
	m.Load = max(load, 0.001)
	return m, from, ""
}

// sendRate is the request rate of a sample over the spans in which its
// requests were sent.
type sendRate struct {
	rate             float64       // requests per second
	active, idleTime time.Duration // time sending, and in the idle gaps left out
	idle             int           // idle gaps left out
	gap              time.Duration // the shortest gap counted as idle
}

// idleGaps is how many times the typical gap between send times a gap
// must exceed to count as idle. Poisson arrivals leave a gap of twenty
// times their median (about fourteen times the mean) once in a million.
const idleGaps = 20

// activeRate returns the rate at which the requests were sent, leaving out
// the idle gaps between bursts of sending (a recording of blocks, a
// client that paused): the gaps between consecutive send times longer
// than idleGaps times the typical gap, the median one, or the smallest
// positive one when most requests share a send time (a clock too coarse
// for the rate). The rate is the gaps counted over their total.
func activeRate(times []time.Time) sendRate {
	ts := slices.Clone(times)
	slices.SortFunc(ts, time.Time.Compare)
	gaps := make([]time.Duration, len(ts)-1)
	for i := range gaps {
		gaps[i] = ts[i+1].Sub(ts[i])
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	typical := sorted[len(sorted)/2]
	if typical == 0 {
		k, _ := slices.BinarySearch(sorted, 1)
		if k == len(sorted) {
			return sendRate{}
		}
		typical = sorted[k]
	}
	r := sendRate{gap: idleGaps * typical}
	n := 0
	for _, g := range gaps {
		if g > r.gap {
			r.idle++
			r.idleTime += g
			continue
		}
		n++
		r.active += g
	}
	if r.active > 0 {
		r.rate = float64(n) / r.active.Seconds()
	}
	return r
}

// recommend picks the recommended configuration: among the rows with the
// budget (the library's guard against the day everything is slow, which
// no sample shows), those judged TAIL CUT by every deciding prediction,
// the one with the lowest ratio at the objective's percentile of the most
// pessimistic of them, preferring less extra work within 0.02 of it; rows
// without the budget only if none with it qualifies. The deciding
// predictions are the independent one and the fresh queueing one, or the
// shared one when the slowness looks like it lives in the requests. When
// none qualifies and the other objective would have found one, NoAdvice
// says so.
func recommend(rep *Report) {
	rec, no := pick(rep, rep.Objective)
	rep.Recommended, rep.NoAdvice = rec, no
	if rec != nil {
		return
	}
	other := rep.Objective.other()
	if alt, _ := pick(rep, other); alt != nil {
		// The cut is the deciding prediction's: from its own latency
		// without hedging, which a simulation's queues make slower than
		// the sample's.
		o, base := alt.Outcome, rep.Today
		for _, p := range rep.Predictions {
			if p.Kind == alt.Kind {
				base = p.Today
			}
		}
		today, cut := base.P99, o.P99
		if other == P999 {
			today, cut = base.P999, o.P999
		}
		rep.NoAdvice += fmt.Sprintf(" The %s it does cut: hedging at %s (%v) takes it from %v to %v (%s estimate). If the %s is the tail that matters here, give --objective %s.",
			other, o.Choice.Label, round(o.Choice.Delay), round(today), round(cut), alt.Kind, other, other)
	}
}

// pick is recommend by objective obj: the recommendation, or nil and why
// there is none (which may also qualify a recommendation).
func pick(rep *Report, obj Objective) (*Recommendation, string) {
	byKind := map[string]*Prediction{}
	for i := range rep.Predictions {
		byKind[rep.Predictions[i].Kind] = &rep.Predictions[i]
	}
	var deciding []*Prediction
	noAdvice := ""
	if rep.Diagnosis.Where == InRequests {
		noAdvice = "Do not hedge this operation: its slowness looks like it lives in the requests, where a copy is as slow as the original (see above)."
		p := byKind["queue-shared"]
		if p == nil {
			return nil, noAdvice
		}
		deciding = append(deciding, p)
	} else {
		deciding = append(deciding, byKind["independent"])
		if p := byKind["queue-fresh"]; p != nil {
			deciding = append(deciding, p)
		}
	}
	type cand struct {
		i         int
		tail      float64 // the objective's ratio, the most pessimistic
		work      float64
		byKind    string
		hasBudget bool
	}
	for _, budget := range []bool{true, false} {
		var cs []cand
		for i := range deciding[0].Rows {
			if deciding[0].Rows[i].Budget != budget {
				continue
			}
			ok := true
			c := cand{i: i, hasBudget: budget}
			for _, p := range deciding {
				r := p.Rows[i]
				if obj.Judge(r) != drill.TailCut {
					ok = false
					break
				}
				if v := obj.ratio(r); v >= c.tail {
					c.tail, c.byKind = v, p.Kind
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
			if c.tail < best.tail {
				best = c
			}
		}
		chosen := best
		for _, c := range cs {
			if c.tail <= best.tail+0.02 && c.work < chosen.work {
				chosen = c
			}
		}
		var kinds []string
		for _, p := range deciding {
			kinds = append(kinds, p.Kind)
		}
		why := fmt.Sprintf("TAIL CUT by the %s in every deciding prediction (%s) with %s; of those, the lowest %s (ratio %.2f, by %s), preferring less extra work within 0.02 of it.",
			obj, strings.Join(kinds, ", "), map[bool]string{true: "the default budget", false: "no budget (no row with the budget cut the tail)"}[budget], obj, best.tail, best.byKind)
		return &Recommendation{Outcome: deciding[0].Rows[chosen.i], Kind: deciding[0].Kind, Why: why}, ""
	}
	if noAdvice == "" {
		noAdvice = fmt.Sprintf("No delay cuts the %s by more than 5%% without excess load in every deciding prediction: hedging would cost more than it buys here.", obj)
	}
	return nil, noAdvice
}
