package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/bench/shardbench"
)

// The servers of "hedge bench fanout --shards" run in a child process,
// this executable started again with shardbench.ServerEnv set.
func init() { shardbench.MaybeServe() }

// Defaults of "hedge bench fanout --shards".
const (
	benchShardsConfigs  = "none-two-choice,default"
	benchShardsBackends = "http,grpc"
	benchShardsOut      = "./bench-shards-out"
)

// shardFlags are the flags of "hedge bench fanout --shards".
type shardFlags struct {
	shards, replicas, width int
	backends, configs, out  string
	quick                   bool
	delay                   time.Duration
	s                       bench.Scenario
}

// hasShardsFlag reports whether args ask for the sharded fan-out.
func hasShardsFlag(args []string) bool {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "shards" {
			return true
		}
	}
	return false
}

// runBenchShards is "hedge bench fanout --shards N --replicas R": N x R
// real servers on loopback in a child process, server 0 stalling, every
// request one hedge.DoFan of --width leaves, leaf i to shard i mod N;
// the configurations compared in paired, interleaved repeats, over HTTP
// and gRPC.
func runBenchShards(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench fanout", "--shards N [--replicas R] [--width W] [--backend http,grpc] [--quick] [flags]", stderr)
	d := bench.Scenario{}.Defaults()
	f := shardFlags{s: d}
	fs.IntVar(&f.shards, "shards", 30, fmt.Sprintf("shards; the servers are shards x replicas, at most %d", shardbench.MaxServers))
	fs.IntVar(&f.replicas, "replicas", 2, "servers of each shard (server s*R+r holds replica r of shard s, hedge.ShardGrid)")
	fs.IntVar(&f.width, "width", 0, fmt.Sprintf("leaves of each request, leaf i to shard i mod N, all needed (0: one per shard; at most %d)", bench.MaxFanOut))
	fs.StringVar(&f.backends, "backend", benchShardsBackends, "backends, comma-separated: http (HTTP/1.1), grpc")
	fs.StringVar(&f.configs, "configs", benchShardsConfigs, "configurations, comma-separated, the first the baseline of the ratios: "+strings.Join(bench.StrategyNames(), ", "))
	fs.DurationVar(&f.delay, "delay", 2*time.Millisecond, "the delay of the fixed-delay configurations (hedge-fixed...)")
	fs.StringVar(&f.out, "out", benchShardsOut, "directory for report.md, results.json, the CCDF plots and summary.md")
	fs.Float64Var(&f.s.Rate, "rate", 100, "open-loop arrival rate, requests per second (each of --width leaves)")
	fs.DurationVar(&f.s.Duration, "duration", d.Duration, "measured span of each run")
	fs.DurationVar(&f.s.Warmup, "warmup", d.Warmup, "warm-up before each measured span: same load, no stalls, not recorded")
	fs.DurationVar(&f.s.StallLength, "stall-length", d.StallLength, "length of each stall of server 0")
	fs.Float64Var(&f.s.StallShare, "stall-share", 0.02, "fraction of time server 0 is stalled (the others never are)")
	fs.IntVar(&f.s.Repeats, "repeats", 5, "paired repeats: each runs every configuration on the same arrivals and stalls, in an order that rotates")
	fs.Uint64Var(&f.s.Seed, "seed", d.Seed, "seed of arrivals and stalls")
	fs.DurationVar(&f.s.Timeout, "timeout", d.Timeout, "timeout of each request")
	fs.Float64Var(&f.s.MaxOtherCPU, "max-other-cpu", d.MaxOtherCPU, "cores other processes may use during a run before it is flagged noisy and run again")
	fs.DurationVar(&f.s.MaxLag, "max-lag", d.MaxLag, "dispatch lag p99 above which a run is flagged noisy and run again")
	fs.IntVar(&f.s.MaxReruns, "reruns", d.MaxReruns, "reruns of a noisy run (-1: none)")
	fs.BoolVar(&f.quick, "quick", false, "a short run: 3 repeats of 2 s after 0.5 s of warm-up, no reruns (flags given keep their values)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if f.quick {
		quick := map[string]func(){
			"duration": func() { f.s.Duration = 2 * time.Second },
			"warmup":   func() { f.s.Warmup = 500 * time.Millisecond },
			"repeats":  func() { f.s.Repeats = 3 },
			"reruns":   func() { f.s.MaxReruns = -1 },
		}
		for name, set := range quick {
			if !flagSet(fs, name) {
				set()
			}
		}
		f.s.Settle = 150 * time.Millisecond
	}
	backends, contenders, err := f.validate()
	if err != nil {
		return usageError(stderr, "bench fanout", err)
	}
	if err := bench.CheckOutDir(f.out); err != nil {
		return usageError(stderr, "bench fanout", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	command := "hedge bench fanout " + strings.Join(args, " ")
	rep := bench.NewReport(command)
	fmt.Fprintf(stderr, "hedge bench fanout: %d shards x %d replicas = %d servers, %d leaves per request at %v requests/s; backends %s; configurations %s; %d repeats of %v; load average %.2f; writing to %s\n",
		f.shards, f.replicas, f.shards*f.replicas, f.width, f.s.Rate, strings.Join(backends, ", "), strings.Join(contenderNames(contenders), ", "), f.s.Repeats, f.s.Duration, rep.Load1Start, f.out)
	failed := false
	for _, name := range backends {
		if ctx.Err() != nil {
			break
		}
		res, err := f.runOne(ctx, name, contenders, stderr)
		if res != nil {
			rep.Backends = append(rep.Backends, res)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			failed = true
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", name, err))
			fmt.Fprintf(stderr, "hedge bench fanout: %s: %v\n", name, err)
		}
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.Load1End = bench.LoadAverage()
	files, werr := bench.WriteReport(f.out, rep)
	sum := shardSummary(command, f, rep)
	sumPath := filepath.Join(f.out, "summary.md")
	if err := os.WriteFile(sumPath, []byte(sum), 0o644); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		fmt.Fprintf(stderr, "hedge bench fanout: writing the report: %v\n", werr)
		return exitFailure
	}
	fmt.Fprint(stdout, "\n"+sum)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "hedge bench fanout: interrupted after %s; partial results in %s\n", rep.Elapsed.Round(time.Second), f.out)
		return exitInterrupted
	}
	fmt.Fprintf(stdout, "hedge bench fanout: %s; wrote %s\n", rep.Elapsed.Round(time.Second), strings.Join(append(files, sumPath), ", "))
	if failed {
		return exitFailure
	}
	return exitOK
}

