package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// PointResult is one object of results.json: a point of the study grid and
// its measures (means across runs, with standard errors).
type PointResult struct {
	World    string  `json:"world"`
	Routing  string  `json:"routing"`
	Strategy string  `json:"strategy"`
	Load     float64 `json:"load"`
	// Parameters, present where they apply: the budget fraction of
	// hedge-quiet-budget, the mean stall of the stalling worlds, the
	// cancellation delay of tied, the SCV of big-job sizes.
	Budget      *float64 `json:"budget,omitempty"`
	StallMean   *float64 `json:"stall_mean,omitempty"`
	CancelDelay *float64 `json:"cancel_delay,omitempty"`
	SCV         *float64 `json:"scv,omitempty"`
	// Sigma is the log-standard-deviation of the lognormal world, and
	// Discipline "ps" for processor-sharing servers (absent: FCFS).
	Sigma      *float64 `json:"sigma,omitempty"`
	Discipline string   `json:"discipline,omitempty"`
	// Clients and ClientSkew, present with more than one client, are
	// Config.Clients and Config.ClientSkew.
	Clients    int      `json:"clients,omitempty"`
	ClientSkew *float64 `json:"client_skew,omitempty"`
	// LowPriorityCopies is Config.LowPriorityCopies, and Preempted the
	// copies that primaries preempted then, per request.
	LowPriorityCopies bool    `json:"low_priority_copies,omitempty"`
	Preempted         float64 `json:"preempted,omitempty"`
	// IdleOnlyCopies is Config.IdleOnlyCopies, and RefusedByServer the
	// copies busy servers refused then, per measured request.
	IdleOnlyCopies  bool    `json:"idle_only_copies,omitempty"`
	RefusedByServer float64 `json:"refused_by_server,omitempty"`
	// SpareMoved is, with strategy tied-spare, the share of measured
	// requests that their spare ran in their primary's place.
	SpareMoved float64 `json:"spare_moved,omitempty"`
	// Fanout and FanoutNeed, present with fan-out requests, are Config's;
	// with Config.FanCall, FanExtra is the extra copies per request,
	// FanRefused the copies its budget or cap held back per request, and
	// FanMost and FanPeak the most extra copies one request sent and had
	// in flight at once, over the runs.
	Fanout     int `json:"fanout,omitempty"`
	FanoutNeed int `json:"fanout_need,omitempty"`
	// Shards, present with shards, is Config.Shards: Servers/Shards
	// replicas per shard.
	Shards int `json:"shards,omitempty"`
	// With fan-out requests, LeafP50, LeafP99 and LeafP999 are the
	// sub-requests' own percentiles and Copies the copies the
	// sub-requests placed per request (RunResult's, mean over the runs).
	LeafP50  float64 `json:"leaf_p50,omitempty"`
	LeafP99  float64 `json:"leaf_p99,omitempty"`
	LeafP999 float64 `json:"leaf_p999,omitempty"`
	Copies   float64 `json:"copies,omitempty"`
	FanCall  bool    `json:"fan_call,omitempty"`
	// FanCanaries is the fan-out call's canaries (FanOut.Canaries).
	FanCanaries int     `json:"fan_canaries,omitempty"`
	FanExtra    float64 `json:"fan_extra,omitempty"`
	FanRefused  float64 `json:"fan_refused,omitempty"`
	FanMost     int     `json:"fan_most,omitempty"`
	FanPeak     int     `json:"fan_peak,omitempty"`
	// Groups lists the parts of the study the point belongs to (main,
	// mixed, random, budget, stall-length, default, cancel-delay, fan-out,
	// clients).
	Groups   []string `json:"groups"`
	Runs     int      `json:"runs"`
	Requests int      `json:"requests"`
	Warmup   int      `json:"warmup"`
	Servers  int      `json:"servers"`
	Seed     uint64   `json:"seed"`

	Mean   float64 `json:"mean"`
	MeanSE float64 `json:"mean_se"`
	P50    float64 `json:"p50"`
	P50SE  float64 `json:"p50_se"`
	P95    float64 `json:"p95"`
	P95SE  float64 `json:"p95_se"`
	P99    float64 `json:"p99"`
	P99SE  float64 `json:"p99_se"`
	P999   float64 `json:"p999"`
	P999SE float64 `json:"p999_se"`

	// Ratios to "none" at the same world, routing, load and world
	// parameters (absent if that point did not finish). Runs are paired
	// (same seeds), and the SE is the paired delta-method one.
	RatioMean   *float64 `json:"ratio_mean,omitempty"`
	RatioMeanSE *float64 `json:"ratio_mean_se,omitempty"`
	RatioP50    *float64 `json:"ratio_p50,omitempty"`
	RatioP50SE  *float64 `json:"ratio_p50_se,omitempty"`
	RatioP95    *float64 `json:"ratio_p95,omitempty"`
	RatioP95SE  *float64 `json:"ratio_p95_se,omitempty"`
	RatioP99    *float64 `json:"ratio_p99,omitempty"`
	RatioP99SE  *float64 `json:"ratio_p99_se,omitempty"`
	RatioP999   *float64 `json:"ratio_p999,omitempty"`
	RatioP999SE *float64 `json:"ratio_p999_se,omitempty"`
	// Placement ratios, for "none" with shards and two-choice routing:
	// its percentiles over those of "none" with random placement within
	// the shard, at the same scenario (paired runs, as for the ratios
	// above). They are the placement's own gain, which the ratios of a
	// hedged point to this "none" leave out.
	PlacementP50    *float64 `json:"placement_p50,omitempty"`
	PlacementP50SE  *float64 `json:"placement_p50_se,omitempty"`
	PlacementP99    *float64 `json:"placement_p99,omitempty"`
	PlacementP99SE  *float64 `json:"placement_p99_se,omitempty"`
	PlacementP999   *float64 `json:"placement_p999,omitempty"`
	PlacementP999SE *float64 `json:"placement_p999_se,omitempty"`

	HedgedFraction   float64 `json:"hedged_fraction"`
	HedgedFractionSE float64 `json:"hedged_fraction_se"`
	ExtraWork        float64 `json:"extra_work"`
	ExtraWorkSE      float64 `json:"extra_work_se"`
	Utilisation      float64 `json:"utilisation"`
	UtilisationSE    float64 `json:"utilisation_se"`
	StalledFraction  float64 `json:"stalled_fraction"`
	// MultiStarted is the share of requests of which more than one copy
	// started service.
	MultiStarted float64 `json:"multi_started"`
	// Delay is the hedge delay used: the calibrated p95 for the calibrated
	// strategies, the mean delay in force for hedge-p95-live, 0 otherwise.
	Delay   float64 `json:"delay"`
	DelaySE float64 `json:"delay_se"`
	// CalibrationLoad is the load of the calibration run whose p95 is the
	// delay (calibrated strategies only).
	CalibrationLoad *float64 `json:"calibration_load,omitempty"`
	// Headline names the percentile the tables and plots use for this
	// world: "p999" for the stalling worlds, "p99" otherwise.
	Headline string `json:"headline"`
}

