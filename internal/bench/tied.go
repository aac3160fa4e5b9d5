package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge/spare"
	"github.com/tailcut/hedge/tied"
)

// TiedConfigs are the configurations a tied comparison runs: no hedging
// (two-choice placement), the library's default hedge.Config, and tied
// requests.
var TiedConfigs = []string{"none", DefaultStrategy, "tied"}

// SpareConfig is the tied comparison's configuration of the default
// client against servers whose worker limit is a spare.Limiter: the
// copies that the client marks run only on capacity no primary wants.
const SpareConfig = DefaultStrategy + "-spare"

// TiedWorld is the workload of a tied comparison: request sizes and
// stalls.
type TiedWorld struct {
	// Name labels the world in the report.
	Name string
	// BigShare of requests are BigFactor times larger than the others
	// (the big-jobs pattern); zero means every request has the base size.
	BigShare, BigFactor float64
	// StallShare is the fraction of time each replica's workers are
	// stalled, in stalls of StallLength; zero means no stalls.
	StallShare  float64
	StallLength time.Duration
}

// meanSize returns the mean request size in units of the base size.
func (w TiedWorld) meanSize() float64 {
	return 1 - w.BigShare + w.BigShare*w.BigFactor
}

// DefaultTiedWorlds are the worlds of "hedge bench tied": plain, stalls
// (each replica stalled 2% of the time in 50 ms stalls) and big jobs (3%
// of requests 30 times larger: a squared coefficient of variation near
// 10, as in the study's bigjobs world).
var DefaultTiedWorlds = []TiedWorld{
	{Name: "plain"},
	{Name: "stalls", StallShare: 0.02, StallLength: 50 * time.Millisecond},
	{Name: "bigjobs", BigShare: 0.03, BigFactor: 30},
}

// TiedOptions configures a tied comparison.
type TiedOptions struct {
	// Replicas, Workers and MaxQueue are the servers': Workers requests
	// run at once on each, the rest wait in a queue of MaxQueue.
	Replicas, Workers, MaxQueue int
	// Service is the base request size: a request of size s holds its
	// worker for s * Service.
	Service time.Duration
	// Loads are the offered loads, as fractions of the servers' capacity
	// (Replicas * Workers / mean service time).
	Loads []float64
	// Worlds are the workloads.
	Worlds []TiedWorld
	// Configs are the configurations (TiedConfigs by default).
	Configs []string
	// Duration and Warmup are each run's measured span and warm-up.
	Duration, Warmup time.Duration
	// Gap is the tied client's gap (zero: tied.DefaultGap).
	Gap time.Duration
	// Seed seeds arrivals, sizes and stalls: every configuration of a
	// world and load meets the same ones.
	Seed uint64
	// Timeout bounds each request.
	Timeout time.Duration
	// Repeats runs each world x load x configuration this many times,
	// with seeds Seed, Seed+1, ... (the same for every configuration of
	// a repeat), and reports medians (see MedianTied). Zero means 1.
	Repeats int
	// ClaimAhead is the servers' tied.Config.ClaimAhead (backends that
	// support it: StartTiedHTTP; others use the default).
	ClaimAhead int
	// Clients, above 1, splits the calls among that many clients of the
	// configuration, each with a Hedger and connections of its own.
	Clients int
}

// TiedWorkers is a replica's tied.Server worker limit: with Spare the
// spare.Limiter is the limit, and the tied.Server only counts.
func (o TiedBackendOptions) TiedWorkers() int {
	if o.Spare {
		return 1 << 20
	}
	return o.Workers
}

// NewLimiter returns a replica's spare.Limiter with Spare, or nil.
func (o TiedBackendOptions) NewLimiter() (*spare.Limiter, error) {
	if !o.Spare {
		return nil, nil
	}
	return spare.New(spare.Config{Workers: o.Workers, MaxQueue: o.MaxQueue})
}

