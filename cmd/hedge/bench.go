package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/bench/grpcbench"
	"github.com/tailcut/hedge/internal/bench/pgbench"
	"github.com/tailcut/hedge/internal/bench/redisbench"
)

func init() { register(benchCommand) }

var benchCommand = &command{
	name:    "bench",
	summary: "measure hedging against real HTTP, Redis and gRPC replicas with injected stalls",
	run:     runBench,
}

// benchBackends are the backends --backend accepts, in the order "all"
// runs them.
var benchBackends = []string{"redis", "http", "grpc"}

// benchOnlyBackends are the backends --backend accepts by name only:
// "all" leaves them out. PostgreSQL takes several seconds to start a
// primary and its standbys, and is not installed wherever the others run.
var benchOnlyBackends = []string{"postgres"}

// benchFlags are the flags of "hedge bench".
type benchFlags struct {
	backend, configs, out, precise, redisServer string
	redisClient, pgStall                        string
	pgPool                                      int
	cpuprofile                                  string
	replicas, redisPool                         int
	quick, requestsOnly, h2c                    bool
	delay                                       time.Duration
	s                                           bench.Scenario
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "tied" {
		return runBenchTied(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "recovery" {
		return runBenchRecovery(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "fanout" {
		return runBenchFanOut(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "fleet" {
		return runBenchFleet(args[1:], stdout, stderr)
	}
	fs := newFlags("bench", "[--backend http|redis|grpc|postgres|all] [--quick] [flags]  (also: hedge bench tied, hedge bench recovery, hedge bench fanout, hedge bench fleet)", stderr)
	d := bench.Scenario{}.Defaults()
	f := benchFlags{s: d}
	f.s.StallShare = 0.02
	fs.StringVar(&f.backend, "backend", "all", "backends to run, comma-separated: http, redis, grpc, postgres, or all (http, redis and grpc; postgres only when named)")
	fs.IntVar(&f.replicas, "replicas", 3, "replicas of each backend")
	fs.IntVar(&f.s.Clients, "clients", 1, fmt.Sprintf("independent clients of each configuration sharing the replicas, each with a Hedger and connections of its own, the requests split evenly among them (1 to %d)", bench.MaxClients))
	fs.IntVar(&f.s.FanOut, "fanout", 1, fmt.Sprintf("leaves each request reads at once, waiting for all (hedge.WithFanOut); --rate then counts requests, and its default is the backend's divided by the fan-out (1 to %d)", bench.MaxFanOut))
	fs.BoolVar(&f.h2c, "h2c", false, "the HTTP backend serves and sends HTTP/2 without TLS instead of HTTP/1.1 (a cancelled copy resets a stream instead of closing a connection)")
	fs.Float64Var(&f.s.Rate, "rate", 0, "open-loop arrival rate, requests per second (0: 10000 for redis, 5000 for http and grpc, 2000 for postgres)")
	fs.DurationVar(&f.s.Duration, "duration", d.Duration, "measured span of each run")
	fs.IntVar(&f.s.Requests, "requests", 0, "cap on measured requests per run (0: rate x duration)")
	fs.DurationVar(&f.s.Warmup, "warmup", d.Warmup, "warm-up before each measured span: same load, no stalls, not recorded")
	fs.DurationVar(&f.s.StallLength, "stall-length", d.StallLength, "length of each stall")
	fs.Float64Var(&f.s.StallShare, "stall-share", 0.02, "fraction of time each replica is stalled (0: no stalls)")
	fs.BoolVar(&f.s.StallTogether, "stall-together", false, "every replica stalls at the same times (a global slowdown pushed to a stop), instead of each on its own schedule")
	fs.IntVar(&f.s.Repeats, "repeats", d.Repeats, "repeats of each configuration (the report gives the median and range)")
	fs.StringVar(&f.configs, "configs", strings.Join(bench.DefaultStrategies, ","), "configurations to compare, comma-separated: "+strings.Join(bench.StrategyNames(), ", ")+
		" ("+bench.DefaultStrategy+" is the library's default, the zero hedge.Config"+aliasHelp()+")")
	fs.DurationVar(&f.delay, "delay", time.Millisecond, "hedge delay of the fixed-delay configurations")
	fs.StringVar(&f.out, "out", "./bench-out", "output directory for report.md, results.json and the CCDF plots")
	fs.Uint64Var(&f.s.Seed, "seed", d.Seed, "master seed of arrivals and stall schedules")
	fs.BoolVar(&f.quick, "quick", false, "short runs (1.5 s measured after 0.3 s of warm-up, one rerun per backend): all backends in under 2 minutes")
	fs.DurationVar(&f.s.Timeout, "timeout", d.Timeout, "timeout of each request")
	fs.Float64Var(&f.s.MaxOtherCPU, "max-other-cpu", d.MaxOtherCPU, "a run is noisy when other processes use more CPU than this, in cores")
	fs.DurationVar(&f.s.MaxLag, "max-lag", d.MaxLag, "a run is noisy when the dispatch lag p99 exceeds this")
	fs.IntVar(&f.s.MaxReruns, "reruns", d.MaxReruns, "reruns of a noisy run (-1: none)")
	fs.IntVar(&f.s.MaxTotalReruns, "max-total-reruns", 0, "reruns over a backend's whole comparison (0: a third of its runs; -1: none)")
	fs.StringVar(&f.precise, "precise-timers", "off", "hedge.Config.PreciseTimers: on, off, or auto (on for redis, whose delays are sub-millisecond); off, the library default, measured better on 2 cores (BENCHMARKS.md)")
	fs.IntVar(&f.redisPool, "redis-pool", 0, "go-redis pool size per replica (0: go-redis's default, 10 x GOMAXPROCS); go-redis only")
	fs.StringVar(&f.redisClient, "redis-client", redisbench.ClientGoRedis, "Redis client the reads go through: go-redis (hedgeredis: each copy, the primary included, on a goroutine of its own, as go-redis cannot stop a command once sent) or rueidis (hedgerueidis: the primary on the caller's goroutine, pipelined connections, a cancelled copy returns at once)")
	fs.StringVar(&f.redisServer, "redis-server", redistestBinary, "redis-server executable")
	fs.StringVar(&f.pgStall, "pg-stall", pgbench.StallOne, "PostgreSQL servers that stall: one (the last standby; the others never do) or all (each on its own schedule, as the other backends)")
	fs.IntVar(&f.pgPool, "pg-pool", 0, fmt.Sprintf("PostgreSQL connections per server of each client, all opened before the run (0: %d)", pgbench.DefaultPoolSize))
	fs.DurationVar(&f.s.SpinWindow, "spin-window", bench.DefaultSpinWindow, "the pacer sleeps until this long before each intended start, then spins (1ns: never spins)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole invocation to this file")
	latencies := fs.Bool("latencies", false, "also write each configuration's measured latencies, one duration per line, to latencies-<backend>-<config>.txt in --out (for hedge advise --in), and each request's latency and send time, as JSON lines, to requests-<backend>-<config>.jsonl (for hedge advise --in ... --time-field sent)")
	metricsAddr := benchMetricsFlag(fs)
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if f.quick {
		quick := map[string]func(){
			"duration":         func() { f.s.Duration = 1500 * time.Millisecond },
			"warmup":           func() { f.s.Warmup = 300 * time.Millisecond },
			"reruns":           func() { f.s.MaxReruns = 1 },
			"max-total-reruns": func() { f.s.MaxTotalReruns = 1 },
		}
		for name, set := range quick {
			if !flagSet(fs, name) {
				set()
			}
		}
		f.s.Settle = 150 * time.Millisecond
	}
	f.requestsOnly = flagSet(fs, "requests") && !flagSet(fs, "duration") && f.s.Requests > 0
	backends, contenders, err := f.validate(stderr)
	if err != nil {
		return usageError(stderr, "bench", err)
	}
	if err := bench.CheckOutDir(f.out); err != nil {
		return usageError(stderr, "bench", err)
	}

	if f.cpuprofile != "" {
		pf, err := os.Create(f.cpuprofile)
		if err != nil {
			return usageError(stderr, "bench", fmt.Errorf("--cpuprofile: %v", err))
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return usageError(stderr, "bench", fmt.Errorf("--cpuprofile: %v", err))
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, a second one kills at once (the
	// redis-servers die with us: they are started with Pdeathsig).
	context.AfterFunc(ctx, stop)
	bm, merr := startBenchMetrics(*metricsAddr, stderr)
	if merr != nil {
		return usageError(stderr, "bench", merr)
	}
	defer func() {
		if err := bm.close(); err != nil {
			fmt.Fprintf(stderr, "hedge bench: %v\n", err)
		}
	}()
	rep := bench.NewReport("hedge bench " + strings.Join(args, " "))
	fmt.Fprintf(stderr, "hedge bench: backends %s, configurations %s; %d repeats of %v; load average %.2f; writing to %s\n",
		strings.Join(backends, ", "), strings.Join(contenderNames(contenders("")), ", "), f.s.Repeats, f.s.Duration, rep.Load1Start, f.out)
	failed := false
	for _, name := range backends {
		if ctx.Err() != nil {
			break
		}
		res, err := benchOne(ctx, name, &f, bm.contenders(name, contenders(name)), stderr)
		if res != nil {
			rep.Backends = append(rep.Backends, res)
		}
		if res != nil && *latencies {
			if _, lerr := res.WriteLatencies(f.out); lerr != nil && err == nil {
				err = lerr
			}
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			failed = true
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", name, err))
			fmt.Fprintf(stderr, "hedge bench: %s: %v\n", name, err)
		}
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.Load1End = bench.LoadAverage()
	files, werr := bench.WriteReport(f.out, rep)
	if werr != nil {
		fmt.Fprintf(stderr, "hedge bench: writing the report: %v\n", werr)
		return exitFailure
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "hedge bench: interrupted after %s; partial results in %s\n", rep.Elapsed.Round(time.Second), f.out)
		return exitInterrupted
	}
	fmt.Fprintf(stdout, "hedge bench: %s; wrote %s\n", rep.Elapsed.Round(time.Second), strings.Join(files, ", "))
	if failed {
		return exitFailure
	}
	return exitOK
}

// redistestBinary is the default redis-server.
const redistestBinary = "/usr/bin/redis-server"

// aliasHelp describes the former configuration names still accepted, for
// the usage text.
func aliasHelp() string {
	aliases := bench.StrategyAliases()
	var out []string
	for _, old := range slices.Sorted(maps.Keys(aliases)) {
		out = append(out, fmt.Sprintf("; %s, its former name, is accepted as an alias of %s for now", old, aliases[old]))
	}
	return strings.Join(out, "")
}

// validate checks the flags before any work and returns the backends to
// run and a function giving the contenders of each. A former configuration
// name gets a one-line note on stderr, once.
func (f *benchFlags) validate(stderr io.Writer) ([]string, func(backend string) []bench.Contender, error) {
	var errs []error
	var backends []string
	for _, b := range strings.Split(f.backend, ",") {
		b = strings.TrimSpace(b)
		switch {
		case b == "all":
			backends = append(backends, benchBackends...)
		case contains(benchBackends, b), contains(benchOnlyBackends, b):
			backends = append(backends, b)
		default:
			errs = append(errs, fmt.Errorf("--backend %q: use http, redis, grpc or all, or postgres (which all leaves out)", b))
		}
	}
	if f.s.Clients < 0 {
		errs = append(errs, fmt.Errorf("--clients %d: use 1 to %d", f.s.Clients, bench.MaxClients))
	}
	if f.s.FanOut < 0 {
		errs = append(errs, fmt.Errorf("--fanout %d: use 1 to %d", f.s.FanOut, bench.MaxFanOut))
	}
	if f.replicas < 2 || f.replicas > 64 {
		errs = append(errs, fmt.Errorf("--replicas %d: use 2 to 64 (hedges need another replica to go to)", f.replicas))
	}
	switch f.precise {
	case "on", "off", "auto":
	default:
		errs = append(errs, fmt.Errorf("--precise-timers %q: use on, off or auto", f.precise))
	}
	if f.redisPool < 0 {
		errs = append(errs, fmt.Errorf("--redis-pool %d: use 0 for go-redis's default, or a positive size", f.redisPool))
	}
	if f.redisClient == "" {
		f.redisClient = redisbench.ClientGoRedis // as redisbench.Options
	}
	switch {
	case !contains(redisbench.Clients(), f.redisClient):
		errs = append(errs, fmt.Errorf("--redis-client %q: use %s", f.redisClient, strings.Join(redisbench.Clients(), " or ")))
	case f.redisClient == redisbench.ClientRueidis && f.redisPool != 0:
		errs = append(errs, fmt.Errorf("--redis-pool %d applies to go-redis only: rueidis pipelines reads over shared connections and has no pool of that kind; leave it out with --redis-client rueidis", f.redisPool))
	}
	if f.pgStall == "" {
		f.pgStall = pgbench.StallOne // as pgbench.Options
	}
	if !contains(pgbench.Stalls(), f.pgStall) {
		errs = append(errs, fmt.Errorf("--pg-stall %q: use %s", f.pgStall, strings.Join(pgbench.Stalls(), " or ")))
	}
	if f.pgPool < 0 || f.pgPool > 64 {
		errs = append(errs, fmt.Errorf("--pg-pool %d: use 1 to 64 connections per server, or 0 for %d", f.pgPool, pgbench.DefaultPoolSize))
	}
	var strategies []bench.Strategy
	seen := map[string]bool{}
	aliases := bench.StrategyAliases()
	for _, n := range strings.Split(f.configs, ",") {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		if current, ok := aliases[n]; ok {
			fmt.Fprintf(stderr, "hedge bench: --configs %s is now named %s; running it as %s\n", n, current, current)
		}
		s, err := bench.LookupStrategy(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("--configs: %w", err))
			continue
		}
		if seen[s.Name] && s.Name != n {
			continue // named twice, once by a former name
		}
		seen[s.Name] = true
		strategies = append(strategies, s)
		if _, err := s.Config(bench.StrategyOptions{FixedDelay: f.delay}); err != nil {
			errs = append(errs, fmt.Errorf("--configs %s: %w", n, err))
		}
	}
	if len(strategies) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("--configs: name at least one configuration"))
	}
	for _, b := range backends {
		if err := f.scenario(b).Validate(); err != nil {
			errs = append(errs, err)
			break
		}
	}
	contenders := func(backend string) []bench.Contender {
		precise := f.precise == "on" || (f.precise == "auto" && backend == "redis")
		var out []bench.Contender
		for _, s := range strategies {
			out = append(out, bench.StrategyContender(s, bench.StrategyOptions{FixedDelay: f.delay}, precise))
		}
		return out
	}
	return backends, contenders, errors.Join(errs...)
}

// defaultRates are the rates used without --rate: the highest at which a
// 2-vCPU machine running the load generator, the client and the servers
// kept the dispatch lag p99 near 1 ms with 2% stalls (HTTP at 10,000/s
// needed all of both CPUs and fell behind; see BENCHMARKS.md).
// PostgreSQL's point reads cost the most CPU per request (a backend
// process per connection, the extended protocol): 2,000/s leaves room on
// two cores (see pgbench's package doc).
var defaultRates = map[string]float64{"redis": 10000, "http": 5000, "grpc": 5000, "postgres": 2000}

// scenario returns the scenario of one backend: its default rate unless
// --rate was given, and with --requests alone the span those requests
// need at that rate.
func (f *benchFlags) scenario(backend string) bench.Scenario {
	s := f.s
	if s.Rate == 0 {
		// The default loads the replicas alike whatever the fan-out.
		s.Rate = defaultRates[backend] / float64(max(1, s.FanOut))
	}
	if f.requestsOnly && s.Rate > 0 {
		s.Duration = time.Duration(float64(s.Requests) / s.Rate * float64(time.Second) * 1.2)
	}
	return s
}

// benchOne starts one backend, runs the comparison on it and stops it.
func benchOne(ctx context.Context, name string, f *benchFlags, contenders []bench.Contender, stderr io.Writer) (*bench.BackendResult, error) {
	fmt.Fprintf(stderr, "hedge bench: starting %d %s replicas\n", f.replicas, name)
	var b bench.Backend
	var notes []string
	var err error
	switch name {
	case "http":
		b, err = bench.StartHTTP(bench.HTTPOptions{Replicas: f.replicas, H2C: f.h2c})
		if f.h2c {
			notes = append(notes, "In-process net/http servers, one per 127.0.0.1 port, serving HTTP/2 without TLS (h2c); client: hedgehttp.Transport over one http.Transport speaking h2c; dials counted by its DialContext; a cancelled loser is a stream reset, and its connection stays.")
		} else {
			notes = append(notes, "In-process net/http servers, one per 127.0.0.1 port; client: hedgehttp.Transport over one http.Transport (HTTP/1.1 keep-alive); dials counted by its DialContext; a cancelled loser's connection is closed, so losers cost dials.")
		}
	case "redis":
		b, err = redisbench.Start(redisbench.Options{Replicas: f.replicas, PoolSize: f.redisPool, Binary: f.redisServer, Client: f.redisClient})
		if f.redisClient == redisbench.ClientRueidis {
			notes = append(notes, "redis-server child processes (no persistence), stalled with DEBUG SLEEP; client (--redis-client rueidis): hedgerueidis.Client over one rueidis client per replica (pipelined connections, client-side caching and retries off); the primary copy runs on the caller's goroutine, and a cancelled loser returns at once, rueidis reading and dropping its late reply; no pool to wait for (pool waits are 0); dials are the connections rueidis opened.")
			break
		}
		pool := fmt.Sprintf("%d", f.redisPool)
		if f.redisPool == 0 {
			pool = fmt.Sprintf("go-redis's default, %d", 10*runtime.GOMAXPROCS(0))
		}
		notes = append(notes, "redis-server child processes (no persistence), stalled with DEBUG SLEEP; client (--redis-client go-redis): hedgeredis.Client over one go-redis client per replica (pool size "+pool+", retries off); losers are reaped in the background (go-redis cannot interrupt a read), and hold their connection until the stall ends; dials are pool misses.")
	case "grpc":
		b, err = grpcbench.Start(grpcbench.Options{Replicas: f.replicas})
		notes = append(notes, "In-process grpc-go servers (grpc.testing.TestService), one per 127.0.0.1 port; client: hedgegrpc.Interceptor with one ClientConn per replica (WithReplicas); no pool to wait for (HTTP/2 multiplexing).")
	case "postgres":
		var pb *pgbench.Backend
		pb, err = pgbench.Start(pgbench.Options{Replicas: f.replicas, PoolSize: f.pgPool, Stall: f.pgStall})
		if err != nil {
			break
		}
		b = pb
		stalled := "only the last standby stalls (--pg-stall one): the schedules of the other servers are refused, and counted as stall errors in results.json, not as stalls"
		if f.pgStall == pgbench.StallAll {
			stalled = "every server stalls on its own schedule (--pg-stall all), the primary included"
		}
		notes = append(notes, fmt.Sprintf("PostgreSQL child processes (internal/pgtest: a primary and %d hot standbys streaming from it, fsync off), stalled with SIGSTOP/SIGCONT of the postmaster and its client backends; %s. "+
			"Client: hedgepgx.Client over one pgxpool per server (%d connections each, opened before each run; losers cancelled with a cancel request, connections kept), every server serving reads of %q on a table of %d rows; "+
			"the servers' processes count as this bench's CPU (child), not as other processes'; dials are connections made.", f.replicas-1, stalled, pb.PoolSize(), pgbench.Query, bench.Keys))
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := b.Close(); cerr != nil {
			fmt.Fprintf(stderr, "hedge bench: stopping %s: %v\n", name, cerr)
		}
	}()
	precise := f.precise == "on" || (f.precise == "auto" && name == "redis")
	if precise {
		notes = append(notes, "hedge.Config.PreciseTimers is on: hedge timers spin for their last 1.5 ms instead of sleeping on the runtime timer (about 1 ms late here), for sub-millisecond delays; it costs CPU.")
	} else {
		notes = append(notes, "hedge.Config.PreciseTimers is off: hedge timers use the runtime timer, which fires up to about 1 ms late.")
	}
	notes = append(notes, fmt.Sprintf("The load generator, the client and (except for Redis and PostgreSQL) the servers share one process with GOMAXPROCS %d on %d CPUs.", runtime.GOMAXPROCS(0), runtime.NumCPU()))
	res, err := bench.Run(ctx, b, f.scenario(name), contenders, stderr)
	if res != nil {
		res.Notes = append(notes, res.Notes...)
	}
	return res, err
}

func contenderNames(cs []bench.Contender) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