func fptr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// Headline returns the percentile the study's tables report for a world:
// p99.9 where servers stall (the stall tail sits beyond p99), p99
// otherwise.
func Headline(w World) string {
	if w.HasStalls() {
		return "p999"
	}
	return "p99"
}

func collect(p *studyPlan) []PointResult {
	var out []PointResult
	for _, sp := range p.points {
		if sp.done {
			out = append(out, sp.result())
		}
	}
	return out
}

// Result converts the summary into a results.json record, without groups
// or ratios (which need the rest of the study).
func (s Summary) Result() PointResult {
	c := s.Config
	r := PointResult{
		World: c.World.String(), Routing: c.Routing.String(), Strategy: c.Strategy.String(), Load: c.Load,
		Groups: []string{}, Runs: len(s.Runs), Requests: c.Requests, Warmup: c.Warmup,
		Servers: c.Servers, Seed: c.Seed,
		Mean: s.Mean.Value, MeanSE: s.Mean.SE, P50: s.P50.Value, P50SE: s.P50.SE,
		P95: s.P95.Value, P95SE: s.P95.SE, P99: s.P99.Value, P99SE: s.P99.SE,
		P999: s.P999.Value, P999SE: s.P999.SE,
		HedgedFraction: s.HedgedFraction.Value, HedgedFractionSE: s.HedgedFraction.SE,
		ExtraWork: s.ExtraWork.Value, ExtraWorkSE: s.ExtraWork.SE,
		Utilisation: s.Utilisation.Value, UtilisationSE: s.Utilisation.SE,
		StalledFraction: s.StalledFraction.Value, MultiStarted: s.MultiStarted.Value,
		Delay: s.Delay.Value, DelaySE: s.Delay.SE,
		Headline:          Headline(c.World),
		LowPriorityCopies: c.LowPriorityCopies, Preempted: s.Preempted.Value,
		IdleOnlyCopies: c.IdleOnlyCopies, RefusedByServer: s.RefusedByServer.Value,
		SpareMoved: s.SpareMoved.Value,
	}
	if c.Strategy.NeedsCalibration() || c.Strategy == HedgeFixed {
		r.Delay, r.DelaySE = c.Delay, 0
	}
	if c.Strategy.NeedsCalibration() {
		r.CalibrationLoad = fptr(c.Strategy.CalibrationLoad(c.Load))
	}
	if c.Strategy == HedgeQuietBudget {
		r.Budget = fptr(c.Budget)
	}
	if c.World.HasStalls() {
		r.StallMean = fptr(c.StallMean)
	}
	if c.Strategy.IsTied() {
		r.CancelDelay = fptr(c.CancelDelay)
	}
	if c.World == BigJobs || c.World == Mixed {
		r.SCV = fptr(c.SCV)
	}
	if c.World == LogNormal {
		r.Sigma = fptr(c.Sigma)
	}
	if c.Discipline != FCFS {
		r.Discipline = c.Discipline.String()
	}
	if c.Clients > 1 {
		r.Clients, r.ClientSkew = c.Clients, fptr(c.ClientSkew)
	}
	if c.Sharded() {
		r.Shards = c.Shards
	}
	if c.Fanout > 1 {
		r.Fanout, r.FanoutNeed = c.Fanout, c.FanoutNeed
		r.LeafP50, r.LeafP99, r.LeafP999, r.Copies = s.LeafP50.Value, s.LeafP99.Value, s.LeafP999.Value, s.Copies.Value
	}
	if fo, ok := c.fanOut(); ok {
		r.FanCanaries = fo.Canaries
		r.FanCall, r.FanExtra, r.FanRefused, r.FanMost, r.FanPeak = true, s.FanExtra.Value, s.FanRefused.Value, s.FanMost, s.FanPeak
	}
	return r
}

