package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/sim"
)

// Explorer parameter values (the strategies are in choices).
var (
	exploreWorlds   = []string{"noise", "stalls", "bigjobs", "mixed", "lognormal"}
	exploreRoutings = sim.Routings()
	explorePcts     = []string{"50", "95", "99", "99.9"}
	exploreCalibs   = []string{"quiet", "load"}
	exploreHelps    = []string{"none", "idle-only", "low-priority"}
)

// maxExploreClients bounds the explorer's clients.
const maxExploreClients = 100

// maxWidth bounds the explorer's fan-out width (leaves per request).
const maxWidth = 100

// Explorer parameter ranges (see ExploreParams).
const (
	minLoad, maxLoad   = 0.05, 0.95
	maxSigma           = 3
	maxDelay           = 50
	minLiveP, maxLiveP = 50, 99.9
	minBudget          = 0.1
	maxRuns            = 4
	minRequests        = 1000
)

// ExploreParams are the explorer's controls, as /api/explore reads them
// from the query string (names in parentheses; defaults are the page's).
type ExploreParams struct {
	// World (world): noise, stalls, bigjobs, mixed or lognormal (the
	// default). Sigma (sigma) is the log-normal tail heaviness, 0 to 3
	// (1).
	World string  `json:"world"`
	Sigma float64 `json:"sigma"`
	// Load (load) is the utilisation before hedging, 0.05 to 0.95 (0.5):
	// with a fan-out it counts leaves, not requests (sim.Config.Load), so
	// that a width of 40 at load 0.3 keeps the servers as busy as single
	// requests at 0.3, with a fortieth of the request rate.
	Load float64 `json:"load"`
	// Routing (routing): two-choice, random, least-loaded or pool (the
	// default).
	Routing string `json:"routing"`
	// Strategy (strategy): none, fixed (Delay), percentile (the unhedged
	// Percentile measured at Calibration), live (the live LiveP
	// percentile of recent latencies), budget (the percentile delay plus
	// a token-bucket budget of Budget percent) or default (the library's
	// zero hedge.Config).
	// Default percentile. Each runs one of the simulator's strategies
	// (see choices).
	Strategy string `json:"strategy"`
	// Delay (delay) is the fixed delay in mean service times, 0 to 50
	// (2). One mean service time stands for a millisecond (sim.Unit), so
	// the query gives it in milliseconds: a number ("2.5") or a duration
	// ("2.5ms", "500us"), at most 50ms.
	Delay float64 `json:"delay"`
	// Percentile (p) is 50, 95 (default), 99 or 99.9; Calibration (calib)
	// is quiet (default: measured unhedged at load 0.1, a quiet day) or
	// load (measured unhedged at this load). The measuring run is the one
	// sim.CalibrationConfig prescribes, as for "hedge sim" and "hedge
	// study": at p95 the delay is theirs.
	Percentile  string `json:"percentile"`
	Calibration string `json:"calibration"`
	// LiveP (livep) is the live strategy's percentile, 50 to 99.9 (95).
	LiveP float64 `json:"live_p"`
	// Budget (budget) is the budget strategy's hedges per 100 requests,
	// 0.1 to 100 (5).
	Budget float64 `json:"budget"`
	// Cancel (cancel) cancels the loser (true); Tied (tied) sends both
	// copies at arrival instead of hedging (false).
	Cancel bool `json:"cancel"`
	Tied   bool `json:"tied"`
	// Clients (clients, 1 to 100, default 1) share the servers, each with
	// a Hedger of its own that sees only its own requests
	// (sim.Config.Clients).
	Clients int `json:"clients"`
	// Help (help) is what the servers do with a hedge copy: "none" (queue
	// it like any request, the default), "idle-only" (refuse it unless
	// idle: sim.Config.IdleOnlyCopies) or "low-priority" (run it only on
	// capacity no primary wants: sim.Config.LowPriorityCopies). Either
	// form needs a queue per server (not pool routing). With tied
	// requests only idle-only may be chosen: it runs their spare form
	// (sim.TiedSpare), whose second copy runs only on an idle server.
	Help string `json:"help"`
	// Width (width, 1 to 100, default 1) is how many sub-requests
	// (leaves) each request fans out to (sim.Config.Fanout); each leaf
	// is routed and hedged on its own. Need (need, default 0: all of
	// them, else 1 to Width) is how many leaves must answer for the
	// request to finish (sim.Config.FanoutNeed: the first k of n); the
	// others are then cancelled. FanCall (fancall, default true) runs
	// each request as the library's fan-out call, hedge.DoFan with the
	// zero hedge.FanOut (sim.Config.FanCall): a budget and cap of extra
	// copies per request, shared by its leaves, and the sibling trigger
	// that hedges stragglers early. Need and FanCall matter only when
	// Width > 1, and FanCall only for a strategy that hedges (not none,
	// nor tied requests, which the call's budget and trigger do not
	// govern).
	Width   int  `json:"width"`
	Need    int  `json:"need"`
	FanCall bool `json:"fancall"`
	// Runs (runs, 1 to 4, default 2), Requests (requests per run, 1,000
	// to Options.MaxRequests, default Options.DefaultRequests) and Seed
	// (seed, 1) size and seed the simulation. The limits count leaves:
	// a request of width W counts W times, so requests x width is at most
	// Options.MaxRequests, and runs x requests x width at most
	// Options.MaxWork. A query that gives no requests gets the default
	// lowered to fit them (2 runs of width 40 under the default limits:
	// 5,000 requests, 200,000 leaves per run); one that gives too many
	// is refused, with the most that fit.
	Runs     int    `json:"runs"`
	Requests int    `json:"requests"`
	Seed     uint64 `json:"seed"`
}

