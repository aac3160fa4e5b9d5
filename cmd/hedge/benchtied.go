package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/bench/grpcbench"
)

// runBenchTied is "hedge bench tied": tied requests against servers with
// a worker limit and a queue, compared with no hedging and the default
// hedge config (see bench.RunTied).
func runBenchTied(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench tied", "[--backend http,grpc] [--quick] [--repeats N] [flags]", stderr)
	o := bench.TiedOptions{Worlds: bench.DefaultTiedWorlds, Configs: bench.TiedConfigs}
	backends := fs.String("backend", "http,grpc", "backends, comma-separated: http, grpc")
	loads := fs.String("loads", "0.5,0.85", "offered loads, fractions of the servers' capacity, comma-separated")
	worlds := fs.String("worlds", "plain,stalls,bigjobs", "worlds, comma-separated: plain, stalls (2% stalled, 50 ms stalls), bigjobs (3% of requests 30x larger)")
	configs := fs.String("configs", strings.Join(bench.TiedConfigs, ","), "configurations: none, default, tied (the spare form: the second copy runs only on a free worker), "+bench.TiedSymmetricConfig+" (both copies queue; the first to start claims), and "+bench.SpareConfig+" (the default client against servers that run its copies only on capacity no primary wants: package spare)")
	fs.IntVar(&o.Replicas, "replicas", 3, "replicas")
	fs.IntVar(&o.Workers, "workers", 2, "requests each replica runs at once (the rest queue)")
	fs.IntVar(&o.MaxQueue, "queue", 4096, "queue bound of each replica")
	fs.DurationVar(&o.Service, "service", 5*time.Millisecond, "base request size: the time a request holds its worker")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "measured span of each run")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "warm-up of each run")
	fs.DurationVar(&o.Gap, "gap", 0, "gap between a tied request's copies (0: tied.DefaultGap)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of arrivals, sizes and stalls")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "timeout of each request")
	fs.IntVar(&o.Repeats, "repeats", 1, "runs of each world, load and configuration, with seeds seed, seed+1, ...; the table shows medians")
	fs.IntVar(&o.ClaimAhead, "claim-ahead", 0, "when a worker frees, the tied copies among the next N of the queue claim while they wait (http backend only; 0: tied.DefaultClaimAhead, -1: claim when given a worker)")
	fs.IntVar(&o.Clients, "clients", 1, "independent clients of each configuration sharing the replicas, each with a Hedger and connections of its own, the calls split evenly among them")
	quick := fs.Bool("quick", false, "short runs: 2 s measured after 0.5 s of warm-up")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *quick {
		if !flagSet(fs, "duration") {
			o.Duration = 2 * time.Second
		}
		if !flagSet(fs, "warmup") {
			o.Warmup = 500 * time.Millisecond
		}
	}
	if o.Repeats < 1 {
		return usageError(stderr, "bench tied", fmt.Errorf("--repeats: %d: run at least once", o.Repeats))
	}
	loadList, err := parseLoads(*loads)
	if err != nil {
		return usageError(stderr, "bench tied", err)
	}
	for _, v := range loadList {
		if v <= 0 || v >= 1 {
			return usageError(stderr, "bench tied", fmt.Errorf("--loads: %v is not a load between 0 and 1", v))
		}
	}
	o.Loads = loadList
	o.Worlds = nil
	for _, name := range strings.Split(*worlds, ",") {
		found := false
		for _, w := range bench.DefaultTiedWorlds {
			if w.Name == strings.TrimSpace(name) {
				o.Worlds, found = append(o.Worlds, w), true
			}
		}
		if !found {
			return usageError(stderr, "bench tied", fmt.Errorf("--worlds: unknown world %q: use plain, stalls or bigjobs", name))
		}
	}
	if o.Clients < 1 || o.Clients > bench.MaxClients {
		return usageError(stderr, "bench tied", fmt.Errorf("--clients %d: use 1 to %d", o.Clients, bench.MaxClients))
	}
	o.Configs = nil
	for _, c := range strings.Split(*configs, ",") {
		c = strings.TrimSpace(c)
		switch c {
		case "none", bench.DefaultStrategy, "tied", bench.TiedSymmetricConfig, bench.SpareConfig:
		default:
			return usageError(stderr, "bench tied", fmt.Errorf("--configs: unknown configuration %q: use none, %s, tied, %s or %s", c, bench.DefaultStrategy, bench.TiedSymmetricConfig, bench.SpareConfig))
		}
		o.Configs = append(o.Configs, c)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var all []bench.TiedResult
	for _, name := range strings.Split(*backends, ",") {
		var start func(bench.TiedBackendOptions) (bench.TiedBackend, error)
		switch strings.TrimSpace(name) {
		case "http":
			start = bench.StartTiedHTTP
		case "grpc":
			start = grpcbench.StartTied
		default:
			return usageError(stderr, "bench tied", fmt.Errorf("--backend: unknown backend %q: use http or grpc", name))
		}
		rs, err := bench.RunTied(ctx, o, start, stderr)
		all = append(all, rs...)
		if err != nil {
			fmt.Fprintln(stderr, "hedge bench tied:", err)
			return 1
		}
	}
	if err := bench.WriteTiedTable(stdout, all); err != nil {
		fmt.Fprintln(stderr, "hedge bench tied:", err)
		return 1
	}
	return 0
}