// Scenario names the point's world with the parameters that make it a
// world of its own in the study: "lognormal σ=0.5", "ps-stalls".
func (r *PointResult) Scenario() string {
	name := r.World
	if r.Discipline != "" {
		name = r.Discipline + "-" + name
	}
	if r.Sigma != nil {
		name += fmt.Sprintf(" σ=%g", *r.Sigma)
	}
	return name
}

func (sp *studyPoint) result() PointResult {
	r := sp.sum.Result()
	r.Groups = slices.Clone(sp.groups)
	ref := sp
	if sp.ref != nil {
		ref = sp.ref
	}
	ratioTo := func(ref *studyPoint, f func(*RunResult) float64) (v, se *float64) {
		a := make([]float64, len(sp.runs))
		b := make([]float64, len(ref.runs))
		for i := range sp.runs {
			a[i] = f(&sp.runs[i])
		}
		for i := range ref.runs {
			b[i] = f(&ref.runs[i])
		}
		e := Ratio(a, b)
		return fptr(e.Value), fptr(e.SE)
	}
	if ref.done {
		ratio := func(f func(*RunResult) float64) (v, se *float64) { return ratioTo(ref, f) }
		r.RatioMean, r.RatioMeanSE = ratio(func(x *RunResult) float64 { return x.Mean })
		r.RatioP50, r.RatioP50SE = ratio(func(x *RunResult) float64 { return x.P50 })
		r.RatioP95, r.RatioP95SE = ratio(func(x *RunResult) float64 { return x.P95 })
		r.RatioP99, r.RatioP99SE = ratio(func(x *RunResult) float64 { return x.P99 })
		r.RatioP999, r.RatioP999SE = ratio(func(x *RunResult) float64 { return x.P999 })
	}
	if pl := sp.place; pl != nil && pl.done {
		r.PlacementP50, r.PlacementP50SE = ratioTo(pl, func(x *RunResult) float64 { return x.P50 })
		r.PlacementP99, r.PlacementP99SE = ratioTo(pl, func(x *RunResult) float64 { return x.P99 })
		r.PlacementP999, r.PlacementP999SE = ratioTo(pl, func(x *RunResult) float64 { return x.P999 })
	}
	return r
}

