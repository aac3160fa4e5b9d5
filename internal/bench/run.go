package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tailcut/hedge"
)

// Scenario is the workload and the noise rules of a comparison. The zero
// value of a field means its default (see Defaults), except StallShare,
// where 0 means no stalls.
type Scenario struct {
	// Rate is the open-loop arrival rate, requests per second.
	Rate float64 `json:"rate"`
	// Duration is the measured span of each run.
	Duration time.Duration `json:"duration_ns"`
	// Requests, if positive, caps the measured requests of each run.
	Requests int `json:"requests,omitempty"`
	// Warmup is the span before the measured one in each run: no stalls,
	// nothing recorded, the rate climbing from a tenth to the full rate
	// over its first half. It fills connection pools and the live delay
	// estimate.
	Warmup time.Duration `json:"warmup_ns"`
	// StallLength is how long each stall lasts.
	StallLength time.Duration `json:"stall_length_ns"`
	// StallShare is the fraction of time each replica is stalled; 0 means
	// no stalls.
	StallShare float64 `json:"stall_share"`
	// StallTogether makes every replica stall at the same times (one
	// schedule for all): the global slowdown, pushed to a stop, in which
	// every request looks as if it needs a hedge and none can help.
	StallTogether bool `json:"stall_together,omitempty"`
	// StallOne makes only replica 0 stall, on its own schedule; the
	// others never do: one bad server among many, the sharded fan-out's
	// setting. It excludes StallTogether.
	StallOne bool `json:"stall_one,omitempty"`
	// Repeats is how many times each configuration runs, each repeat with
	// its own arrivals and stall schedules, shared by every configuration.
	Repeats int `json:"repeats"`
	// Seed is the master seed of arrivals and stall schedules.
	Seed uint64 `json:"seed"`
	// Timeout bounds each request.
	Timeout time.Duration `json:"timeout_ns"`

	// MaxOtherCPU is the CPU other processes may use during a run, in
	// cores, before the run is flagged noisy.
	MaxOtherCPU float64 `json:"max_other_cpu"`
	// MaxLag is the p99 of dispatch lag (actual start of a request minus
	// its intended time) above which a run is flagged noisy.
	MaxLag time.Duration `json:"max_lag_ns"`
	// MaxReruns is how many times a noisy run may be run again (the least
	// noisy attempt is kept); MaxTotalReruns caps reruns over the whole
	// comparison. Negative means none.
	MaxReruns      int `json:"max_reruns"`
	MaxTotalReruns int `json:"max_total_reruns"`

	// MaxInFlight aborts a run whose requests in flight reach it: the
	// backend (or the machine) cannot keep up, and the run would only pile
	// up goroutines and time out. The requests in flight are cancelled
	// and the run is flagged. Zero means half a second of arrivals (at
	// least 2,000).
	MaxInFlight int `json:"max_in_flight"`
	// Settle is the pause between runs.
	Settle time.Duration `json:"settle_ns"`
	// SpinWindow is the Pacer's (zero: DefaultSpinWindow).
	SpinWindow time.Duration `json:"spin_window_ns,omitempty"`
	// Baseline names the configuration the ratio columns compare with.
	// Empty means "none-random" if it runs, else the first one.
	Baseline string `json:"baseline,omitempty"`

	// Clients, above 1, splits each run's requests among that many
	// clients of the configuration, each with a Hedger and connections
	// of its own (ManyClients): services that share the replicas, each
	// seeing only its own requests.
	Clients int `json:"clients,omitempty"`
	// FanOut, above 1, makes each request read that many leaves at once
	// and wait for all of them (FanOut). Rate still counts requests, so
	// the replicas receive Rate x FanOut leaves per second.
	FanOut int `json:"fan_out,omitempty"`
}