// DefaultExploreParams returns the explorer's opening settings: the
// log-normal pool at sigma 1 and half load, hedging at the quiet-day p95
// with cancellation.
func DefaultExploreParams() ExploreParams {
	return ExploreParams{
		World: "lognormal", Sigma: 1, Load: 0.5, Routing: "pool",
		Strategy: "percentile", Delay: 2, Percentile: "95", Calibration: "quiet",
		LiveP: 95, Budget: 5, Cancel: true, Clients: 1, Help: "none",
		Width: 1, FanCall: true,
		Runs: 2, Requests: 100_000, Seed: 1,
	}
}

// hedges reports whether the parameters send extra copies.
func (p ExploreParams) hedges() bool { return p.choice().strategy != sim.None }

// key is the canonical form of the parameters that matter: the hedged
// side's simulation, in full, and for a calibrated delay the calibration
// and the percentile. Parameters of other strategies are not part of it,
// nor are need and fancall without a fan-out (they are not in the
// simulation's configuration then).
func (p ExploreParams) key() string {
	c, ch := p.config()
	k := fmt.Sprintf("%s runs=%d", configKey(c), p.Runs)
	if ch.calibrated() {
		k += fmt.Sprintf(" calibration=%s p=%s", ch.calibration(), p.Percentile)
	}
	return k
}

// plainConfig is sim.Config without its String method, which rounds
// delays to four digits: formatted with %+v it shows every field in full,
// which makes it a cache key (see configKey).
type plainConfig sim.Config

// configKey formats c in full, as a cache key: plainConfig with %+v, and
// the fan-out call's hedge.FanOut by value, where %+v would print the
// pointer's address. (The lab leaves sim.Config.Hedge nil.)
func configKey(c sim.Config) string {
	fo := c.FanCall
	c.FanCall = nil
	k := fmt.Sprintf("%+v", plainConfig(c))
	if fo != nil {
		k += fmt.Sprintf(" fan-call=%+v", *fo)
	}
	return k
}

// parseExplore reads the explorer's parameters from a raw query string,
// checking each against its range, and the leaves (requests x width) per
// run against MaxRequests and per point (runs x requests x width)
// against MaxWork.
func (s *Server) parseExplore(raw string) (ExploreParams, []ParamError) {
	d := DefaultExploreParams()
	f := newForm(raw)
	if f.malformed() {
		return d, f.errs
	}
	// The size's defaults depend on the width and the runs, read first.
	width := f.integer("width", d.Width, 1, maxWidth)
	runs := f.integer("runs", d.Runs, 1, maxRuns)
	p := ExploreParams{
		World:       f.choice("world", d.World, exploreWorlds),
		Sigma:       f.float("sigma", d.Sigma, 0, maxSigma),
		Load:        f.float("load", d.Load, minLoad, maxLoad),
		Routing:     f.choice("routing", d.Routing, exploreRoutings),
		Strategy:    f.choice("strategy", d.Strategy, exploreStrategies),
		Delay:       sim.Units(hedge.Fixed(f.millis("delay", time.Duration(d.Delay*float64(sim.Unit)), maxDelay*sim.Unit))),
		Percentile:  f.choice("p", d.Percentile, explorePcts),
		Calibration: f.choice("calib", d.Calibration, exploreCalibs),
		LiveP:       f.float("livep", d.LiveP, minLiveP, maxLiveP),
		Budget:      f.float("budget", d.Budget, minBudget, 100),
		Cancel:      f.boolean("cancel", d.Cancel),
		Tied:        f.boolean("tied", d.Tied),
		Clients:     f.integer("clients", d.Clients, 1, maxExploreClients),
		Help:        f.choice("help", d.Help, exploreHelps),
		Width:       width,
		Need:        f.integer("need", d.Need, 0, maxWidth),
		FanCall:     f.boolean("fancall", d.FanCall),
		Runs:        runs,
		Requests:    f.integer("requests", s.defaultRequests(runs, width), minRequests, s.o.MaxRequests),
		Seed:        f.uint("seed", d.Seed),
	}
	f.unknown()
	if len(f.errs) == 0 && p.Help != "none" && (p.Routing == sim.Pool.String() || p.Tied && p.Help != "idle-only") {
		f.bad("help", "the servers' help needs a queue per server, and with tied requests it can only be idle-only (their spare form): choose two-choice, random or least-loaded routing, and idle-only or no tied requests")
	}
	if len(f.errs) == 0 && p.Need > p.Width {
		f.bad("need", "%d is more leaves than the width (%d): use 0 (all of them) to %d", p.Need, p.Width, p.Width)
	}
	if len(f.errs) > 0 {
		return p, f.errs
	}
	switch leaves := p.Requests * p.Width; {
	case p.Width == 1 && p.Runs*p.Requests > s.o.MaxWork:
		f.bad("requests", "runs x requests = %d x %d exceeds the lab's limit of %d simulated requests per point: lower requests or runs",
			p.Runs, p.Requests, s.o.MaxWork)
	case leaves > s.o.MaxRequests:
		f.bad("requests", "requests x width = %d x %d = %d leaves per run exceeds the lab's limit of %d: %s",
			p.Requests, p.Width, leaves, s.o.MaxRequests, lower(s.o.MaxRequests/p.Width, "the width", "width", s.o.MaxRequests))
	case p.Runs*leaves > s.o.MaxWork:
		f.bad("requests", "runs x requests x width = %d x %d x %d = %d leaves exceeds the lab's limit of %d simulated leaves per point: %s",
			p.Runs, p.Requests, p.Width, p.Runs*leaves, s.o.MaxWork, lower(s.o.MaxWork/(p.Runs*p.Width), "runs or the width", "runs x width", s.o.MaxWork))
	}
	return p, f.errs
}