// TiedBackendOptions are what a TiedBackend's servers need.
type TiedBackendOptions struct {
	Replicas, Workers, MaxQueue int
	// Secret signs the servers' claims.
	Secret []byte
	// ClaimAhead is tied.Config.ClaimAhead, for backends that support
	// it.
	ClaimAhead int
	// Spare makes each replica's worker limit a spare.Limiter (hedge
	// copies at low priority, preempted by primaries) instead of the
	// tied.Server's queue, for SpareConfig. Backends that cannot refuse
	// it with an error.
	Spare bool
}

// TiedBackend is a set of replicas running tied.Server's queue, whose
// application handler holds its worker for the request's size and waits
// out stalls. StartTiedHTTP makes the HTTP one; package grpcbench the
// gRPC one.
type TiedBackend interface {
	// Name is the backend's name ("http", "grpc").
	Name() string
	// Servers returns each replica's tied.Server.
	Servers() []*tied.Server
	// Received counts the requests that reached the replicas (claims
	// between servers excluded).
	Received() int64
	// Stall holds every worker of replica i that starts or runs during
	// the next d.
	Stall(ctx context.Context, i int, d time.Duration) error
	// NewCaller returns a function that sends request i with the given
	// size through configuration config, and a function that frees it.
	NewCaller(config string, gap time.Duration) (call func(ctx context.Context, i int, size time.Duration) error, closeFn func(), err error)
	// Close stops the replicas.
	Close() error
}

// TiedResult is one run of a tied comparison.
type TiedResult struct {
	Backend, World, Config string
	// Load is the offered load; Rate the arrival rate it means.
	Load, Rate float64
	// Calls and Errors count the measured calls and those that failed.
	Calls, Errors int
	// P50, P99, P999 are latency percentiles of the measured calls.
	P50, P99, P999 time.Duration
	// Extra is the requests that reached the servers per call, minus 1.
	Extra float64
	// Duplicated is the share of calls of which two copies started (the
	// servers' starts over the calls, minus 1): the simulator's
	// MultiStarted.
	Duplicated float64
	// Dropped counts tied copies dropped before they started.
	Dropped int64
	// Unclaimed counts tied copies that started without their claim
	// answered (tied.Stats.ClaimsFailed + ClaimsSkipped): the only ones
	// that can be duplicated.
	Unclaimed int64
	// ClaimP50 and ClaimP99 are percentiles of the claim's round trip
	// (what a tied copy waits, holding its worker, before it starts);
	// ClaimUnits is the median over the mean service time, comparable
	// with the simulator's CancelDelay.
	ClaimP50, ClaimP99 time.Duration
	ClaimUnits         float64
	// CPUPerCall is this process's CPU time over the measured span (the
	// load generator, the clients and, in-process, the servers) per
	// measured call; OtherCPU the cores other processes used meanwhile.
	// Zero where /proc cannot be read.
	CPUPerCall time.Duration
	OtherCPU   float64
	// Preempted counts, for SpareConfig, the copies that yielded their
	// worker to a primary (spare.Stats.Preempted).
	Preempted int64
	// Runs is how many repeats the result is the median of (1: a single
	// run). Calls, Errors, Dropped, Unclaimed and Preempted are then
	// totals.
	Runs int
}

// tiedSecret is the servers' shared secret in a comparison: fresh random
// bytes, never written anywhere.
func tiedSecret() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