// Defaults returns s with every zero field but StallShare given its
// default: 10,000 requests/s, 10 s measured after 1 s of warm-up, stalls of
// 50 ms, 3 repeats, seed 1, 2 s per request, runs flagged noisy when other
// processes use more than 0.5 core or the dispatch lag p99 exceeds 1 ms,
// one rerun per noisy run and at most a third of the runs rerun.
func (s Scenario) Defaults() Scenario {
	if s.Rate == 0 {
		s.Rate = 10000
	}
	if s.Duration == 0 {
		s.Duration = 10 * time.Second
	}
	if s.Warmup == 0 {
		s.Warmup = time.Second
	}
	if s.StallLength == 0 {
		s.StallLength = 50 * time.Millisecond
	}
	if s.Repeats == 0 {
		s.Repeats = 3
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.Timeout == 0 {
		s.Timeout = 2 * time.Second
	}
	if s.MaxOtherCPU == 0 {
		s.MaxOtherCPU = 0.5
	}
	if s.MaxLag == 0 {
		s.MaxLag = time.Millisecond
	}
	if s.MaxReruns == 0 {
		s.MaxReruns = 1
	}
	if s.MaxInFlight == 0 {
		// Half a second of arrivals: far beyond what a stall of a
		// replica holds up in a run that keeps up.
		s.MaxInFlight = max(2000, int(s.Rate/2))
	}
	if s.Settle == 0 {
		s.Settle = 300 * time.Millisecond
	}
	return s
}

// maxArrivals bounds the requests of one run, whatever the flags say.
const maxArrivals = 5_000_000

// Validate reports every mistake in s (after Defaults), each saying what
// to do.
func (s Scenario) Validate() error {
	var errs []error
	if math.IsNaN(s.Rate) || s.Rate <= 0 || s.Rate > 1e6 {
		errs = append(errs, fmt.Errorf("rate %v: use 1 to 1,000,000 requests per second", s.Rate))
	}
	if s.Duration <= 0 || s.Duration > time.Hour {
		errs = append(errs, fmt.Errorf("duration %v: use more than 0 and at most an hour", s.Duration))
	}
	if s.Requests < 0 {
		errs = append(errs, fmt.Errorf("requests %d: use a positive cap, or 0 for rate x duration", s.Requests))
	}
	if s.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warm-up %v is negative", s.Warmup))
	}
	if s.StallLength <= 0 {
		errs = append(errs, fmt.Errorf("stall length %v: use a positive duration", s.StallLength))
	}
	if math.IsNaN(s.StallShare) || s.StallShare < 0 || s.StallShare >= 0.5 {
		errs = append(errs, fmt.Errorf("stall share %v: use 0 (no stalls) up to below 0.5, e.g. 0.02 for 2%% of the time", s.StallShare))
	}
	if s.StallOne && s.StallTogether {
		errs = append(errs, errors.New("stall one and stall together: choose one, one server stalling or all at once"))
	}
	if s.Repeats < 1 || s.Repeats > 100 {
		errs = append(errs, fmt.Errorf("repeats %d: use 1 to 100 (3 or more for a median)", s.Repeats))
	}
	if s.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout %v: use a positive duration", s.Timeout))
	}
	if s.Clients < 0 || s.Clients > MaxClients {
		errs = append(errs, fmt.Errorf("clients %d: use 1 to %d (0 or 1: one client)", s.Clients, MaxClients))
	}
	if s.FanOut < 0 || s.FanOut > MaxFanOut {
		errs = append(errs, fmt.Errorf("fan-out %d: use 1 to %d leaves per request (0 or 1: no fan-out)", s.FanOut, MaxFanOut))
	}
	if n := s.Rate * float64(max(1, s.FanOut)) * (s.Duration + s.Warmup).Seconds(); n > maxArrivals && (s.Requests == 0 || s.Requests > maxArrivals) {
		errs = append(errs, fmt.Errorf("%.0f requests per run (leaves, with a fan-out): at most %d; lower the rate, the duration or the fan-out", n, maxArrivals))
	}
	return errors.Join(errs...)
}