// lower says what to lower when a fan-out's leaves exceed a limit: the
// requests, to most or less, or else (when most is below the lab's least
// requests) the others, whose product what may be at most limit/minRequests.
func lower(most int, others, what string, limit int) string {
	if most >= minRequests {
		return fmt.Sprintf("lower requests to %d or less, or %s", most, others)
	}
	return fmt.Sprintf("lower %s: with the least requests, %d, %s may be at most %d", others, minRequests, what, limit/minRequests)
}

// defaultRequests is the requests per run of a query that gives none:
// Options.DefaultRequests, lowered for a fan-out so that its leaves fit
// MaxRequests per run and MaxWork per point, and at least minRequests.
func (s *Server) defaultRequests(runs, width int) int {
	return max(minRequests, min(s.o.DefaultRequests, s.o.MaxRequests/width, s.o.MaxWork/(runs*width)))
}

// Note is one warning or heads-up shown beside the verdict.
type Note struct {
	// Kind names the rule ("collapse", "saturated", "no-cancel", ...).
	Kind string `json:"kind"`
	// Text is the message.
	Text string `json:"text"`
}

// Verdict is the explorer's plain-language conclusion.
type Verdict struct {
	// Tone is baseline, good, neutral, bad or collapse.
	Tone string `json:"tone"`
	// Title is a short headline and Text the explanation.
	Title string `json:"title"`
	Text  string `json:"text"`
}

// Point is one point of a CCDF: P(latency > T) = P.
type Point struct {
	T float64 `json:"t"`
	P float64 `json:"p"`
}

// Measures are the summary numbers of one simulated point: means across
// runs, latencies in mean service times.
type Measures struct {
	// Mean and the nearest-rank percentiles of latency, with the
	// standard errors of the percentiles.
	Mean   float64 `json:"mean"`
	P50    float64 `json:"p50"`
	P95    float64 `json:"p95"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p999"`
	P50SE  float64 `json:"p50_se"`
	P95SE  float64 `json:"p95_se"`
	P99SE  float64 `json:"p99_se"`
	P999SE float64 `json:"p999_se"`
	// HedgedFraction is the share of requests that sent a second copy,
	// MultiStarted the share of which more than one copy started service.
	HedgedFraction float64 `json:"hedged_fraction"`
	MultiStarted   float64 `json:"multi_started"`
	// ExtraWork is the work beyond one copy per request, as a fraction;
	// Utilisation the share of server time busy; MeanDelay the mean hedge
	// delay in force.
	ExtraWork   float64 `json:"extra_work"`
	Utilisation float64 `json:"utilisation"`
	MeanDelay   float64 `json:"mean_delay"`
	// CCDF is the latency CCDF through the measured tail curve (see
	// ExploreResponse.CCDFSource), and RunCCDFs the same for each run.
	CCDF     []Point   `json:"ccdf"`
	RunCCDFs [][]Point `json:"run_ccdfs"`
	// Fan holds the fan-out's measures when Width > 1, and is absent
	// otherwise. With a fan-out the percentiles above are the requests'
	// (each as slow as the leaves it waits for), and HedgedFraction,
	// MultiStarted and MeanDelay count leaves.
	Fan *FanMeasures `json:"fan,omitempty"`
}