// RunTied runs every world x load x configuration of o on backends made by
// start, one fresh backend per run, o.Repeats times each, and returns the
// results (medians of the repeats) in that order. progress, if not nil,
// gets one line per run.
func RunTied(ctx context.Context, o TiedOptions, start func(TiedBackendOptions) (TiedBackend, error), progress io.Writer) ([]TiedResult, error) {
	if o.Replicas < 2 || o.Workers < 1 || o.Service <= 0 || len(o.Loads) == 0 || len(o.Worlds) == 0 {
		return nil, errors.New("bench: tied comparison: need at least 2 replicas, 1 worker, a positive service time, loads and worlds")
	}
	configs := o.Configs
	if len(configs) == 0 {
		configs = TiedConfigs
	}
	repeats := max(o.Repeats, 1)
	var out []TiedResult
	for wi, w := range o.Worlds {
		for li, load := range o.Loads {
			runs := make([][]TiedResult, len(configs))
			for rep := range repeats {
				// Repeat r meets the arrivals of a single run with seed
				// o.Seed + r.
				seed := (o.Seed+uint64(rep))*1_000_003 + uint64(wi)*1009 + uint64(li)
				for ci, cfg := range configs {
					b, err := start(TiedBackendOptions{Replicas: o.Replicas, Workers: o.Workers, MaxQueue: o.MaxQueue, Secret: tiedSecret(), ClaimAhead: o.ClaimAhead, Spare: cfg == SpareConfig})
					if err != nil {
						return out, err
					}
					r, err := runTiedOnce(ctx, o, b, w, load, cfg, seed)
					if cerr := b.Close(); err == nil {
						err = cerr
					}
					if err != nil {
						return out, fmt.Errorf("bench: tied comparison, %s %s load %.2f %s: %w", b.Name(), w.Name, load, cfg, err)
					}
					runs[ci] = append(runs[ci], r)
					if progress != nil {
						fmt.Fprintf(progress, "%-5s %-8s load %.2f %-8s run %d p50 %8s p99 %8s p99.9 %8s dup %5.2f%% extra %6.2f%% unclaimed %d claim p50 %s preempted %d cpu/call %s others %.2f\n",
							r.Backend, r.World, r.Load, r.Config, rep+1, r.P50, r.P99, r.P999, 100*r.Duplicated, 100*r.Extra, r.Unclaimed, r.ClaimP50, r.Preempted, r.CPUPerCall, r.OtherCPU)
					}
					if err := ctx.Err(); err != nil {
						return out, err
					}
				}
			}
			for _, rs := range runs {
				out = append(out, MedianTied(rs))
			}
		}
	}
	return out, nil
}

// MedianTied combines repeats of one world, load and configuration: the
// median of each percentile and share (the upper median for an even
// count), and the totals of the counts. Runs is len(rs).
func MedianTied(rs []TiedResult) TiedResult {
	if len(rs) == 0 {
		return TiedResult{}
	}
	out := rs[0]
	out.Runs = len(rs)
	if len(rs) == 1 {
		return out
	}
	med := func(f func(TiedResult) float64) float64 { return medianOf(rs, f) }
	dur := func(f func(TiedResult) time.Duration) time.Duration {
		return time.Duration(med(func(r TiedResult) float64 { return float64(f(r)) }))
	}
	out.P50 = dur(func(r TiedResult) time.Duration { return r.P50 })
	out.P99 = dur(func(r TiedResult) time.Duration { return r.P99 })
	out.P999 = dur(func(r TiedResult) time.Duration { return r.P999 })
	out.ClaimP50 = dur(func(r TiedResult) time.Duration { return r.ClaimP50 })
	out.ClaimP99 = dur(func(r TiedResult) time.Duration { return r.ClaimP99 })
	out.ClaimUnits = med(func(r TiedResult) float64 { return r.ClaimUnits })
	out.Extra = med(func(r TiedResult) float64 { return r.Extra })
	out.Duplicated = med(func(r TiedResult) float64 { return r.Duplicated })
	out.CPUPerCall = dur(func(r TiedResult) time.Duration { return r.CPUPerCall })
	out.OtherCPU = med(func(r TiedResult) float64 { return r.OtherCPU })
	out.Calls, out.Errors, out.Dropped, out.Unclaimed, out.Preempted = 0, 0, 0, 0, 0
	for _, r := range rs {
		out.Preempted += r.Preempted
		out.Calls += r.Calls
		out.Errors += r.Errors
		out.Dropped += r.Dropped
		out.Unclaimed += r.Unclaimed
	}
	return out
}

