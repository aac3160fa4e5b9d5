// Command peerbench runs the workload of "hedge bench --backend http"
// through our hedgehttp.Transport and through the two peer libraries,
// cristalhq/hedgedhttp v0.9.2 and failsafe-go v0.9.8's hedgepolicy, at the
// same fixed hedge delay, on the same HTTP replicas, arrivals and stall
// schedules (package github.com/tailcut/hedge/internal/bench drives all of them
// through its Client interface), and writes the same report.
//
//	cd bench/peers
//	go run ./peerbench --delay 2ms --rate 5000 --duration 10s --repeats 3 --out /tmp/peerbench
//
// The configurations:
//
//   - none-random: ours, no hedging, a random replica (the baseline);
//   - hedge-fixed-nobudget: ours, fixed delay, no budget, at most 2 copies,
//     the two-choice picker that never sends the hedge to the primary's
//     replica;
//   - default: ours, the library's zero hedge.Config, for reference;
//   - hedgedhttp: hedgedhttp.NewRoundTripperAndStats(delay, 2, rr);
//   - failsafe-go: hedgepolicy.NewBuilderWithDelay(delay), one hedge at
//     most (WithMaxHedges(1), its default), each attempt a GET through rr.
//
// Neither peer chooses replicas: both hedge a request to "the same URL". So
// both send every copy through rr, a round-robin balancer over the replicas
// (bench.RoundRobin): consecutive copies usually, not always, reach
// different replicas, as behind any client-side balancer. Neither peer has
// a budget by default, so ours runs without one too in the like-for-like
// configuration. All clients use the same http.Transport settings, with
// dials counted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	"github.com/tailcut/hedge/internal/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	s := bench.Scenario{}.Defaults()
	s.Rate = 5000
	s.StallShare = 0.02
	delay := flag.Duration("delay", 2*time.Millisecond, "hedge delay of every fixed-delay configuration, ours and the peers'")
	replicas := flag.Int("replicas", 3, "HTTP replicas")
	out := flag.String("out", "./peerbench-out", "output directory")
	quick := flag.Bool("quick", false, "2 s measured, 0.5 s warm-up")
	configs := flag.String("configs", "none-random,hedge-fixed-nobudget,default,hedgedhttp,failsafe-go", "configurations, comma-separated")
	flag.Float64Var(&s.Rate, "rate", s.Rate, "open-loop arrival rate, requests per second")
	flag.DurationVar(&s.Duration, "duration", s.Duration, "measured span of each run")
	flag.DurationVar(&s.Warmup, "warmup", s.Warmup, "warm-up before each measured span")
	flag.IntVar(&s.Requests, "requests", 0, "cap on measured requests per run (0: rate x duration)")
	flag.DurationVar(&s.StallLength, "stall-length", s.StallLength, "length of each stall")
	flag.Float64Var(&s.StallShare, "stall-share", s.StallShare, "fraction of time each replica is stalled")
	flag.IntVar(&s.Repeats, "repeats", s.Repeats, "repeats of each configuration")
	flag.Uint64Var(&s.Seed, "seed", s.Seed, "master seed")
	flag.Float64Var(&s.MaxOtherCPU, "max-other-cpu", s.MaxOtherCPU, "noisy above this CPU of other processes, in cores")
	flag.DurationVar(&s.MaxLag, "max-lag", s.MaxLag, "noisy above this dispatch lag p99")
	flag.IntVar(&s.MaxReruns, "reruns", s.MaxReruns, "reruns of a noisy run (-1: none)")
	flag.Parse()
	if *quick {
		s.Duration, s.Warmup = 2*time.Second, 500*time.Millisecond
	}
	if err := s.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		return 2
	}
	if err := bench.CheckOutDir(*out); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		return 2
	}
	var contenders []bench.Contender
	for _, name := range strings.Split(*configs, ",") {
		c, err := contender(strings.TrimSpace(name), *delay)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peerbench:", err)
			return 2
		}
		contenders = append(contenders, c)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := bench.StartHTTP(bench.HTTPOptions{Replicas: *replicas})
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		return 1
	}
	defer b.Close()
	rep := bench.NewReport("cd bench/peers && go run ./peerbench " + strings.Join(os.Args[1:], " "))
	res, err := bench.Run(ctx, b, s, contenders, os.Stderr)
	if res != nil {
		res.Notes = append(res.Notes,
			fmt.Sprintf("Peer comparison at an equal fixed hedge delay of %v: hedgedhttp v0.9.2 and failsafe-go v0.9.8 send every copy through a round-robin balancer over the replicas (neither chooses replicas itself); ours picks by two choices and never reuses the primary's replica.", *delay),
			"Extra requests of the peers come from their own counters (hedgedhttp Stats, failsafe-go OnHedge); wasted work is known for ours only. 'extra at servers' counts what the replicas received, the same way for all.")
		rep.Backends = append(rep.Backends, res)
	}
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		fmt.Fprintln(os.Stderr, "peerbench:", err)
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.Load1End = bench.LoadAverage()
	files, werr := bench.WriteReport(*out, rep)
	if werr != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", werr)
		return 1
	}
	fmt.Printf("peerbench: wrote %s\n", strings.Join(files, ", "))
	if err != nil {
		return 1
	}
	return 0
}