// headlineOf returns the point's headline percentile, its ratio to none
// (nil if unknown) and the percentile's label.
func headlineOf(r *PointResult) (abs float64, ratio *float64, label string) {
	if r.Headline == "p999" {
		return r.P999, r.RatioP999, "p99.9"
	}
	return r.P99, r.RatioP99, "p99"
}

func writeResultsJSON(dir string, res []PointResult) error {
	if res == nil {
		res = []PointResult{}
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(dir, "results.json", append(data, '\n'))
}

// writeReport writes table.md and the plots.
func writeReport(dir string, res []PointResult) error {
	if err := writeAtomic(dir, "table.md", []byte(Table(res))); err != nil {
		return err
	}
	for name, svg := range Plots(res) {
		if err := writeAtomic(dir, name, []byte(svg)); err != nil {
			return err
		}
	}
	return nil
}

// resultIndex finds points by their coordinates.
type resultIndex map[string]*PointResult

func indexResults(res []PointResult) resultIndex {
	ix := resultIndex{}
	for i := range res {
		r := &res[i]
		if manyOnly(r) {
			continue // its coordinates are the index's and more
		}
		ix[ixKey(r.Scenario(), r.Routing, r.Strategy, r.Load, r.Budget, r.StallMean, r.CancelDelay)] = r
	}
	return ix
}

func ixKey(w, ro, s string, load float64, budget, stall, cd *float64) string {
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s|%s|%s|%g|%s|%s|%s", w, ro, s, load, f(budget), f(stall), f(cd))
}

// get finds a point with the study's default parameters unless overridden.
func (ix resultIndex) get(w World, ro Routing, s Strategy, load float64, mod func(budget, stall, cd *float64) (*float64, *float64, *float64)) *PointResult {
	def := DefaultConfig()
	var budget, stall, cd *float64
	if s == HedgeQuietBudget {
		budget = fptr(def.Budget)
	}
	if w.HasStalls() {
		stall = fptr(def.StallMean)
	}
	if s.IsTied() {
		cd = fptr(0)
	}
	if mod != nil {
		budget, stall, cd = mod(budget, stall, cd)
	}
	return ix[ixKey(w.String(), ro.String(), s.String(), load, budget, stall, cd)]
}

// at finds a point of the default group's scenario (see DefaultScenarios)
// with the study's default parameters.
func (ix resultIndex) at(sc DefaultScenario, s Strategy, load float64) *PointResult {
	c := DefaultConfig()
	sc.Apply(&c)
	var stall, cd *float64
	if c.World.HasStalls() {
		stall = fptr(c.StallMean)
	}
	if s.IsTied() {
		cd = fptr(0)
	}
	return ix[ixKey(sc.Name, TwoChoice.String(), s.String(), load, nil, stall, cd)]
}

func loadsOf(res []PointResult, keep func(*PointResult) bool) []float64 {
	var ls []float64
	for i := range res {
		if keep(&res[i]) && !slices.Contains(ls, res[i].Load) {
			ls = append(ls, res[i].Load)
		}
	}
	slices.Sort(ls)
	return ls
}

func fmtAbs(r *PointResult, abs float64) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.3g", abs)
}