// runTiedOnce runs one configuration on b.
func runTiedOnce(ctx context.Context, o TiedOptions, b TiedBackend, w TiedWorld, load float64, cfg string, seed uint64) (TiedResult, error) {
	n := max(1, o.Clients)
	callers := make([]func(context.Context, int, time.Duration) error, 0, n)
	for range n {
		c, closeFn, err := b.NewCaller(cfg, o.Gap)
		if err != nil {
			return TiedResult{}, err
		}
		defer closeFn()
		callers = append(callers, c)
	}
	call := callers[0]
	if n > 1 {
		call = func(ctx context.Context, i int, size time.Duration) error {
			return callers[clientOf(i, n)](ctx, i, size)
		}
	}
	mean := o.Service.Seconds() * w.meanSize()
	rate := load * float64(o.Replicas*o.Workers) / mean
	res := TiedResult{Backend: b.Name(), World: w.Name, Config: cfg, Load: load, Rate: rate, Runs: 1}

	rng := rand.New(rand.NewPCG(seed, 1))
	sizeOf := func() time.Duration {
		if w.BigShare > 0 && rng.Float64() < w.BigShare {
			return time.Duration(float64(o.Service) * w.BigFactor)
		}
		return o.Service
	}
	// Warm-up: the same rate, not recorded.
	wctx, cancelWarm := context.WithCancel(ctx)
	runArrivals(wctx, rate, o.Warmup, rng, sizeOf, o.Timeout, call, nil)
	cancelWarm()

	// Counters at the start of the measured span.
	servers := b.Servers()
	started0, dropped0, unclaimed0 := tiedTotals(servers)
	received0 := b.Received()
	preempted0 := preemptedOf(b)
	lat0 := make([]int, len(servers))
	for i, s := range servers {
		lat0[i] = len(s.ClaimLatencies())
	}
	stallCtx, stopStalls := context.WithCancel(ctx)
	var stallWG sync.WaitGroup
	if w.StallShare > 0 {
		for i := range servers {
			srng := rand.New(rand.NewPCG(seed, uint64(100+i)))
			stallWG.Add(1)
			go func() {
				defer stallWG.Done()
				stallLoop(stallCtx, b, i, w, srng)
			}()
		}
	}
	var lats []int64
	var errs atomic.Int64
	cpu0 := ReadCPU(nil)
	calls := runArrivals(ctx, rate, o.Duration, rng, sizeOf, o.Timeout, call, func(d time.Duration, err error) {
		if err != nil {
			errs.Add(1)
		}
		lats = append(lats, int64(d))
	})
	cpu1 := ReadCPU(nil)
	stopStalls()
	stallWG.Wait()
	for _, s := range servers {
		s.Close()
	}
	started1, dropped1, unclaimed1 := tiedTotals(servers)
	var cl []int64
	for i, s := range servers {
		all := s.ClaimLatencies()
		for _, d := range all[min(lat0[i], len(all)):] {
			cl = append(cl, int64(d))
		}
	}
	slices.Sort(lats)
	slices.Sort(cl)
	res.Calls, res.Errors = calls, int(errs.Load())
	if len(lats) > 0 {
		res.P50 = time.Duration(Quantile(lats, 0.5))
		res.P99 = time.Duration(Quantile(lats, 0.99))
		res.P999 = time.Duration(Quantile(lats, 0.999))
	}
	if calls > 0 {
		res.Extra = float64(b.Received()-received0)/float64(calls) - 1
		res.Duplicated = max(0, float64(started1-started0)/float64(calls)-1)
	}
	res.Dropped, res.Unclaimed = dropped1-dropped0, unclaimed1-unclaimed0
	res.Preempted = preemptedOf(b) - preempted0
	if use := CPUBetween(cpu0, cpu1); use.OK && calls > 0 {
		secs := cpu1.At.Sub(cpu0.At).Seconds()
		res.CPUPerCall = time.Duration(use.Self * secs / float64(calls) * float64(time.Second))
		res.OtherCPU = use.Others
	}
	if len(cl) > 0 {
		res.ClaimP50 = time.Duration(Quantile(cl, 0.5))
		res.ClaimP99 = time.Duration(Quantile(cl, 0.99))
		res.ClaimUnits = res.ClaimP50.Seconds() / mean
	}
	return res, nil
}