// FanMeasures are the measures of a fan-out's leaves: means across runs,
// latencies in mean service times.
type FanMeasures struct {
	// LeafP50, LeafP99 and LeafP999 are the nearest-rank percentiles of
	// leaf latency, each leaf from its own start.
	LeafP50  float64 `json:"leaf_p50"`
	LeafP99  float64 `json:"leaf_p99"`
	LeafP999 float64 `json:"leaf_p999"`
	// Copies is the mean number of copies a request's leaves placed: the
	// width when nothing is hedged.
	Copies float64 `json:"copies"`
	// Call holds the fan-out call's measures when it ran (FanCall with a
	// strategy that hedges), and is absent otherwise.
	Call *FanCallMeasures `json:"call,omitempty"`
}

// FanCallMeasures are the measures of the library's fan-out call
// (hedge.DoFan), per request.
type FanCallMeasures struct {
	// Extra is the mean extra copies (hedges) a request's leaves sent;
	// Refused the mean copies the request's own budget or cap held back.
	Extra   float64 `json:"extra"`
	Refused float64 `json:"refused"`
	// Peak is the most extra copies of one request in flight at once,
	// over the runs.
	Peak int `json:"peak"`
}

// Gap holds the ratios hedged / unhedged of each percentile (below 1 is
// better), paired by run.
type Gap struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	// Headline is the ratio of the headline percentile and HeadlineSE its
	// standard error.
	Headline   float64 `json:"headline"`
	HeadlineSE float64 `json:"headline_se"`
	// Leaf holds the same ratios of the leaves' percentiles when
	// Width > 1, and is absent otherwise.
	Leaf *LeafGap `json:"leaf,omitempty"`
}

// LeafGap holds the ratios hedged / unhedged of the leaves' percentiles,
// paired by run.
type LeafGap struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// ExploreResponse is the body of a successful /api/explore.
type ExploreResponse struct {
	// Params echo the request with defaults filled in.
	Params ExploreParams `json:"params"`
	// Config describes the hedged simulation as sim.Config.String does.
	Config string `json:"config"`
	// Baseline is the same point without hedging (same seeds), Hedged the
	// chosen strategy.
	Baseline Measures `json:"baseline"`
	Hedged   Measures `json:"hedged"`
	Gap      Gap      `json:"gap"`
	// Label names the hedged side ("at the p95 of a quiet day", "the
	// library default (...)").
	Label string `json:"label"`
	// Headline is the percentile the verdict uses: "p999" in the stalling
	// worlds, "p99" otherwise (as in the study).
	Headline string `json:"headline"`
	// Delay is the hedge delay used, in mean service times (the mean
	// delay in force for the live estimates: live and default), and
	// DelayNote says where it came from.
	Delay     float64 `json:"delay"`
	DelayNote string  `json:"delay_note"`
	// ExtraAttempts is the share of requests (of leaves, with a fan-out)
	// that sent a second copy; ExtraWork the work done beyond one copy
	// per request (per leaf), as a fraction.
	ExtraAttempts float64 `json:"extra_attempts"`
	ExtraWork     float64 `json:"extra_work"`
	Verdict       Verdict `json:"verdict"`
	// Warnings come from the measured numbers; HeadsUp from rules on the
	// settings alone.
	Warnings []Note `json:"warnings"`
	HeadsUp  []Note `json:"heads_up"`
	// CCDFSource is "tail": the CCDF is drawn through the latency at each
	// of sim.TailLevels, measured exactly per run.
	CCDFSource string `json:"ccdf_source"`
	// ServerMillis is the time the server spent on this response, Cached
	// whether it came from the cache, and Simulated the requests simulated
	// for it (calibration included, 0 when cached).
	ServerMillis float64 `json:"server_ms"`
	Cached       bool    `json:"cached"`
	Simulated    int     `json:"simulated_requests"`
}

func (s *Server) handleExplore(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	p, errs := s.parseExplore(r.URL.RawQuery)
	if len(errs) > 0 {
		writeParamErrors(w, errs)
		return
	}
	// A leaf holds what a request does (see runBytesPerRequest): the
	// memory bound counts leaves.
	leaves := p.Requests * p.Width
	workers := s.runWorkers(leaves, p.Runs)
	if workers < 1 {
		most := s.o.MaxMemory / runBytesPerRequest / int64(p.Width)
		run := fmt.Sprintf("%d requests", p.Requests)
		if p.Width > 1 {
			run += fmt.Sprintf(" of %d leaves", p.Width)
		}
		e := ParamError{Param: "requests", Reason: fmt.Sprintf(
			"a run of %s may need up to %s of memory, over the lab's limit of %s per request: lower requests to %d or less",
			run, mib(int64(leaves)*runBytesPerRequest), mib(s.o.MaxMemory), most)}
		writeError(w, http.StatusRequestEntityTooLarge, "simulation too large: requests: "+e.Reason, []ParamError{e})
		return
	}
	if v, ok := s.cache.get("explore " + p.key()); ok {
		resp := v.(ExploreResponse)
		resp.Params, resp.Cached, resp.Simulated = p, true, 0
		resp.ServerMillis = millis(time.Since(start))
		writeJSON(w, http.StatusOK, resp)
		return
	}
	s.inSlot(w, r, func(ctx context.Context) (int, any) { return s.simulate(ctx, p, workers, start) })
}