// contender returns the configuration of that name.
func contender(name string, delay time.Duration) (bench.Contender, error) {
	switch name {
	case "hedgedhttp":
		return bench.Contender{
			Name: name,
			Doc:  fmt.Sprintf("cristalhq/hedgedhttp v0.9.2: NewRoundTripperAndStats(%v, 2, round-robin balancer over the replicas); no budget.", delay),
			New: func(b bench.Backend) (bench.Client, error) {
				hb := b.(*bench.HTTPBackend)
				base, dials := bench.NewCountingTransport()
				rt, st, err := hedgedhttp.NewRoundTripperAndStats(delay, 2, bench.NewRoundRobin(base, hb))
				if err != nil {
					return nil, err
				}
				urls := bench.ItemURLs(hb.URLs()[0])
				return bench.ClientFuncs{
					DoFunc: func(ctx context.Context, i int) error { return bench.HTTPGet(ctx, rt, urls[i%bench.Keys]) },
					StatsFunc: func() bench.ClientStats {
						s := bench.UnknownStats()
						s.Requests = int64(st.RequestedRoundTrips())
						s.Hedges = int64(st.ActualRoundTrips() - st.RequestedRoundTrips())
						s.HedgeWins = int64(st.HedgedRequestWins())
						s.Dials = dials.Load()
						return s
					},
					CloseFunc: func() error { base.CloseIdleConnections(); return nil },
				}, nil
			},
		}, nil
	case "failsafe-go":
		return bench.Contender{
			Name: name,
			Doc:  fmt.Sprintf("failsafe-go v0.9.8 hedgepolicy: NewBuilderWithDelay(%v), at most 1 hedge, each attempt a GET through a round-robin balancer over the replicas; no budget.", delay),
			New: func(b bench.Backend) (bench.Client, error) {
				hb := b.(*bench.HTTPBackend)
				base, dials := bench.NewCountingTransport()
				rr := bench.NewRoundRobin(base, hb)
				var requests, hedges atomic.Int64
				policy := hedgepolicy.NewBuilderWithDelay[struct{}](delay).
					WithMaxHedges(1).
					OnHedge(func(failsafe.ExecutionEvent[struct{}]) { hedges.Add(1) }).
					Build()
				exec := failsafe.With[struct{}](policy)
				urls := bench.ItemURLs(hb.URLs()[0])
				return bench.ClientFuncs{
					DoFunc: func(ctx context.Context, i int) error {
						requests.Add(1)
						_, err := exec.WithContext(ctx).GetWithExecution(func(e failsafe.Execution[struct{}]) (struct{}, error) {
							return struct{}{}, bench.HTTPGet(e.Context(), rr, urls[i%bench.Keys])
						})
						return err
					},
					StatsFunc: func() bench.ClientStats {
						s := bench.UnknownStats()
						s.Requests = requests.Load()
						s.Hedges = hedges.Load()
						s.Dials = dials.Load()
						return s
					},
					CloseFunc: func() error { base.CloseIdleConnections(); return nil },
				}, nil
			},
		}, nil
	}
	st, err := bench.LookupStrategy(name)
	if err != nil {
		return bench.Contender{}, fmt.Errorf("%w, hedgedhttp, failsafe-go", err)
	}
	if _, err := st.Config(bench.StrategyOptions{FixedDelay: delay}); err != nil {
		return bench.Contender{}, err
	}
	return bench.StrategyContender(st, bench.StrategyOptions{FixedDelay: delay}, false), nil
}