// RunResult is one run: one configuration, one repeat, one attempt.
// Times are in microseconds; -1 marks what the client does not count.
type RunResult struct {
	Config  string `json:"config"`
	Repeat  int    `json:"repeat"`
	Attempt int    `json:"attempt"`
	// Kept is true for the attempt that represents its repeat.
	Kept bool `json:"kept"`

	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Rate       float64 `json:"achieved_rate"`
	Aborted    string  `json:"aborted,omitempty"`

	MeanUs float64 `json:"mean_us"`
	P50Us  float64 `json:"p50_us"`
	P90Us  float64 `json:"p90_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`

	// ExtraPct is hedge copies per request, in percent, as the client
	// counts them; ServerExtraPct is requests the servers received per
	// request, minus one, in percent.
	ExtraPct       float64 `json:"extra_pct"`
	ServerExtraPct float64 `json:"server_extra_pct"`
	// WinRate is the share of hedges that won, in percent.
	WinRate float64 `json:"hedge_win_pct"`
	// WastedUs is the running time of losing copies per request.
	WastedUs      float64 `json:"wasted_us_per_request"`
	RefusedBudget int64   `json:"budget_denied"`
	DelayUs       float64 `json:"delay_end_us"`
	// TimerLagP50Us and TimerLagP99Us are how late the client's hedge
	// timers fired, over the whole run (-1: unknown).
	TimerLagP50Us float64 `json:"timer_lag_p50_us"`
	TimerLagP99Us float64 `json:"timer_lag_p99_us"`
	PoolWaits     int64   `json:"pool_waits"`
	PoolWaitMs    float64 `json:"pool_wait_ms"`
	PoolTimeouts  int64   `json:"pool_timeouts"`
	Dials         int64   `json:"dials"`

	Stalls      int     `json:"stalls"`
	StalledMs   float64 `json:"stalled_ms"`
	StallErrors int     `json:"stall_errors"`

	LagP50Us float64 `json:"lag_p50_us"`
	LagP99Us float64 `json:"lag_p99_us"`
	LagMaxUs float64 `json:"lag_max_us"`
	OtherCPU float64 `json:"other_cpu_cores"`
	SelfCPU  float64 `json:"self_cpu_cores"`
	ChildCPU float64 `json:"child_cpu_cores"`
	// SelfCPUPerRequestUs is this process's CPU time over the measured
	// span per measured request, in microseconds: the client's cost of a
	// request where the servers run in other processes (the load
	// generator's share included, the same for every configuration);
	// -1 where /proc is missing.
	SelfCPUPerRequestUs float64 `json:"self_cpu_us_per_request"`
	Load1               float64 `json:"load1"`
	// Goroutines is how many goroutines the process had when the run
	// started: a number that grows from run to run means an earlier
	// client left work behind.
	Goroutines int    `json:"goroutines_at_start"`
	Noisy      bool   `json:"noisy"`
	Noise      string `json:"noise,omitempty"`

	lat []int64 // measured latencies, sorted, ns
	// seq and sent are the measured requests in the order they were
	// sent: each one's latency (ns) and intended start (Unix time, ns).
	seq, sent []int64
}

// noiseScore is how far past its limits a run was: above 1 is noisy.
func (r *RunResult) noiseScore(s Scenario) float64 {
	if r.Aborted != "" {
		return math.Inf(1)
	}
	return max(r.OtherCPU/s.MaxOtherCPU, r.LagP99Us/us(s.MaxLag))
}