// inSlot runs work holding a simulation slot and sends what it returns
// (nothing for a status of 0: the client has gone), or 503 when no slot
// frees in time; then it trims the heap.
func (s *Server) inSlot(w http.ResponseWriter, r *http.Request, work func(context.Context) (int, any)) {
	release, err := s.acquire(r.Context())
	if err != nil {
		if errors.Is(err, errBusy) {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf(
				"the lab is already running %d simulations, its limit: try again in a moment", cap(s.sem)), nil)
		}
		return // the client has gone
	}
	code, body := func() (int, any) {
		defer release()
		ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
		defer cancel()
		if s.testHook != nil {
			s.testHook(ctx)
		}
		return work(ctx)
	}()
	if code != 0 {
		writeJSON(w, code, body)
		http.NewResponseController(w).Flush() // the answer goes out before trim runs
	}
	s.trim()
}

// failed maps the error of a slot's work to the status and body to send:
// 503 when the lab's time limit stopped it (saying what took too long and
// what to try), 0 when the client has gone, 400 when it is one of
// invalid, 500 otherwise. It reports false for a nil error.
func (s *Server) failed(err error, what, try string, invalid ...error) (int, any, bool) {
	switch {
	case err == nil:
		return 0, nil, false
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, ErrorResponse{Error: fmt.Sprintf(
			"the %s took longer than the lab's limit of %v and was stopped: %s", what, s.o.Timeout, try)}, true
	case errors.Is(err, context.Canceled):
		return 0, nil, true // the client has gone
	}
	for _, e := range invalid {
		if errors.Is(err, e) {
			return http.StatusBadRequest, ErrorResponse{Error: err.Error()}, true
		}
	}
	return http.StatusInternalServerError, ErrorResponse{Error: err.Error()}, true
}

// simulate answers an explorer request that holds a simulation slot (ctx
// bounded by the lab's time limit): the status and body to send, or 0
// when the client has gone.
func (s *Server) simulate(ctx context.Context, p ExploreParams, workers int, start time.Time) (int, any) {
	resp, err := s.explore(ctx, p, workers)
	if code, body, failed := s.failed(err, "simulation", "lower requests or runs", sim.ErrInvalid); failed {
		return code, body
	}
	s.cache.put("explore "+p.key(), resp)
	resp.ServerMillis = millis(time.Since(start))
	return http.StatusOK, resp
}

// mib formats bytes in MiB.
func mib(b int64) string { return strconv.FormatInt((b+1<<20-1)>>20, 10) + " MiB" }