// validate checks every flag before any work, and returns the backends
// and the contenders.
func (f *shardFlags) validate() ([]string, []bench.Contender, error) {
	var errs []error
	if f.shards < 1 || f.shards > bench.MaxFanOut {
		errs = append(errs, fmt.Errorf("--shards %d: use 1 to %d", f.shards, bench.MaxFanOut))
	}
	if f.replicas < 1 || f.replicas > 8 {
		errs = append(errs, fmt.Errorf("--replicas %d: use 1 to 8 servers per shard (2 or more for a hedge to go to another server)", f.replicas))
	}
	if n := f.shards * f.replicas; len(errs) == 0 && n > shardbench.MaxServers {
		errs = append(errs, fmt.Errorf("--shards %d x --replicas %d = %d servers: at most %d; use fewer shards or replicas", f.shards, f.replicas, n, shardbench.MaxServers))
	}
	if f.width == 0 {
		f.width = f.shards
	}
	if f.width < 1 || f.width > bench.MaxFanOut {
		errs = append(errs, fmt.Errorf("--width %d: use 1 to %d leaves per request, or 0 for one per shard", f.width, bench.MaxFanOut))
	}
	var backends []string
	for _, b := range strings.Split(f.backends, ",") {
		b = strings.TrimSpace(b)
		switch {
		case b != shardbench.KindHTTP && b != shardbench.KindGRPC:
			errs = append(errs, fmt.Errorf("--backend %q: use http, grpc, or both, comma-separated", b))
		case !slices.Contains(backends, b):
			backends = append(backends, b)
		}
	}
	var contenders []bench.Contender
	for _, n := range strings.Split(f.configs, ",") {
		n = strings.TrimSpace(n)
		if n == "" || slices.ContainsFunc(contenders, func(c bench.Contender) bool { return c.Name == n }) {
			continue
		}
		s, err := bench.LookupStrategy(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("--configs: %w", err))
			continue
		}
		o := bench.StrategyOptions{FixedDelay: f.delay}
		if _, err := s.Config(o); err != nil {
			errs = append(errs, fmt.Errorf("--configs %s: %w", n, err))
			continue
		}
		contenders = append(contenders, bench.ShardedContender(s, o, f.shards, f.replicas))
	}
	if len(contenders) < 2 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("--configs %q: name at least two configurations, the baseline first", f.configs))
	}
	if len(contenders) > 0 {
		f.s.Baseline = contenders[0].Name
	}
	f.s.FanOut = f.width
	f.s.StallOne = true
	if err := f.s.Validate(); err != nil {
		errs = append(errs, err)
	}
	return backends, contenders, errors.Join(errs...)
}