// cell formats a ratio and, after it, the extra work.
func cell(r *PointResult) string {
	if r == nil {
		return "–"
	}
	_, ratio, _ := headlineOf(r)
	rs := "?"
	if ratio != nil {
		rs = fmt.Sprintf("%.2f", *ratio)
	}
	w := math.Round(1000*r.ExtraWork) / 10
	if w == 0 {
		w = 0 // no "-0.0%"
	}
	return fmt.Sprintf("%s (%+.1f%%)", rs, w)
}

// Table renders the headline table and the variation tables as Markdown.
func Table(res []PointResult) string {
	ix := indexResults(res)
	var b bytes.Buffer
	b.WriteString("# Hedging study results\n\n")
	if len(res) > 0 {
		fmt.Fprintf(&b, "%d runs of %d requests per point (first %d discarded), %d servers. ",
			res[0].Runs, res[0].Requests, res[0].Warmup, res[0].Servers)
	}
	b.WriteString("Time unit: the mean service time. Cells: the percentile for `none` in time units, " +
		"for the others its ratio to `none` at the same point (below 1 is better), with the extra work in parentheses. " +
		"Means across runs; standard errors are in results.json. Routing is two-choice unless stated.\n\n")

	for _, w := range []World{Noise, Stalls, BigJobs, Mixed} {
		rows := loadsOf(res, func(r *PointResult) bool {
			return r.World == w.String() && r.Routing == "two-choice" && slices.Contains(r.Groups, groupOf(w))
		})
		if len(rows) == 0 {
			continue
		}
		_, _, label := headlineOf(&PointResult{Headline: Headline(w)})
		fmt.Fprintf(&b, "## %s world: %s\n\n| load | none %s |", w, label, label)
		for _, s := range StudyStrategies[1:] {
			fmt.Fprintf(&b, " %s |", s)
		}
		b.WriteString("\n|---:|---:|")
		for range StudyStrategies[1:] {
			b.WriteString("---:|")
		}
		b.WriteString("\n")
		for _, l := range rows {
			none := ix.get(w, TwoChoice, None, l, nil)
			abs := 0.0
			if none != nil {
				abs, _, _ = headlineOf(none)
			}
			fmt.Fprintf(&b, "| %g | %s |", l, fmtAbs(none, abs))
			for _, s := range StudyStrategies[1:] {
				fmt.Fprintf(&b, " %s |", cell(ix.get(w, TwoChoice, s, l, nil)))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	if slices.ContainsFunc(res, func(r PointResult) bool { return slices.Contains(r.Groups, GroupDefault) }) {
		b.WriteString(DefaultTable(res))
	}

	// Random versus two-choice routing.
	if rows := loadsOf(res, func(r *PointResult) bool { return slices.Contains(r.Groups, GroupRandom) }); len(rows) > 0 {
		b.WriteString("## Routing: random versus two-choice\n\n" +
			"Headline percentile of `none` under each routing, and `hedge-p95-per-load` as a ratio to `none` under the same routing.\n\n")
		for _, w := range []World{Noise, Stalls, BigJobs} {
			_, _, label := headlineOf(&PointResult{Headline: Headline(w)})
			fmt.Fprintf(&b, "### %s (%s)\n\n| load | none two-choice | none random | hedge-p95-per-load two-choice | hedge-p95-per-load random |\n|---:|---:|---:|---:|---:|\n", w, label)
			for _, l := range rows {
				n2, nr := ix.get(w, TwoChoice, None, l, nil), ix.get(w, Random, None, l, nil)
				a2, ar := 0.0, 0.0
				if n2 != nil {
					a2, _, _ = headlineOf(n2)
				}
				if nr != nil {
					ar, _, _ = headlineOf(nr)
				}
				fmt.Fprintf(&b, "| %g | %s | %s | %s | %s |\n", l, fmtAbs(n2, a2), fmtAbs(nr, ar),
					cell(ix.get(w, TwoChoice, HedgeP95PerLoad, l, nil)), cell(ix.get(w, Random, HedgeP95PerLoad, l, nil)))
			}
			b.WriteString("\n")
		}
	}

	// Budget 5% versus 15%.
	if rows := loadsOf(res, func(r *PointResult) bool { return slices.Contains(r.Groups, GroupBudget) }); len(rows) > 0 {
		b.WriteString("## Hedge budget: 5% versus 15% (quiet-day delay)\n\nRatio to `none` (extra work); hedged fraction after the slash.\n\n")
		for _, w := range []World{Noise, Stalls, BigJobs} {
			fmt.Fprintf(&b, "### %s\n\n| load | quiet, no budget | budget 5%% | budget 15%% |\n|---:|---:|---:|---:|\n", w)
			for _, l := range rows {
				fmt.Fprintf(&b, "| %g | %s |", l, cellHedged(ix.get(w, TwoChoice, HedgeP95Quiet, l, nil)))
				for _, bu := range []float64{0.05, 0.15} {
					r := ix.get(w, TwoChoice, HedgeQuietBudget, l, func(_, s, c *float64) (*float64, *float64, *float64) { return fptr(bu), s, c })
					fmt.Fprintf(&b, " %s |", cellHedged(r))
				}
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
	}

	// Stall length.
	if slices.ContainsFunc(res, func(r PointResult) bool { return slices.Contains(r.Groups, GroupStallLength) }) {
		b.WriteString("## Stall length (stalls world, 2% of the time stalled): hedge-p95-live\n\n" +
			"| mean stall | none p99.9 at 0.3 | live at 0.3 | none p99.9 at 0.7 | live at 0.7 |\n|---:|---:|---:|---:|---:|\n")
		for _, m := range StudyStallMeans {
			fmt.Fprintf(&b, "| %g |", m)
			for _, l := range []float64{0.3, 0.7} {
				mod := func(bu, _, c *float64) (*float64, *float64, *float64) { return bu, fptr(m), c }
				n := ix.get(Stalls, TwoChoice, None, l, mod)
				a := 0.0
				if n != nil {
					a = n.P999
				}
				fmt.Fprintf(&b, " %s | %s |", fmtAbs(n, a), cell(ix.get(Stalls, TwoChoice, HedgeP95Live, l, mod)))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	b.WriteString(manyTables(res))

	// Tied cancellation delay.
	if slices.ContainsFunc(res, func(r PointResult) bool { return slices.Contains(r.Groups, GroupCancelDelay) }) {
		b.WriteString("## Tied requests: instant cancellation versus a 0.1 delay\n\n" +
			"Ratio to `none` (extra work); after the slash, the share of requests of which both copies started.\n\n" +
			"| world | load | tied, instant | tied, delay 0.1 |\n|---|---:|---:|---:|\n")
		for _, w := range []World{Noise, Stalls, BigJobs} {
			for _, l := range []float64{0.8, 0.9, 0.95} {
				fmt.Fprintf(&b, "| %s | %g |", w, l)
				for _, d := range []float64{0, 0.1} {
					r := ix.get(w, TwoChoice, Tied, l, func(bu, s, _ *float64) (*float64, *float64, *float64) { return bu, s, fptr(d) })
					m := ""
					if r != nil {
						m = fmt.Sprintf(" / %.1f%%", 100*r.MultiStarted)
					}
					fmt.Fprintf(&b, " %s%s |", cell(r), m)
				}
				b.WriteString("\n")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(shardsTable(res))
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func groupOf(w World) string {
	if w == Mixed {
		return GroupMixed
	}
	return GroupMain
}

func cellHedged(r *PointResult) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%s / %.1f%%", cell(r), 100*r.HedgedFraction)
}

// WorstDefault is the largest ratio to none of the library default's p50,
// p99 or p99.9 in the default group, and where it is.
type WorstDefault struct {
	Ratio, SE  float64
	Percentile string
	Scenario   string
	Load       float64
}

// Worst finds the library default's worst ratio to none in the default
// group of res, and reports false if the group has no default point.
func Worst(res []PointResult) (WorstDefault, bool) {
	var w WorstDefault
	found := false
	for i := range res {
		r := &res[i]
		if r.Strategy != Default.String() || !slices.Contains(r.Groups, GroupDefault) {
			continue
		}
		for _, q := range []struct {
			name  string
			v, se *float64
		}{{"p50", r.RatioP50, r.RatioP50SE}, {"p99", r.RatioP99, r.RatioP99SE}, {"p99.9", r.RatioP999, r.RatioP999SE}} {
			if q.v == nil {
				continue
			}
			if !found || *q.v > w.Ratio {
				w = WorstDefault{Ratio: *q.v, Percentile: q.name, Scenario: r.Scenario(), Load: r.Load}
				if q.se != nil {
					w.SE = *q.se
				}
				found = true
			}
		}
	}
	return w, found
}

// DefaultTable renders the default group: for each world of
// DefaultScenarios, the library default's p50, p99 and p99.9 as ratios to
// none (with their standard errors' worst case stated above), its extra
// work and hedged share, next to the headline ratio of live p95 and tied.
func DefaultTable(res []PointResult) string {
	ix := indexResults(res)
	var b bytes.Buffer
	b.WriteString("## The library default against not hedging\n\n")
	if w, ok := Worst(res); ok {
		fmt.Fprintf(&b, "**Worst ratio of `default` to `none` anywhere in this grid: %.3f ± %.3f (%s, %s world, load %g).**\n\n",
			w.Ratio, w.SE, w.Percentile, w.Scenario, w.Load)
	}
	b.WriteString("`default` is the zero hedge.Config. Its cells are the ratios to `none` of p50 / p99 / p99.9, " +
		"then the extra work and the share of requests hedged. `live p95` (the study's hedge-p95-live, no budget), `tied` and `tied-spare` " +
		"(tied requests in their spare form: a primary that would wait runs instead on an idle second replica) " +
		"show the headline percentile's ratio and extra work. Processor-sharing worlds have no tied columns: every copy starts at once there.\n\n")
	for _, sc := range DefaultScenarios {
		rows := loadsOf(res, func(r *PointResult) bool {
			return r.Scenario() == sc.Name && slices.Contains(r.Groups, GroupDefault)
		})
		if len(rows) == 0 {
			continue
		}
		c := DefaultConfig()
		sc.Apply(&c)
		_, _, label := headlineOf(&PointResult{Headline: Headline(c.World)})
		fmt.Fprintf(&b, "### %s\n\n| load | none p50 / p99 / p99.9 | default p50 / p99 / p99.9 | default extra work, hedged | live p95 %s | tied %s | tied-spare %s |\n|---:|---:|---:|---:|---:|---:|---:|\n", sc.Name, label, label, label)
		for _, l := range rows {
			none, def := ix.at(sc, None, l), ix.at(sc, Default, l)
			fmt.Fprintf(&b, "| %g |", l)
			if none != nil {
				fmt.Fprintf(&b, " %.3g / %.3g / %.3g |", none.P50, none.P99, none.P999)
			} else {
				b.WriteString(" |")
			}
			if def != nil && def.RatioP50 != nil && def.RatioP99 != nil && def.RatioP999 != nil {
				fmt.Fprintf(&b, " %.3f / %.3f / %.3f | %+.1f%%, %.1f%% |", *def.RatioP50, *def.RatioP99, *def.RatioP999, 100*def.ExtraWork, 100*def.HedgedFraction)
			} else {
				b.WriteString(" | |")
			}
			fmt.Fprintf(&b, " %s |", cell(ix.at(sc, HedgeP95Live, l)))
			if sc.Disc == PS {
				b.WriteString(" n/a | n/a |\n")
			} else {
				fmt.Fprintf(&b, " %s | %s |\n", cell(ix.at(sc, Tied, l)), cell(ix.at(sc, TiedSpare, l)))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
