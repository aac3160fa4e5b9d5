package try

import (
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/drill"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/quantile"
)

// NotSignificant is the verdict of an arm whose measured difference from
// the baseline could be chance: the confidence interval of its ratio at
// the objective percentile (Options.Objective) holds both 1 and a cut of
// Options.MinCut, or there were too few requests for that percentile. The other verdicts are the
// drill's: drill.Baseline, drill.TailCut, drill.NoTailGain and
// drill.ExcessLoad.
const NotSignificant drill.Outcome = "NOT SIGNIFICANT"

// FewHedges is the verdict of an arm whose hedges went with fewer
// requests than lie above the objective percentile (at most a hundredth
// of the requests): whatever its percentile did, hedging did not do it,
// and no verdict on hedging, for or against, can come from the arm. The
// report warns of it (Result.Warnings).
const FewHedges drill.Outcome = "TOO FEW HEDGES"

// Confidence is the level of every confidence interval.
const Confidence = 0.95

// minVerdictRequests is the fewest measured requests per arm for a verdict
// (more for a p99.9: see objective.leastRequests).
const minVerdictRequests = 200

// quantiles are the percentiles reported, as fractions.
var quantiles = []float64{0.5, 0.9, 0.99, 0.999}

// Estimate is one percentile of an arm's latency, with its confidence
// interval from the block bootstrap, and its ratio to the baseline's (with
// the interval of the ratio from the same, paired, resamples).
type Estimate struct {
	Value time.Duration `json:"value_ns"`
	Lo    time.Duration `json:"lo_ns"`
	Hi    time.Duration `json:"hi_ns"`
	// Ratio is Value over the baseline's; RatioLo and RatioHi bound it.
	Ratio   float64 `json:"ratio"`
	RatioLo float64 `json:"ratio_lo"`
	RatioHi float64 `json:"ratio_hi"`
	// Few marks a percentile with fewer than ten latencies above it: its
	// value is one of the slowest few and its interval rough.
	Few bool `json:"few,omitempty"`
}

// ArmReplica is what one arm sent to one replica.
type ArmReplica struct {
	Replica string `json:"replica"`
	// Copies counts copies sent to it, Hedges those that were hedges.
	Copies int `json:"copies"`
	Hedges int `json:"hedges"`
	// Answers counts requests it answered; HedgeWins those answered by a
	// hedge copy.
	Answers   int `json:"answers"`
	HedgeWins int `json:"hedge_wins"`
	// LoserTime is the time its losing copies ran before they were
	// cancelled or answered too late: work spent for nothing.
	LoserTime time.Duration `json:"loser_time_ns"`
}

// ArmResult is one arm's measurements and verdict.
type ArmResult struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
	// Requests counts measured requests; Latencies those with a latency
	// (answered with any status, or timed out); Errors those that failed
	// (by kind in ErrorKinds); Statuses counts answers by status code.
	Requests   int            `json:"requests"`
	Latencies  int            `json:"latencies"`
	Errors     int            `json:"errors"`
	ErrorKinds map[string]int `json:"error_kinds,omitempty"`
	Statuses   map[string]int `json:"statuses,omitempty"`

	P50  Estimate `json:"p50"`
	P90  Estimate `json:"p90"`
	P99  Estimate `json:"p99"`
	P999 Estimate `json:"p999"`

	// Hedged counts requests that sent at least one hedge; Hedges the
	// hedge copies sent; HedgeWins requests a hedge answered.
	Hedged    int `json:"hedged"`
	Hedges    int `json:"hedges"`
	HedgeWins int `json:"hedge_wins"`
	// ExtraLoad is Hedges per request.
	ExtraLoad float64 `json:"extra_load"`
	// LoserTime is the time losing copies ran, over all replicas.
	LoserTime time.Duration `json:"loser_time_ns"`
	Replicas  []ArmReplica  `json:"replicas"`
	// NotSent counts the hedges that came due from the start of the
	// measured span and were not sent, by the rule that kept them (the
	// arm's hedge.Stats, under the reason labels of hedgeprom's
	// hedge_hedges_refused_total): "budget", "in_flight", "busy" (no
	// spare capacity), "payoff" (the class's hedges were not paying),
	// "fan_out", "head" (held until the primary has waited three delays,
	// and asked for again then), "deadline", "replicas" (every replica
	// had a copy).
	// It says why an arm hedged less than its delay alone would.
	NotSent map[string]int64 `json:"not_sent,omitempty"`
	// DelayAtStart and DelayAtEnd are the hedge delay in force when the
	// measured span began and when the run ended (hedge.Stats.Delay of
	// the arm's busiest operation class; zero while it warms up).
	DelayAtStart time.Duration `json:"delay_at_start_ns,omitempty"`
	DelayAtEnd   time.Duration `json:"delay_at_end_ns,omitempty"`

	// Verdict is drill.Baseline for the baseline, else drill.TailCut,
	// drill.NoTailGain, drill.ExcessLoad, NotSignificant or FewHedges;
	// Why says what decided it and how sure it is.
	Verdict drill.Outcome `json:"verdict"`
	Why     string        `json:"why"`

	hedges bool
	lat    []int64 // measured latencies, in send order
	sent   []time.Duration
	winner []int
	blocks []int
}