func millis(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

// baseConfig is the unhedged configuration of p's point.
func (p ExploreParams) baseConfig() sim.Config {
	c := sim.DefaultConfig()
	c.World, _ = sim.ParseWorld(p.World)
	c.Routing, _ = sim.ParseRouting(p.Routing)
	c.Load = p.Load
	if c.World == sim.LogNormal {
		c.Sigma = p.Sigma // elsewhere unused: one cache entry whatever it says
	}
	c.Requests = p.Requests
	c.Warmup = p.Requests / 10
	c.Seed = p.Seed
	c.Tail = true // the CCDF
	c.Clients = p.Clients
	c.Fanout = p.Width
	if p.Need < p.Width {
		c.FanoutNeed = p.Need // waiting for all of them is 0: one cache entry
	}
	return c
}

// point runs c (or takes it from the cache), with at most workers runs in
// parallel, and reports how many requests it simulated.
func (s *Server) point(ctx context.Context, c sim.Config, runs, workers int, simulated *int) (sim.Summary, error) {
	key := fmt.Sprintf("point %s runs=%d", configKey(c), runs)
	if v, ok := s.cache.get(key); ok {
		return v.(sim.Summary), nil
	}
	if err := ctx.Err(); err != nil {
		return sim.Summary{}, err // RunPoint might start a run anyway
	}
	sum, err := sim.RunPoint(ctx, c, runs, workers)
	if err != nil {
		return sim.Summary{}, err
	}
	*simulated += runs * c.Requests
	s.cache.put(key, sum)
	return sum, nil
}

// explore simulates p's point, at most workers runs at a time.
func (s *Server) explore(ctx context.Context, p ExploreParams, workers int) (ExploreResponse, error) {
	resp := ExploreResponse{Params: p, CCDFSource: "tail"}
	base := p.baseConfig()
	baseSum, err := s.point(ctx, base, p.Runs, workers, &resp.Simulated)
	if err != nil {
		return resp, err
	}
	hc, ch := p.config()
	if ch.calibrated() {
		if hc.Delay, err = s.calibrate(ctx, p, ch, workers, &resp.Simulated); err != nil {
			return resp, err
		}
	}
	hedgedSum := baseSum
	if p.hedges() {
		if hedgedSum, err = s.point(ctx, hc, p.Runs, workers, &resp.Simulated); err != nil {
			return resp, err
		}
	}
	resp.Config = hc.String()
	resp.Label = ch.label(p)
	resp.Baseline, resp.Hedged = measures(baseSum), measures(hedgedSum)
	// The delay in force: a preset's fixed delay, or the mean of a live
	// estimate's (live, and the library default).
	if h, ok := hc.HedgeConfig(); ok {
		resp.Delay = hedgedSum.Delay.Value
		if d, fixed := h.Delay.(hedge.Fixed); fixed {
			resp.Delay = sim.Units(d)
		}
		resp.DelayNote = ch.note(p, hc, resp.Delay)
	}
	resp.Headline = sim.Headline(base.World)
	resp.Gap = gap(baseSum, hedgedSum, resp.Headline)
	resp.ExtraAttempts = hedgedSum.HedgedFraction.Value
	resp.ExtraWork = hedgedSum.ExtraWork.Value
	resp.Verdict, resp.Warnings = judge(p, &resp)
	resp.HeadsUp = headsUp(p)
	return resp, nil
}

func measures(s sim.Summary) Measures {
	m := Measures{
		Mean: s.Mean.Value, P50: s.P50.Value, P95: s.P95.Value, P99: s.P99.Value, P999: s.P999.Value,
		P50SE: s.P50.SE, P95SE: s.P95.SE, P99SE: s.P99.SE, P999SE: s.P999.SE,
		HedgedFraction: s.HedgedFraction.Value, MultiStarted: s.MultiStarted.Value,
		ExtraWork: s.ExtraWork.Value, Utilisation: s.Utilisation.Value, MeanDelay: s.Delay.Value,
	}
	measured := 0
	if len(s.Runs) > 0 {
		measured = s.Runs[0].Requests
	}
	tail := make([]float64, len(s.Tail))
	for i, e := range s.Tail {
		tail[i] = e.Value
	}
	m.CCDF = ccdf(tail, measured)
	for _, r := range s.Runs {
		m.RunCCDFs = append(m.RunCCDFs, ccdf(r.Tail, r.Requests))
	}
	if s.Config.Fanout > 1 {
		m.Fan = &FanMeasures{LeafP50: s.LeafP50.Value, LeafP99: s.LeafP99.Value, LeafP999: s.LeafP999.Value, Copies: s.Copies.Value}
		if s.Config.FanCall != nil {
			m.Fan.Call = &FanCallMeasures{Extra: s.FanExtra.Value, Refused: s.FanRefused.Value, Peak: s.FanPeak}
		}
	}
	return m
}

// ccdf returns the CCDF through the simulator's tail curve
// (sim.TailLevels): P(latency > tail[i]) = TailLevels[i]. Levels that fewer
// than 10 of the n measured requests exceed are left out: their quantile is
// the noise of a handful of requests.
func ccdf(tail []float64, n int) []Point {
	var pts []Point
	for i, l := range sim.TailLevels {
		if i < len(tail) && l*float64(n) >= 10 {
			pts = append(pts, Point{tail[i], l})
		}
	}
	return pts
}

func gap(base, hedged sim.Summary, headline string) Gap {
	col := func(s sim.Summary, f func(sim.RunResult) float64) []float64 {
		xs := make([]float64, len(s.Runs))
		for i, r := range s.Runs {
			xs[i] = f(r)
		}
		return xs
	}
	ratio := func(f func(sim.RunResult) float64) sim.Estimate {
		e := sim.Ratio(col(hedged, f), col(base, f))
		if math.IsNaN(e.Value) || math.IsInf(e.Value, 0) {
			return sim.Estimate{}
		}
		return e
	}
	p50 := ratio(func(r sim.RunResult) float64 { return r.P50 })
	p95 := ratio(func(r sim.RunResult) float64 { return r.P95 })
	p99 := ratio(func(r sim.RunResult) float64 { return r.P99 })
	p999 := ratio(func(r sim.RunResult) float64 { return r.P999 })
	g := Gap{P50: p50.Value, P95: p95.Value, P99: p99.Value, P999: p999.Value, Headline: p99.Value, HeadlineSE: p99.SE}
	if headline == "p999" {
		g.Headline, g.HeadlineSE = p999.Value, p999.SE
	}
	if base.Config.Fanout > 1 {
		g.Leaf = &LeafGap{
			P50:  ratio(func(r sim.RunResult) float64 { return r.LeafP50 }).Value,
			P99:  ratio(func(r sim.RunResult) float64 { return r.LeafP99 }).Value,
			P999: ratio(func(r sim.RunResult) float64 { return r.LeafP999 }).Value,
		}
	}
	return g
}

// Thresholds of the measured warnings.
const (
	collapseRatio   = 2    // the tail at least twice as bad as not hedging
	allHedged       = 0.9  // nearly every request sent a second copy
	saturated       = 0.97 // utilisation at which queues grow without bound
	manyHedged      = 0.5  // half the requests hedged
	betterThreshold = 0.95 // ratio below this: hedging helps
	worseThreshold  = 1.05 // ratio above this: hedging hurts
)

// pctName returns "p99" or "p99.9" for a headline key.
func pctName(headline string) string {
	if headline == "p999" {
		return "p99.9"
	}
	return headline
}

// times formats a ratio as "1.3x" (from the better side).
func times(r float64) string {
	if r < 1 && r > 0 {
		r = 1 / r
	}
	switch {
	case r >= 100:
		return strconv.FormatFloat(math.Round(r), 'f', 0, 64) + "×"
	case r >= 10:
		return strconv.FormatFloat(r, 'f', 0, 64) + "×"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "×"
}

// num formats a latency in mean service times: three significant digits,
// whole numbers with thousands separators from 1,000 up.
func num(x float64) string {
	if math.Abs(x) < 1000 {
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
	s := strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// percent formats a fraction as a percentage: one decimal below 10%.
func percent(x float64) string {
	p := 100 * x
	switch {
	case math.Abs(p) < 0.05:
		return "0%"
	case math.Abs(p) < 10:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// judge writes the verdict and the measured warnings.
func judge(p ExploreParams, r *ExploreResponse) (Verdict, []Note) {
	warn := []Note{}
	name := pctName(r.Headline)
	b, h := r.Baseline, r.Hedged
	bv, hv := b.P99, h.P99
	if r.Headline == "p999" {
		bv, hv = b.P999, h.P999
	}
	ratio := r.Gap.Headline
	what := "hedging"
	if p.Tied {
		what = "tied requests"
	}
	if !p.hedges() {
		one := "One copy per request."
		if p.Width > 1 {
			one = "One copy per leaf."
		}
		return Verdict{Tone: "baseline", Title: "No hedging: the baseline",
			Text: fmt.Sprintf("%s The %s is %s mean service times at %s utilisation; pick a strategy to compare.", one, name, num(bv), percent(b.Utilisation)) + fanNote(p, r)}, warn
	}
	cost := fmt.Sprintf("%s extra attempts and %s extra work", percent(r.ExtraAttempts), percent(r.ExtraWork))
	if r.ExtraWork <= -0.0005 {
		// Fresh copy sizes: winning backups can be shorter than the
		// primaries they replace.
		cost = fmt.Sprintf("%s extra attempts and %s less work", percent(r.ExtraAttempts), percent(-r.ExtraWork))
	}
	var v Verdict
	switch {
	case ratio > collapseRatio:
		v = Verdict{Tone: "collapse", Title: fmt.Sprintf("Collapse: the %s is %s worse than not hedging", name, times(ratio)),
			Text: fmt.Sprintf("With %s the %s goes from %s to %s mean service times, for %s. The extra copies are the load that causes the queueing that triggers them.", what, name, num(bv), num(hv), cost)}
	case ratio > worseThreshold:
		v = Verdict{Tone: "bad", Title: fmt.Sprintf("Worse: %s makes the %s %s worse", what, name, times(ratio)),
			Text: fmt.Sprintf("The %s goes from %s to %s mean service times, and it costs %s.", name, num(bv), num(hv), cost)}
	case ratio < betterThreshold && ratio > 0:
		v = Verdict{Tone: "good", Title: fmt.Sprintf("Worth it: %s cuts the %s %s", what, name, times(ratio)),
			Text: fmt.Sprintf("The %s falls from %s to %s mean service times for %s.", name, num(bv), num(hv), cost)}
	default:
		v = Verdict{Tone: "neutral", Title: fmt.Sprintf("No real gain: the %s barely moves", name),
			Text: fmt.Sprintf("The %s goes from %s to %s mean service times (within 5%%), for %s.", name, num(bv), num(hv), cost)}
	}
	if g := r.Gap.P50; g > worseThreshold && (v.Tone == "good" || v.Tone == "neutral") {
		// The tail bought with the median: worse than not hedging for
		// most requests, whatever the headline says.
		gain := fmt.Sprintf("the %s goes from %s to %s mean service times", name, num(bv), num(hv))
		if v.Tone == "good" {
			gain = fmt.Sprintf("the %s falls from %s to %s mean service times", name, num(bv), num(hv))
		}
		v = Verdict{Tone: "bad", Title: fmt.Sprintf("A bad trade: %s raises the median %s", what, times(g)),
			Text: fmt.Sprintf("The median goes from %s to %s mean service times while %s, for %s: most requests are slower than without hedging.", num(b.P50), num(h.P50), gain, cost)}
		if p.Clients > 1 && p.Help != "low-priority" {
			v.Text += fmt.Sprintf(" Each of the %d clients sees only its own requests, so its copies land on queues other clients fill; try the servers' help (low priority).", p.Clients)
		}
	}
	v.Text += fanNote(p, r)
	if ratio > collapseRatio {
		t := fmt.Sprintf("Measured: the %s is %s worse with %s (%s → %s).", name, times(ratio), what, num(bv), num(hv))
		if h.HedgedFraction >= allHedged && !p.Tied {
			t += fmt.Sprintf(" %s of requests sent a second copy: ordinary latency now exceeds the hedge delay, so every request earns a hedge.", percent(h.HedgedFraction))
		}
		if !p.Cancel {
			t += " Cancellation is off, so every hedge is a whole extra request."
		}
		warn = append(warn, Note{Kind: "collapse", Text: t})
	} else if h.HedgedFraction >= manyHedged && !p.Tied {
		warn = append(warn, Note{Kind: "many-hedged", Text: fmt.Sprintf("Measured: %s of requests were hedged. The delay is below the latency of most requests; this is close to sending everything twice.", percent(h.HedgedFraction))})
	}
	if h.Utilisation >= saturated {
		warn = append(warn, Note{Kind: "saturated", Text: fmt.Sprintf("Measured: the servers were busy %s of the time. The queues grow for as long as the run lasts, so a longer run would show an even worse tail.", percent(h.Utilisation))})
	}
	return v, warn
}

// fanNote is the verdict's sentence on a fan-out, empty for single
// requests: a request waits for the leaves it needs, so a leaf's tail
// reaches many requests (1 - 0.99^W of them beyond a leaf's p99, were
// the W leaves independent; beyond its p95, 1 - 0.95^W, half of them from
// W = 14), and with the first k of W it never waits for the W-k slowest.
// It quotes the measured leaf p99 and request p50.
func fanNote(p ExploreParams, r *ExploreResponse) string {
	b, h := r.Baseline.Fan, r.Hedged.Fan
	if p.Width < 2 || b == nil || h == nil {
		return ""
	}
	var t string
	if w := float64(p.Width); p.Need == 0 || p.Need == p.Width {
		t = fmt.Sprintf(" A request waits for all %d of its leaves: were they independent, %s of requests (1 − 0.99^%d) would wait out a leaf beyond its p99, against 1%% of leaves",
			p.Width, percent(1-math.Pow(0.99, w)), p.Width)
		if p95 := 1 - math.Pow(0.95, w); p95 >= 0.5 {
			t += fmt.Sprintf(", and %s one beyond its p95: the requests' median is where the leaves' tail shows.", percent(p95))
		} else {
			t += "."
		}
	} else {
		t = fmt.Sprintf(" A request needs the first %d of its %d leaves, so it never waits for its %d slowest.", p.Need, p.Width, p.Width-p.Need)
	}
	if !p.hedges() {
		return t + fmt.Sprintf(" The leaves' p99 is %s; the requests' p50 %s.", num(b.LeafP99), num(r.Baseline.P50))
	}
	return t + fmt.Sprintf(" The leaves' p99 goes from %s to %s, the requests' p50 from %s to %s.", num(b.LeafP99), num(h.LeafP99), num(r.Baseline.P50), num(r.Hedged.P50))
}

// headsUp returns the rule-based notes on the settings, which need no
// measurement.
func headsUp(p ExploreParams) []Note {
	notes := []Note{}
	if !p.hedges() {
		return notes
	}
	const collapseLoad = 0.6
	switch {
	case !p.Cancel && p.Load > collapseLoad:
		notes = append(notes, Note{Kind: "no-cancel-high-load", Text: fmt.Sprintf(
			"Cancellation is off above %g%% utilisation: this is the regime where hedging collapses. Each hedge costs a whole extra request, and once queueing pushes ordinary requests past the threshold every request is hedged.", 100*collapseLoad)})
	case !p.Cancel:
		notes = append(notes, Note{Kind: "no-cancel", Text: "Cancellation is off: each hedge costs a whole extra request instead of at most the delay's worth of work. Push utilisation above 60% to see what that does."})
	}
	c, ch := p.config()
	switch {
	case c.Strategy == sim.Tied:
		if c.NoCancel {
			notes = append(notes, Note{Kind: "tied-no-cancel", Text: "Tied requests without cancellation run every request twice."})
		}
	case c.Strategy == sim.HedgeFixed && c.Delay == 0:
		notes = append(notes, Note{Kind: "zero-delay", Text: "A delay of 0 sends every request twice: a retry loop with no delay is the same bug."})
	case ch.calibrated() && p.Percentile == "50",
		c.Strategy == sim.HedgeP95Live && c.LiveP < 90:
		notes = append(notes, Note{Kind: "low-percentile", Text: "A hedge below p90 is not a hedge: at p50 half the requests go out twice."})
	}
	if c.Strategy == sim.HedgeQuietBudget && c.Budget >= 0.5 {
		notes = append(notes, Note{Kind: "loose-budget", Text: fmt.Sprintf("A budget of %g hedges per 100 requests caps almost nothing.", p.Budget)})
	}
	if c.World.HasStalls() && c.Load >= 0.9 {
		notes = append(notes, Note{Kind: "stall-capacity", Text: "Stalling servers have 98.1% capacity: at this load hedging that adds more than a few percent of work makes the queues unstable."})
	}
	return notes
}
