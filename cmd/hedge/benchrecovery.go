package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge/internal/advise"
	"github.com/tailcut/hedge/internal/bench"
)

// runBenchRecovery is "hedge bench recovery": every replica slows down at
// once for a while, and the comparison measures how soon each
// configuration's latency comes back after (see bench.RunRecovery).
func runBenchRecovery(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench recovery", "[--loads 0.3,0.5] [--configs a,b] [--quick] [flags]", stderr)
	d := bench.RecoveryOptions{}.Defaults()
	o := d
	loads := fs.String("loads", "0.3,0.5", "offered loads, fractions of the servers' normal capacity, comma-separated")
	configs := fs.String("configs", strings.Join(d.Configs, ","), "configurations, comma-separated (the names of hedge bench --configs)")
	fs.IntVar(&o.Replicas, "replicas", d.Replicas, "replicas")
	fs.IntVar(&o.Workers, "workers", d.Workers, "requests each replica runs at once (the rest queue)")
	fs.DurationVar(&o.Service, "service", d.Service, "time a request holds its worker when no slowdown is on")
	fs.Float64Var(&o.Factor, "factor", d.Factor, "slowdown factor: work started during the slowdown takes this many times as long")
	fs.DurationVar(&o.Before, "before", d.Before, "measured time before the slowdown")
	fs.DurationVar(&o.Slow, "slow", d.Slow, "length of the slowdown")
	fs.DurationVar(&o.After, "after", d.After, "measured time after the slowdown")
	fs.DurationVar(&o.Warmup, "warmup", d.Warmup, "warm-up of each run, not measured")
	fs.DurationVar(&o.Window, "window", d.Window, "width of the windows in which latency and hedges are counted")
	fs.Float64Var(&o.Tolerance, "tolerance", d.Tolerance, "recovered: a window's mean latency within this fraction of the mean before the slowdown")
	fs.IntVar(&o.Settle, "settle", d.Settle, "recovered: this many windows in a row")
	fs.IntVar(&o.Repeats, "repeats", d.Repeats, "runs of each configuration at each load (medians reported)")
	fs.Uint64Var(&o.Seed, "seed", d.Seed, "seed of the arrivals")
	windows := fs.String("windows", "", "also write every window of the median runs as CSV to this file")
	quick := fs.Bool("quick", false, "one repeat, 1 s before and 2 s after the slowdown")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *quick {
		if !flagSet(fs, "repeats") {
			o.Repeats = 1
		}
		if !flagSet(fs, "before") {
			o.Before = time.Second
		}
		if !flagSet(fs, "after") {
			o.After = 2 * time.Second
		}
		if !flagSet(fs, "warmup") {
			o.Warmup = 500 * time.Millisecond
		}
	}
	var err error
	if o.Loads, err = parseLoads(*loads); err != nil {
		return usageError(stderr, "bench recovery", err)
	}
	o.Configs = advise.SplitList(*configs)
	if err := o.Validate(); err != nil {
		return usageError(stderr, "bench recovery", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rs, err := bench.RunRecovery(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hedge bench recovery:", err)
		return 1
	}
	if err := bench.WriteRecoveryTable(stdout, o, rs); err != nil {
		fmt.Fprintln(stderr, "hedge bench recovery:", err)
		return 1
	}
	if *windows != "" {
		f, err := os.Create(*windows)
		if err != nil {
			fmt.Fprintln(stderr, "hedge bench recovery:", err)
			return 1
		}
		fmt.Fprintln(f, "load,config,start_ms,calls,mean_ms,hedge_share")
		for _, r := range rs {
			for _, w := range r.Windows {
				fmt.Fprintf(f, "%g,%s,%d,%d,%.3f,%.4f\n", r.Load, r.Config, w.Start.Milliseconds(), w.Calls, float64(w.Mean)/1e6, w.HedgeShare)
			}
		}
		if err := f.Close(); err != nil {
			fmt.Fprintln(stderr, "hedge bench recovery:", err)
			return 1
		}
	}
	return 0
}

// parseLoads reads a --loads flag: offered loads, comma-separated. It
// checks that each is a number and that there is one at least; each
// command checks the range it accepts.
func parseLoads(s string) ([]float64, error) {
	var loads []float64
	for _, x := range advise.SplitList(s) {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return nil, fmt.Errorf("--loads: %q is not a number", x)
		}
		loads = append(loads, v)
	}
	if len(loads) == 0 {
		return nil, errors.New("--loads: give at least one load, such as 0.5")
	}
	return loads, nil
}