// runOne starts the servers of one backend, runs the comparison on them
// and stops them.
func (f *shardFlags) runOne(ctx context.Context, kind string, contenders []bench.Contender, stderr io.Writer) (*bench.BackendResult, error) {
	fmt.Fprintf(stderr, "hedge bench fanout: starting %d %s servers (%d shards x %d replicas) in a child process\n", f.shards*f.replicas, kind, f.shards, f.replicas)
	b, err := shardbench.Start(shardbench.Options{Kind: kind, Shards: f.shards, Replicas: f.replicas})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := b.Close(); cerr != nil {
			fmt.Fprintf(stderr, "hedge bench fanout: stopping the %s servers: %v\n", kind, cerr)
		}
	}()
	res, err := bench.Run(ctx, b, f.s, contenders, stderr)
	if res != nil {
		transport := "net/http servers (HTTP/1.1; a cancelled loser's connection is closed, so losers cost dials), read over one http.Transport"
		if kind == shardbench.KindGRPC {
			transport = "grpc-go servers (grpc.testing.TestService), read over one ClientConn per server"
		}
		res.Notes = append([]string{
			fmt.Sprintf("%d shards x %d replicas: %d %s, in one child process on 127.0.0.1; server 0 (replica 0 of shard 0) alone stalls, the others never do.", f.shards, f.replicas, f.shards*f.replicas, transport),
			fmt.Sprintf("Each request is one hedge.DoFan of %d leaves, leaf i to shard i mod %d, all needed; latency is the request's, the hedging counters count leaves.", f.width, f.shards),
			fmt.Sprintf("The load generator and the client share this process (GOMAXPROCS %d on %d CPUs); its CPU per request is the client's cost plus the generator's, the same for every configuration. The servers' CPU is the child's.", runtime.GOMAXPROCS(0), runtime.NumCPU()),
		}, res.Notes...)
	}
	return res, err
}

// shardSummary renders the comparison: per backend and configuration,
// request latency (medians over the repeats), the ratios to the baseline
// paired by repeat with their 95% confidence intervals, the extra leaves,
// and the client's CPU per request.
func shardSummary(command string, f shardFlags, rep *bench.Report) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Sharded fan-out on real servers\n\n`%s`\n\n", command)
	fmt.Fprintf(&b, "%d shards x %d replicas, server 0 stalled %.1f%% of the time in stalls of %v, the others never; %d leaves per request (leaf i to shard i mod %d), all needed, %v requests/s; %d paired repeats of %v.\n\n",
		f.shards, f.replicas, 100*f.s.StallShare, f.s.StallLength, f.width, f.shards, f.s.Rate, f.s.Repeats, f.s.Duration)
	b.WriteString("Request latency in ms, median over the repeats. Ratios: to the baseline in the same repeat, geometric mean over the repeats with its 95% confidence interval. Extra: copies beyond one per leaf, per leaf. Win: hedges that won. CPU: this process's CPU time per request (client and load generator; the servers run in a child process), median over the repeats. Noisy: kept runs that stayed noisy (other processes' CPU or dispatch lag over the limits).\n\n")
	b.WriteString("| backend | config | p50 | p99 | p99.9 | p99 ratio | p99.9 ratio | extra | win | CPU µs/request | noisy |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ms := func(s bench.Spread) string {
		if !s.OK {
			return "–"
		}
		return fmt.Sprintf("%.2f", s.Median/1000)
	}
	pct := func(s bench.Spread) string {
		if !s.OK {
			return "–"
		}
		return fmt.Sprintf("%.2f%%", s.Median)
	}
	for _, be := range rep.Backends {
		for _, c := range be.Configs {
			name, r99, r999 := c.Config, c.P99RatioCI.String(), c.P999RatioCI.String()
			if name == be.Baseline {
				name += " (baseline)"
				r99, r999 = "1", "1"
			}
			cpu := "–"
			if c.SelfCPUPerRequestUs.OK {
				cpu = fmt.Sprintf("%.0f", c.SelfCPUPerRequestUs.Median)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d of %d |\n", be.Backend, name,
				ms(c.P50Us), ms(c.P99Us), ms(c.P999Us), r99, r999, pct(c.ExtraPct), pct(c.WinRate), cpu, c.NoisyRuns, c.Runs)
		}
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintf(&b, "\nErrors: %s\n", strings.Join(rep.Errors, "; "))
	}
	return b.String()
}