// ReplicaResult is what one replica did for every arm.
type ReplicaResult struct {
	Replica string `json:"replica"`
	// Copies counts completed copies (answered, not cancelled); P50 and
	// P99 are their times to an answer (to response headers, for HTTP).
	Copies int           `json:"copies"`
	P50    time.Duration `json:"p50_ns"`
	P99    time.Duration `json:"p99_ns"`

	dur []int64
}

// Result is what Run measured.
type Result struct {
	// Protocol is ProtocolHTTP, ProtocolGRPC or ProtocolRedis.
	Protocol string        `json:"protocol"`
	Started  time.Time     `json:"started"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Replicas []string      `json:"replicas"`
	// Headers lists the names of the common headers (gRPC metadata);
	// with Options.ShowHeaderValues, as "Name: value", every value that
	// may be a credential, by the header's name or by its own shape,
	// replaced by "<redacted>".
	Headers []string `json:"headers,omitempty"`
	// Targets counts the distinct requests, sent in turn: HTTP targets,
	// gRPC request messages, or Redis keys; Methods counts them by HTTP
	// method, gRPC method, or Redis command.
	Targets  int            `json:"targets"`
	Methods  map[string]int `json:"methods"`
	Rate     float64        `json:"rate"`
	Ramp     time.Duration  `json:"ramp_ns"`
	Warmup   time.Duration  `json:"warmup_ns"`
	Duration time.Duration  `json:"duration_ns"`
	Measured time.Duration  `json:"measured_ns"`
	Sent     int            `json:"sent"`
	// DroppedInFlight and DroppedLate count the arrivals of the measured
	// span that were not sent, as try never sends a late request with
	// the next ones in a burst: a request goes at most one gap (the time
	// to the next arrival) after its intended start, or not at all.
	// DroppedInFlight counts those for which no slot came free under
	// Options.MaxInFlight in that time (the service held every slot: a
	// stall); DroppedLate those the load generator itself reached too
	// late (its machine was busy). Their latencies are not measured.
	DroppedInFlight int     `json:"dropped_in_flight"`
	DroppedLate     int     `json:"dropped_late"`
	Seed            uint64  `json:"seed"`
	Blocks          int     `json:"blocks"`
	Resamples       int     `json:"resamples"`
	MinCut          float64 `json:"min_cut"`
	LoadLimit       float64 `json:"load_limit"`
	// Objective is the percentile the verdicts judge by ("p99").
	Objective string `json:"objective"`
	// Baseline names the arm the others are compared with.
	Baseline string           `json:"baseline"`
	Arms     []*ArmResult     `json:"arms"`
	Replica  []*ReplicaResult `json:"per_replica"`
	Backoff  []BackoffEvent   `json:"backoff,omitempty"`
	Pushback int              `json:"pushback_responses"`
	Stopped  string           `json:"stopped,omitempty"`
	// LagP50 and LagP99 are how late the load generator started the
	// measured requests, every arm's, after their intended starts (or
	// reached those it dropped as late): its own pacing and scheduling
	// delays. Latencies are timed from the
	// intended start, so the lag is in them; a lag far from zero says the
	// client, not the service, shaped what was measured (see Overloaded).
	LagP50 time.Duration `json:"lag_p50_ns"`
	LagP99 time.Duration `json:"lag_p99_ns"`
	Notes  []string      `json:"notes,omitempty"`
	// Warnings name the hedging arms from which no verdict on hedging can
	// come (verdict FewHedges), and why: the summary prints them next to
	// the verdicts, in capitals.
	Warnings []string `json:"warnings,omitempty"`
	// Interrupted is set when the run was cut short (Ctrl-C).
	Interrupted bool `json:"interrupted,omitempty"`

	start time.Time
}

// Overloaded reports whether the load generator fell behind its own
// schedule in the measured span by enough to shape the tail it measured:
// a lag p99 (LagP99) above a millisecond and above a tenth of the
// baseline arm's p99.
func (r *Result) Overloaded() bool {
	for _, a := range r.Arms {
		if a.Name == r.Baseline {
			return r.LagP99 > time.Millisecond && 10*r.LagP99 > a.P99.Value
		}
	}
	return false
}

// result assembles the Result of a finished run.
func (r *runner) result(elapsed time.Duration, interrupted bool, stopErr error) *Result {
	o := r.o
	res := &Result{
		Protocol: r.kind, Started: r.start, start: r.start, Elapsed: elapsed, Replicas: slices.Clone(o.Replicas),
		Rate: o.Rate, Ramp: o.Ramp, Warmup: o.Warmup,
		Duration: o.Duration, Sent: int(r.sent.Load()), Seed: o.Seed, Resamples: o.Resamples,
		MinCut: o.MinCut, LoadLimit: o.LoadLimit, Objective: o.Objective, Interrupted: interrupted,
	}
	res.Targets, res.Methods = r.proto.requests()
	res.Headers = redactHeaders(o.Header, r.secret, o.ShowHeaderValues)
	r.bo.mu.Lock()
	res.Backoff = slices.Clone(r.bo.events)
	res.Pushback = r.bo.pushbackRequests
	r.bo.mu.Unlock()
	if stopErr != nil {
		res.Stopped = stopErr.Error()
	}

	r.mu.Lock()
	recs, drops := r.records, r.drops
	r.mu.Unlock()
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].intended < recs[j].intended })
	end := r.total
	if interrupted || stopErr != nil {
		end = r.measure
		if n := len(recs); n > 0 {
			end = max(end, recs[n-1].intended)
		}
	}
	res.Measured = max(end-r.measure, 0)
	res.Blocks = o.Blocks
	if res.Blocks == 0 {
		res.Blocks = min(max(int(res.Measured/time.Second), 10), 60)
	}
	blockLen := max(res.Measured/time.Duration(res.Blocks), 1)

	for _, a := range r.arms {
		ar := &ArmResult{Name: a.arm.Name, Doc: a.arm.Doc, ErrorKinds: map[string]int{}, Statuses: map[string]int{}, hedges: a.arm.hedges()}
		for j := range o.Replicas {
			ar.Replicas = append(ar.Replicas, ArmReplica{Replica: o.Replicas[j]})
		}
		res.Arms = append(res.Arms, ar)
	}
	for j := range o.Replicas {
		res.Replica = append(res.Replica, &ReplicaResult{Replica: o.Replicas[j]})
	}
	var lags []int64
	for _, d := range drops {
		if d.intended < r.measure || d.intended >= end {
			continue
		}
		switch d.why {
		case dropLate:
			res.DroppedLate++
			lags = append(lags, int64(d.lag))
		case dropInFlight:
			res.DroppedInFlight++
		}
	}
	for k := range recs {
		rec := &recs[k]
		if rec.intended < r.measure || rec.intended >= end {
			continue
		}
		lags = append(lags, int64(rec.lag))
		ar := res.Arms[rec.arm]
		ar.Requests++
		if rec.status != "" {
			ar.Statuses[rec.status]++
		}
		if rec.kind != kindOK {
			ar.Errors++
			ar.ErrorKinds[rec.kind]++
		}
		if rec.answered {
			ar.lat = append(ar.lat, int64(rec.latency))
			ar.sent = append(ar.sent, rec.intended)
			ar.winner = append(ar.winner, rec.winner)
			ar.blocks = append(ar.blocks, min(int((rec.intended-r.measure)/blockLen), res.Blocks-1))
		}
		if rec.hedges > 0 {
			ar.Hedged++
			ar.Hedges += rec.hedges
		}
		if rec.hedgeWon {
			ar.HedgeWins++
		}
		for _, c := range rec.copies {
			if c.replica < 0 {
				continue
			}
			rep := &ar.Replicas[c.replica]
			rep.Copies++
			if c.index > 0 {
				rep.Hedges++
			}
			won := rec.winner == c.replica && !c.failed && ((c.index > 0) == rec.hedgeWon)
			if won {
				rep.Answers++
				if rec.hedgeWon {
					rep.HedgeWins++
				}
			} else if len(rec.copies) > 1 {
				rep.LoserTime += c.dur
				ar.LoserTime += c.dur
			}
			if !c.failed {
				rr := res.Replica[c.replica]
				rr.Copies++
				rr.dur = append(rr.dur, int64(c.dur))
			}
		}
	}
	slices.Sort(lags)
	res.LagP50, res.LagP99 = time.Duration(bench.Quantile(lags, 0.5)), time.Duration(bench.Quantile(lags, 0.99))
	for _, rr := range res.Replica {
		slices.Sort(rr.dur)
		rr.P50 = time.Duration(bench.Quantile(rr.dur, 0.5))
		rr.P99 = time.Duration(bench.Quantile(rr.dur, 0.99))
	}
	base := 0
	for i, ar := range res.Arms {
		if !ar.hedges {
			base = i
			break
		}
	}
	res.Baseline = res.Arms[base].Name
	r.bootstrap(res, base)
	for i, ar := range res.Arms {
		if ar.hedges {
			var before hedgerState
			if i < len(r.atMeasure) {
				before = r.atMeasure[i]
			}
			now := stateOf(r.arms[i].client.hedger())
			ar.NotSent = notSentSince(now.refused, before.refused)
			ar.DelayAtStart, ar.DelayAtEnd = before.delay, now.delay
		}
		if ar.Requests > 0 {
			ar.ExtraLoad = float64(ar.Hedges) / float64(ar.Requests)
		}
		ar.Verdict, ar.Why = verdict(res, ar, i == base, res.Arms[base])
		if ar.Verdict == FewHedges {
			res.Warnings = append(res.Warnings, fewHedgesWarning(ar))
		}
		if i != base {
			res.Notes = append(res.Notes, otherObjectives(res, ar, res.Arms[base])...)
		}
	}
	if res.Overloaded() {
		res.Notes = append(res.Notes, fmt.Sprintf("The load generator fell behind: it started 1%% of the measured requests %v or more after their intended starts (p50 %v), over a tenth of %s's p99. Latencies are timed from the intended start, so every arm carries that lag: the client's CPU, not the service, may have shaped the tail. Run with a lower --rate, or on a machine with cores to spare.", res.LagP99.Round(10*time.Microsecond), res.LagP50.Round(10*time.Microsecond), res.Baseline))
	}
	if res.DroppedInFlight > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d arrivals of the measured span were dropped, not sent: every one of the %d slots of --max-in-flight was held (the service stalled or slowed) until the next arrival was due. try never sends above --rate, so it does not catch up after a stall; the requests that held the slots are measured, the dropped ones are not, so every arm's tail is understated alike. Raise --max-in-flight to keep sending through a stall.", res.DroppedInFlight, o.MaxInFlight))
	}
	if res.DroppedLate > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d arrivals of the measured span were dropped, not sent: the load generator reached them more than a gap late (its machine was busy), and try never sends above --rate to catch up. Run with a lower --rate, or on a machine with cores to spare.", res.DroppedLate))
	}
	if res.Arms[base].hedges {
		res.Notes = append(res.Notes, "No arm is unhedged: the first arm is the baseline. Add none to --arms for a comparison with no hedging.")
	}
	return res
}

// bootstrap sets every arm's estimates: point values from all its
// latencies, intervals from resampling the time blocks with replacement,
// the same blocks for every arm in each resample (paired), so that the
// ratios' intervals carry what the arms shared (a slow second hits
// both).
func (r *runner) bootstrap(res *Result, base int) {
	type sortedArm struct {
		lat    []int64
		block  []int
		counts []int
	}
	arms := make([]sortedArm, len(res.Arms))
	for i, ar := range res.Arms {
		idx := make([]int, len(ar.lat))
		for k := range idx {
			idx[k] = k
		}
		sort.Slice(idx, func(a, b int) bool { return ar.lat[idx[a]] < ar.lat[idx[b]] })
		sa := sortedArm{lat: make([]int64, len(idx)), block: make([]int, len(idx)), counts: make([]int, res.Blocks)}
		for k, j := range idx {
			sa.lat[k] = ar.lat[j]
			sa.block[k] = ar.blocks[j]
			sa.counts[ar.blocks[j]]++
		}
		arms[i] = sa
	}
	nq := len(quantiles)
	// vals[arm][q][resample]
	vals := make([][][]float64, len(arms))
	for i := range vals {
		vals[i] = make([][]float64, nq)
	}
	rng := mrand.New(mrand.NewPCG(res.Seed, 0x626f6f74))
	mult := make([]int, res.Blocks)
	for range res.Resamples {
		clear(mult)
		for range res.Blocks {
			mult[rng.IntN(res.Blocks)]++
		}
		for i, sa := range arms {
			w := 0
			for b, c := range sa.counts {
				w += c * mult[b]
			}
			for qi, q := range quantiles {
				v := math.NaN()
				if w > 0 {
					v = float64(weightedQuantile(sa.lat, sa.block, mult, w, q))
				}
				vals[i][qi] = append(vals[i][qi], v)
			}
		}
	}
	for i, ar := range res.Arms {
		ests := []*Estimate{&ar.P50, &ar.P90, &ar.P99, &ar.P999}
		for qi, q := range quantiles {
			e := ests[qi]
			e.Value = time.Duration(bench.Quantile(arms[i].lat, q))
			n := len(arms[i].lat)
			e.Few = n == 0 || float64(n)*(1-q) < 10
			lo, hi := interval(vals[i][qi])
			e.Lo, e.Hi = time.Duration(lo), time.Duration(hi)
			bv := float64(bench.Quantile(arms[base].lat, q))
			if bv > 0 {
				e.Ratio = float64(e.Value) / bv
			}
			ratios := make([]float64, res.Resamples)
			for s := range ratios {
				ratios[s] = vals[i][qi][s] / vals[base][qi][s]
			}
			e.RatioLo, e.RatioHi = interval(ratios)
		}
	}
}

// weightedQuantile returns the nearest-rank q-quantile of the sorted
// latencies lat, each weighted by the multiplicity of its block, of total
// weight w: from the top for the upper percentiles, where few need
// visiting.
func weightedQuantile(lat []int64, block, mult []int, w int, q float64) int64 {
	k := quantile.Rank(q, w)
	if q >= 0.5 {
		need, cum := w-k+1, 0
		for j := len(lat) - 1; j >= 0; j-- {
			cum += mult[block[j]]
			if cum >= need {
				return lat[j]
			}
		}
		return lat[0]
	}
	cum := 0
	for j := range lat {
		cum += mult[block[j]]
		if cum >= k {
			return lat[j]
		}
	}
	return lat[len(lat)-1]
}

// interval returns the central Confidence interval of xs, NaN skipped
// (resamples in which an arm had no latency).
func interval(xs []float64) (lo, hi float64) {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(v)
	a := (1 - Confidence) / 2
	return v[int(math.Floor(a*float64(len(v)-1)))], v[int(math.Ceil((1-a)*float64(len(v)-1)))]
}

// verdict judges one arm against the baseline by its objective
// percentile (Result.Objective).
func verdict(res *Result, ar *ArmResult, isBase bool, base *ArmResult) (drill.Outcome, string) {
	if isBase {
		return drill.Baseline, "the arm the others are compared with"
	}
	obj := objectiveOf(res.Objective)
	e, be := obj.of(ar), obj.of(base)
	ci := fmt.Sprintf("%s %s vs %s, ratio %.2f (%g%% CI %.2f to %.2f)", obj.name, fmtDur(e.Value), fmtDur(be.Value), e.Ratio, 100*Confidence, e.RatioLo, e.RatioHi)
	if ar.ExtraLoad > res.LoadLimit {
		return drill.ExcessLoad, fmt.Sprintf("hedges added %.0f%% requests, above the limit of %.0f%%; %s", 100*ar.ExtraLoad, 100*res.LoadLimit, ci)
	}
	n := min(len(ar.lat), len(base.lat))
	// A percentile high in the tail is decided by the few requests above
	// it. A hedge changes the request it goes with, and adds one copy's
	// work: when hedges went with fewer requests than lie above the
	// percentile (or than a hundredth of the requests, for the lower
	// ones), they cannot have moved it beyond the noise of that handful
	// either way, and no verdict on hedging can come from the arm, least
	// of all that a cut is ruled out.
	if need := obj.hedgedFor(n); ar.Hedged < need {
		return FewHedges, fmt.Sprintf("hedges went with %d requests, fewer than the %d %s: whatever its %s did (%s), hedging did not do it", ar.Hedged, need, obj.needWhy(), obj.name, ci)
	}
	if least := obj.leastRequests(); n < least {
		return NotSignificant, fmt.Sprintf("too few requests for a %s (%d; at least %d an arm): run longer or at a higher rate", obj.name, n, least)
	}
	if math.IsNaN(e.RatioLo) {
		return NotSignificant, "no interval: too few latencies in the blocks"
	}
	switch {
	case e.RatioLo > 1:
		return drill.ExcessLoad, "the tail got worse with hedging, beyond chance: " + ci
	case e.RatioHi < 1 && e.Ratio <= 1-res.MinCut:
		return drill.TailCut, fmt.Sprintf("%s: the whole interval is below 1, a cut of %.0f%%", ci, 100*(1-e.Ratio))
	case e.RatioHi < 1:
		return drill.NoTailGain, fmt.Sprintf("%s: a real but small cut, under the %.0f%% that counts", ci, 100*res.MinCut)
	case e.RatioLo >= 1-res.MinCut:
		return drill.NoTailGain, fmt.Sprintf("%s: a cut of %.0f%% or more is ruled out", ci, 100*res.MinCut)
	}
	return NotSignificant, fmt.Sprintf("%s: the interval holds both no change and a cut of %.0f%%; run longer to tell", ci, 100*res.MinCut)
}

// fewHedgesWarning says why no verdict on hedging came from an arm, and
// what to try instead.
func fewHedgesWarning(ar *ArmResult) string {
	w := fmt.Sprintf("arm %s hedged %d of %d requests (%d hedges): no verdict on hedging can come from it, for or against", ar.Name, ar.Hedged, ar.Requests, ar.Hedges)
	if ar.DelayAtStart <= 0 && ar.DelayAtEnd <= 0 {
		return w + "; its delay was still being learnt (a live percentile waits for 100 latencies of its arm): measure longer, or warm up longer (--warmup)"
	}
	w += fmt.Sprintf("; its delay was %s when measuring began, %s at the end", fmtDelay(ar.DelayAtStart), fmtDelay(ar.DelayAtEnd))
	ruled := false
	for k := range ar.NotSent {
		ruled = ruled || k != hedgeset.ReasonBudget
	}
	switch {
	case ruled:
		return w + "; its rules kept back " + notSentText(ar.NotSent) + ". To see what hedging without them does, add an arm such as plain-p95"
	case len(ar.NotSent) > 0:
		return w + "; its budget kept back " + notSentText(ar.NotSent)
	}
	return w + ": nearly every request ended before it. To see what an earlier hedge does, add an arm such as fixed:DURATION"
}

// otherObjectives returns a note for each tail percentile other than the
// objective by which an arm would be a TAIL CUT when it is not one by
// the objective: a cut at the p99.9 alone is a gain the verdict does not
// show.
func otherObjectives(res *Result, ar, base *ArmResult) []string {
	if ar.Verdict == drill.TailCut || ar.Verdict == drill.ExcessLoad {
		return nil
	}
	var notes []string
	for _, ob := range objectives {
		if ob.name == objectiveOf(res.Objective).name || ob.q < 0.99 {
			continue
		}
		alt := *res
		alt.Objective = ob.name
		if v, _ := verdict(&alt, ar, false, base); v == drill.TailCut {
			e := ob.of(ar)
			notes = append(notes, fmt.Sprintf("Arm %s is %s by the %s, but by the %s it cut the tail: %s ratio %.2f (%g%% CI %.2f to %.2f). --objective %s judges by the %s.", ar.Name, ar.Verdict, objectiveOf(res.Objective).name, ob.name, ob.name, e.Ratio, 100*Confidence, e.RatioLo, e.RatioHi, ob.name, ob.name))
		}
	}
	return notes
}

// objective is a percentile the verdicts may judge by.
type objective struct {
	name string  // as --objective names it: "p99"
	q    float64 // as a fraction: 0.99
	of   func(*ArmResult) Estimate
}

// Objectives are the percentiles Options.Objective may name: those the
// report estimates.
var objectives = []objective{
	{"p50", 0.5, func(a *ArmResult) Estimate { return a.P50 }},
	{"p90", 0.9, func(a *ArmResult) Estimate { return a.P90 }},
	{"p99", 0.99, func(a *ArmResult) Estimate { return a.P99 }},
	{"p99.9", 0.999, func(a *ArmResult) Estimate { return a.P999 }},
}

// DefaultObjective is the percentile the verdicts judge by when
// Options.Objective is empty.
const DefaultObjective = "p99"

// objectiveOf returns the objective of that name, the default's if none.
func objectiveOf(name string) objective {
	for _, o := range objectives {
		if o.name == name {
			return o
		}
	}
	return objectiveOf(DefaultObjective)
}

// leastRequests is the fewest measured requests per arm for a verdict:
// minVerdictRequests, and enough to put two above the percentile.
func (o objective) leastRequests() int {
	return max(minVerdictRequests, int(math.Ceil(2/(1-o.q)-1e-9)))
}

// hedgedFor is how many of n requests hedges must go with before a
// verdict on hedging can come from an arm: as many as lie above the
// percentile, and at most a hundredth of the requests.
func (o objective) hedgedFor(n int) int {
	return int(math.Ceil(math.Min(float64(n)*(1-o.q), float64(n)/100) - 1e-9))
}

func (o objective) needWhy() string {
	if o.q >= 0.99 {
		return "above the " + o.name
	}
	return "of a hundredth of the requests"
}

// fmtDur writes a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d >= 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms"
	case d >= time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + "µs"
}

// hedgerState is what an arm's Hedger says at one moment: its refusals
// summed over its operation classes, by reason (hedgeset's labels, those
// of the metrics), and the delay in force in its busiest class, zero
// while that class warms up (hedge.Never).
type hedgerState struct {
	refused map[string]int64
	delay   time.Duration
}

func stateOf(h *hedge.Hedger) hedgerState {
	st := hedgerState{refused: map[string]int64{}}
	most := int64(-1)
	for _, s := range h.Stats() {
		for _, c := range hedgeset.Refusals(s) {
			st.refused[c.Label] += c.N
		}
		if s.Requests > most {
			most, st.delay = s.Requests, s.Delay
		}
	}
	if st.delay == hedge.Never {
		st.delay = 0
	}
	return st
}

// notSentSince returns the counts of now above those of before, without
// zeros (nil when every count is zero).
func notSentSince(now, before map[string]int64) map[string]int64 {
	var d map[string]int64
	for k, v := range now {
		if v -= before[k]; v > 0 {
			if d == nil {
				d = map[string]int64{}
			}
			d[k] = v
		}
	}
	return d
}