// ConfigResult summarises one configuration over its kept runs.
type ConfigResult struct {
	Config string `json:"config"`
	Doc    string `json:"doc"`
	Runs   int    `json:"runs"`
	// NoisyRuns counts kept runs that stayed noisy after their reruns
	// (aborted ones included).
	NoisyRuns int `json:"noisy_runs"`
	// AbortedRuns counts repeats whose every attempt was aborted (the
	// backend or the machine could not keep up): they are left out of
	// every measure, and Runs does not count them.
	AbortedRuns int `json:"aborted_runs"`
	Reruns      int `json:"reruns"`

	P50Us  Spread `json:"p50_us"`
	P90Us  Spread `json:"p90_us"`
	P99Us  Spread `json:"p99_us"`
	P999Us Spread `json:"p999_us"`
	MaxUs  Spread `json:"max_us"`
	// P99Ratio and P999Ratio are this configuration's quantile over the
	// baseline's in the same repeat, summarised over repeats.
	P99Ratio  Spread `json:"p99_ratio"`
	P999Ratio Spread `json:"p999_ratio"`
	// P99RatioCI and P999RatioCI are the same ratios' geometric mean over
	// the repeats, with its 95% confidence interval (PairedRatio).
	P99RatioCI     Interval `json:"p99_ratio_ci"`
	P999RatioCI    Interval `json:"p999_ratio_ci"`
	ExtraPct       Spread   `json:"extra_pct"`
	ServerExtraPct Spread   `json:"server_extra_pct"`
	WinRate        Spread   `json:"hedge_win_pct"`
	WastedUs       Spread   `json:"wasted_us_per_request"`
	TimerLagP50Us  Spread   `json:"timer_lag_p50_us"`
	TimerLagP99Us  Spread   `json:"timer_lag_p99_us"`
	PoolWaits      Spread   `json:"pool_waits"`
	PoolWaitMs     Spread   `json:"pool_wait_ms"`
	PoolTimeouts   Spread   `json:"pool_timeouts"`
	Dials          Spread   `json:"dials"`
	Errors         Spread   `json:"errors"`
	LagP99Us       Spread   `json:"lag_p99_us"`
	OtherCPU       Spread   `json:"other_cpu_cores"`
	SelfCPU        Spread   `json:"self_cpu_cores"`
	// SelfCPUPerRequestUs is RunResult.SelfCPUPerRequestUs over the runs.
	SelfCPUPerRequestUs Spread `json:"self_cpu_us_per_request"`
	Stalls              Spread `json:"stalls"`
	// CCDF is of every measured latency of the kept runs together.
	CCDF []Point `json:"ccdf"`
}

// BackendResult is the comparison on one backend.
type BackendResult struct {
	Backend  string   `json:"backend"`
	Replicas int      `json:"replicas"`
	Scenario Scenario `json:"scenario"`
	Baseline string   `json:"baseline"`
	// Notes are facts about the setup worth printing with the results.
	Notes []string `json:"notes,omitempty"`
	// Pids are the backend's child processes (ProcessOwner), gone once
	// the backend was closed.
	Pids    []int          `json:"pids,omitempty"`
	Configs []ConfigResult `json:"configs"`
	Runs    []RunResult    `json:"runs"`
	Elapsed time.Duration  `json:"elapsed_ns"`

	latencies map[string][]*RunResult // kept runs per configuration (see WriteLatencies)
}

// plan is what every configuration of one repeat shares.
type plan struct {
	repeat   int
	arrivals []time.Duration
	first    int // index of the first measured arrival
	stalls   [][]Stall
}

func makePlan(s Scenario, replicas, repeat int) plan {
	p := plan{repeat: repeat}
	p.arrivals = rampUp(Arrivals(DeriveSeed(s.Seed, "arrivals", repeat), s.Rate, s.Warmup+s.Duration, maxArrivals),
		s.Warmup/2, DeriveSeed(s.Seed, "ramp", repeat))
	p.first, _ = slices.BinarySearch(p.arrivals, s.Warmup)
	if s.Requests > 0 && len(p.arrivals)-p.first > s.Requests {
		p.arrivals = p.arrivals[:p.first+s.Requests]
	}
	span := s.Duration
	if n := len(p.arrivals); n > p.first {
		span = min(span, p.arrivals[n-1]-s.Warmup+time.Microsecond)
	}
	p.stalls = make([][]Stall, replicas)
	for i := range replicas {
		if s.StallOne && i > 0 {
			continue
		}
		sched := i
		if s.StallTogether {
			sched = 0
		}
		p.stalls[i] = StallSchedule(DeriveSeed(s.Seed, "stalls", repeat, sched), s.StallLength, s.StallShare, span)
	}
	return p
}