// preemptedOf sums the preemptions of b's spare.Limiters, if it has any.
func preemptedOf(b TiedBackend) int64 {
	lb, ok := b.(interface{ Limiters() []*spare.Limiter })
	if !ok {
		return 0
	}
	var n int64
	for _, l := range lb.Limiters() {
		n += l.Stats().Preempted
	}
	return n
}

// tiedTotals sums the servers' counters.
func tiedTotals(servers []*tied.Server) (started, dropped, unclaimed int64) {
	for _, s := range servers {
		st := s.Stats()
		started += st.Started
		dropped += st.Dropped
		unclaimed += st.ClaimsFailed + st.ClaimsSkipped
	}
	return
}

// runArrivals sends requests at Poisson times at rate for span, each on
// its own goroutine with a size drawn by sizeOf (fireAt), waits for them,
// and returns how many it sent. done, if not nil, gets each one's latency
// from its intended start, under a lock.
func runArrivals(ctx context.Context, rate float64, span time.Duration, rng *rand.Rand, sizeOf func() time.Duration, timeout time.Duration, call func(context.Context, int, time.Duration) error, done func(time.Duration, error)) int {
	var at, sizes []time.Duration
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if t >= span {
			break
		}
		at, sizes = append(at, t), append(sizes, sizeOf())
	}
	var each func(int, time.Duration, time.Duration, error)
	if done != nil {
		each = func(_ int, _, lat time.Duration, err error) { done(lat, err) }
	}
	return fire(ctx, at, timeout, func(ctx context.Context, i int) error { return call(ctx, i, sizes[i]) }, each)
}

// stallLoop stalls replica i of b at Poisson times so that it is stalled
// w.StallShare of the time, until ctx ends.
func stallLoop(ctx context.Context, b TiedBackend, i int, w TiedWorld, rng *rand.Rand) {
	gapMean := float64(w.StallLength) * (1 - w.StallShare) / w.StallShare
	for {
		t := time.NewTimer(time.Duration(rng.ExpFloat64() * gapMean))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := b.Stall(ctx, i, w.StallLength); err != nil {
			return
		}
	}
}

// WriteTiedTable writes results as a Markdown table.
func WriteTiedTable(w io.Writer, results []TiedResult) error {
	_, err := fmt.Fprintln(w, "| backend | world | load | config | runs | rate/s | calls | errors | p50 | p99 | p99.9 | extra on wire | duplicated | dropped | unclaimed | claim p50 | claim p99 | claim / mean service | preempted | CPU per call | other processes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		if err != nil {
			break
		}
		cu := "-"
		if r.ClaimP50 > 0 {
			cu = fmt.Sprintf("%.3f", r.ClaimUnits)
		}
		_, err = fmt.Fprintf(w, "| %s | %s | %.2f | %s | %d | %.0f | %d | %d | %s | %s | %s | %.1f%% | %.2f%% | %d | %d | %s | %s | %s | %d | %s | %.2f cores |\n",
			r.Backend, r.World, r.Load, r.Config, max(r.Runs, 1), r.Rate, r.Calls, r.Errors, roundDur(r.P50), roundDur(r.P99), roundDur(r.P999),
			100*r.Extra, 100*r.Duplicated, r.Dropped, r.Unclaimed, roundDur(r.ClaimP50), roundDur(r.ClaimP99), cu, r.Preempted, roundDur(r.CPUPerCall), r.OtherCPU)
	}
	return err
}

// roundDur shows d with three significant digits, "-" for zero.
func roundDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	p := math.Pow(10, math.Floor(math.Log10(float64(d)))-2)
	return time.Duration(math.Round(float64(d)/p) * p).String()
}