// rampUp thins the arrivals before ramp so that the rate climbs linearly
// from a tenth to all of it: a client starting cold at full rate would
// open a connection for nearly every request at once, a storm no real
// client meets in steady state. Only warm-up arrivals are affected.
func rampUp(arr []time.Duration, ramp time.Duration, seed uint64) []time.Duration {
	if ramp <= 0 {
		return arr
	}
	r := rand.New(rand.NewPCG(seed, 0x7a3b))
	out := arr[:0]
	for _, at := range arr {
		if at < ramp && r.Float64() >= 0.1+0.9*float64(at)/float64(ramp) {
			continue
		}
		out = append(out, at)
	}
	return out
}

// Run compares the contenders on backend b: Repeats repeats, each running
// every contender once (the order rotates from repeat to repeat) on the
// same arrivals and stall schedules, noisy runs rerun within the bounds of
// the scenario. Progress lines go to progress (may be nil). On ctx's end it
// returns what it has and ctx's error.
func Run(ctx context.Context, b Backend, s Scenario, contenders []Contender, progress io.Writer) (*BackendResult, error) {
	s = s.Defaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if len(contenders) == 0 {
		return nil, errNoContenders
	}
	contenders = slices.Clone(contenders)
	for i, c := range contenders {
		contenders[i] = ManyClients(FanOut(c, s.FanOut), s.Clients)
	}
	if progress == nil {
		progress = io.Discard
	}
	if s.MaxTotalReruns == 0 {
		s.MaxTotalReruns = max(1, s.Repeats*len(contenders)/3)
	}
	baseline := s.Baseline
	if baseline == "" {
		baseline = contenders[0].Name
		for _, c := range contenders {
			if c.Name == "none-random" {
				baseline = c.Name
			}
		}
	}
	res := &BackendResult{Backend: b.Name(), Replicas: b.Replicas(), Scenario: s, Baseline: baseline}
	if po, ok := b.(ProcessOwner); ok {
		res.Pids = po.Pids()
	}
	start := time.Now()
	kept := map[string][]*RunResult{}
	reruns := map[string]int{}
	totalReruns := 0
	total := s.Repeats * len(contenders)
	done := 0
	perRun := s.Warmup + s.Duration + s.Settle + 200*time.Millisecond
	fmt.Fprintf(progress, "[%s] %d configurations x %d repeats = %d runs of %v (+%v warm-up), about %v without reruns\n",
		b.Name(), len(contenders), s.Repeats, total, s.Duration, s.Warmup, (time.Duration(total) * perRun).Round(time.Second))
	var runErr error
repeats:
	for r := range s.Repeats {
		p := makePlan(s, b.Replicas(), r)
		for k := range contenders {
			c := contenders[(k+r)%len(contenders)]
			var best *RunResult
			for attempt := 0; ; attempt++ {
				rr, err := runOnce(ctx, b, c, &p, s)
				if err != nil {
					runErr = fmt.Errorf("%s, %s, repeat %d: %w", b.Name(), c.Name, r+1, err)
					break repeats
				}
				rr.Attempt = attempt
				if rr.Aborted != "" {
					// A collapse leaves thousands of closing connections
					// behind: let them go before the next run.
					sleepCtx(ctx, max(2*time.Second, 5*s.Settle))
				}
				row := *rr
				row.lat = nil // only kept runs keep their latencies, for the CCDF
				res.Runs = append(res.Runs, row)
				fmt.Fprintf(progress, "[%s %d/%d] %s\n", b.Name(), done+1, total, runLine(rr))
				if best == nil || rr.noiseScore(s) < best.noiseScore(s) {
					best = rr
				}
				if !rr.Noisy || attempt >= s.MaxReruns || totalReruns >= s.MaxTotalReruns {
					break
				}
				totalReruns++
				reruns[c.Name]++
				fmt.Fprintf(progress, "[%s] noisy (%s): running %s again\n", b.Name(), rr.Noise, c.Name)
			}
			done++
			for i := range res.Runs {
				if res.Runs[i].Config == best.Config && res.Runs[i].Repeat == best.Repeat && res.Runs[i].Attempt == best.Attempt {
					res.Runs[i].Kept = true
				}
			}
			kept[c.Name] = append(kept[c.Name], best)
		}
	}
	res.Elapsed = time.Since(start)
	for _, c := range contenders {
		if len(kept[c.Name]) == 0 {
			continue
		}
		res.Configs = append(res.Configs, summarise(c, kept[c.Name], kept[baseline], reruns[c.Name]))
		res.keepLatencies(c.Name, kept[c.Name])
	}
	return res, runErr
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runLine is the progress line of one run.
func runLine(r *RunResult) string {
	line := fmt.Sprintf("%-20s repeat %d: p50 %s p99 %s p99.9 %s max %s | extra %s | stalls %d | lag p99 %s | others %.2f cores",
		r.Config, r.Repeat+1, fmtUs(r.P50Us), fmtUs(r.P99Us), fmtUs(r.P999Us), fmtUs(r.MaxUs),
		fmtPct(r.ExtraPct), r.Stalls, fmtUs(r.LagP99Us), r.OtherCPU)
	line += fmt.Sprintf(" | %d goroutines before", r.Goroutines)
	if r.Errors > 0 {
		line += fmt.Sprintf(" | %d errors (%s)", r.Errors, r.FirstError)
	}
	if r.Noisy {
		line += " | NOISY: " + r.Noise
	}
	return line
}

// fillClientStats copies the client's counters over the measured span
// into r, -1 where unknown.
func fillClientStats(r *RunResult, st ClientStats) {
	r.ExtraPct, r.WinRate, r.WastedUs, r.DelayUs = -1, -1, -1, -1
	r.TimerLagP50Us, r.TimerLagP99Us = -1, -1
	if st.TimerLagP50 != Unknown && st.TimerLagP99 != Unknown {
		r.TimerLagP50Us, r.TimerLagP99Us = us(st.TimerLagP50), us(st.TimerLagP99)
	}
	if st.Hedges != Unknown && st.Requests > 0 {
		r.ExtraPct = 100 * float64(st.Hedges) / float64(st.Requests)
		if st.Hedges > 0 && st.HedgeWins != Unknown {
			r.WinRate = 100 * float64(st.HedgeWins) / float64(st.Hedges)
		}
		if st.Wasted != Unknown {
			r.WastedUs = us(st.Wasted) / float64(st.Requests)
		}
	}
	if st.Delay != Unknown && st.Delay != hedge.Never {
		r.DelayUs = us(st.Delay)
	}
	r.RefusedBudget = st.RefusedBudget
	r.PoolWaits, r.PoolTimeouts, r.Dials = st.PoolWaits, st.PoolTimeouts, st.Dials
	r.PoolWaitMs = -1
	if st.PoolWaitTime != Unknown {
		r.PoolWaitMs = float64(st.PoolWaitTime) / 1e6
	}
}

// summarise turns the kept runs of one configuration into its result.
func summarise(c Contender, kept, base []*RunResult, reruns int) ConfigResult {
	cr := ConfigResult{Config: c.Name, Doc: c.Doc, Reruns: reruns}
	// An aborted run measured a collapse, not the configuration: it is
	// counted, and left out of every measure.
	var runs []*RunResult
	for _, r := range kept {
		if r.Aborted != "" {
			cr.AbortedRuns++
			continue
		}
		runs = append(runs, r)
	}
	cr.Runs = len(runs)
	col := func(f func(r *RunResult) float64) Spread {
		vs := make([]float64, len(runs))
		for i, r := range runs {
			vs[i] = f(r)
		}
		return spreadOf(vs)
	}
	known := func(v float64) float64 {
		if v < 0 {
			return math.NaN()
		}
		return v
	}
	knownI := func(v int64) float64 { return known(float64(v)) }
	baseOf := func(repeat int) *RunResult {
		for _, b := range base {
			if b.Repeat == repeat && b.Aborted == "" {
				return b
			}
		}
		return nil
	}
	ratio := func(f func(r *RunResult) float64) func(r *RunResult) float64 {
		return func(r *RunResult) float64 {
			b := baseOf(r.Repeat)
			if b == nil || f(b) <= 0 {
				return math.NaN()
			}
			return f(r) / f(b)
		}
	}
	p99 := func(r *RunResult) float64 { return r.P99Us }
	p999 := func(r *RunResult) float64 { return r.P999Us }
	for _, r := range kept {
		if r.Noisy {
			cr.NoisyRuns++
		}
	}
	cr.P50Us = col(func(r *RunResult) float64 { return r.P50Us })
	cr.P90Us = col(func(r *RunResult) float64 { return r.P90Us })
	cr.P99Us = col(p99)
	cr.P999Us = col(p999)
	cr.MaxUs = col(func(r *RunResult) float64 { return r.MaxUs })
	cr.P99Ratio = col(ratio(p99))
	cr.P999Ratio = col(ratio(p999))
	cr.P99RatioCI = PairedRatio(runs, base, p99)
	cr.P999RatioCI = PairedRatio(runs, base, p999)
	cr.ExtraPct = col(func(r *RunResult) float64 { return known(r.ExtraPct) })
	cr.ServerExtraPct = col(func(r *RunResult) float64 {
		if r.ServerExtraPct == -1 {
			return math.NaN()
		}
		return r.ServerExtraPct
	})
	cr.WinRate = col(func(r *RunResult) float64 { return known(r.WinRate) })
	cr.WastedUs = col(func(r *RunResult) float64 { return known(r.WastedUs) })
	cr.TimerLagP50Us = col(func(r *RunResult) float64 { return known(r.TimerLagP50Us) })
	cr.TimerLagP99Us = col(func(r *RunResult) float64 { return known(r.TimerLagP99Us) })
	cr.PoolWaits = col(func(r *RunResult) float64 { return knownI(r.PoolWaits) })
	cr.PoolWaitMs = col(func(r *RunResult) float64 { return known(r.PoolWaitMs) })
	cr.PoolTimeouts = col(func(r *RunResult) float64 { return knownI(r.PoolTimeouts) })
	cr.Dials = col(func(r *RunResult) float64 { return knownI(r.Dials) })
	cr.Errors = col(func(r *RunResult) float64 { return float64(r.Errors) })
	cr.LagP99Us = col(func(r *RunResult) float64 { return r.LagP99Us })
	cr.OtherCPU = col(func(r *RunResult) float64 { return r.OtherCPU })
	cr.SelfCPU = col(func(r *RunResult) float64 { return r.SelfCPU })
	cr.SelfCPUPerRequestUs = col(func(r *RunResult) float64 { return known(r.SelfCPUPerRequestUs) })
	cr.Stalls = col(func(r *RunResult) float64 { return float64(r.Stalls) })
	var all []int64
	for _, r := range runs {
		all = append(all, r.lat...)
	}
	slices.Sort(all)
	cr.CCDF = CCDF(all, 200)
	return cr
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

// fmtUs formats microseconds for people: 850µs, 1.23ms, 2.5s.
func fmtUs(v float64) string {
	switch {
	case v < 0 || math.IsNaN(v):
		return "n/a"
	case v < 1000:
		return fmt.Sprintf("%.0fµs", v)
	case v < 1e6:
		return fmt.Sprintf("%.3gms", v/1e3)
	default:
		return fmt.Sprintf("%.3gs", v/1e6)
	}
}

func fmtPct(v float64) string {
	if v < 0 || math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", v)
}
