package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tailcut/hedge/internal/advise"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/fleetbench"
)

// runBenchFleet is "hedge bench fleet": it pushes policy documents to
// watchers in worker processes, through a three-member etcd cluster and
// through a ConfigMap-style file, and times how soon every watcher
// applied each (see package fleetbench). The worker processes are this
// binary again, run with fleetbench.WorkerEnv set.
func runBenchFleet(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fleetbench.MaybeRunWorker(ctx)

	fs := newFlags("bench fleet", "[--quick] [--watchers 200] [--procs 4] [--sources etcd,file] [flags]", stderr)
	d := fleetbench.Options{}.Defaults()
	o := d
	fs.IntVar(&o.Watchers, "watchers", d.Watchers, "watchers, each with its own store client, its own Hedger and its own traffic")
	fs.IntVar(&o.Procs, "procs", d.Procs, "worker processes the watchers are shared among")
	fs.Float64Var(&o.Rate, "rate", d.Rate, "calls per second of each watcher's Hedger (0: no traffic)")
	fs.IntVar(&o.Pushes, "pushes", d.Pushes, "pushes of each scenario")
	fs.DurationVar(&o.Jitter, "jitter", d.Jitter, "each watcher's random delay before it applies a document, at most this (fleet.Options.Jitter)")
	fs.DurationVar(&o.Hold, "hold", d.Hold, "traffic counted before the kill switch and after every watcher applied it")
	fs.DurationVar(&o.Bound, "bound", d.Bound, "a watcher that has not applied a push this long after it started is a miss")
	fs.DurationVar(&o.Attempt, "attempt", d.Attempt, "how long one push waits for the store's answer before it is sent again (0: as long as the store takes)")
	sources := fs.String("sources", strings.Join(d.Sources, ","), "sources to measure, comma-separated: etcd, file")
	fs.Uint64Var(&o.Seed, "seed", d.Seed, "seed of the traffic")
	out := fs.String("out", "./bench-out", "output directory for fleet.md and fleet.json")
	quick := fs.Bool("quick", false, "one push a scenario and a 1 s hold: the same table in under two minutes")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *quick {
		q := o.Quick()
		if !flagSet(fs, "pushes") {
			o.Pushes = q.Pushes
		}
		if !flagSet(fs, "hold") {
			o.Hold = q.Hold
		}
	}
	o.Sources = advise.SplitList(*sources)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "hedge bench fleet: finding this binary to run the workers:", err)
		return exitFailure
	}
	o.Command = func() *exec.Cmd { return fleetWorkerCommand(self) }
	o.Progress = stderr
	if err := o.Validate(); err != nil {
		return usageError(stderr, "bench fleet", err)
	}
	if err := bench.CheckOutDir(*out); err != nil {
		return usageError(stderr, "bench fleet", err)
	}
	res, err := fleetbench.Run(ctx, o)
	if res != nil && len(res.Rows) > 0 {
		if werr := writeFleetResults(*out, res, stdout); werr != nil {
			fmt.Fprintln(stderr, "hedge bench fleet:", werr)
			return exitFailure
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "hedge bench fleet:", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitFailure
	}
	return exitOK
}

// fleetWorkerCommand is the command of a worker process: this binary
// again, which calls fleetbench.MaybeRunWorker first thing in "bench
// fleet". Tests replace it with their test binary.
var fleetWorkerCommand = func(self string) *exec.Cmd { return exec.Command(self, "bench", "fleet") }

// writeFleetResults prints the table and writes it, and the JSON, into
// dir.
func writeFleetResults(dir string, res *fleetbench.Result, stdout io.Writer) error {
	if err := fleetbench.WriteTable(stdout, res); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer, *fleetbench.Result) error{
		"fleet.md":   fleetbench.WriteTable,
		"fleet.json": fleetbench.WriteJSON,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\nwritten: %s, %s\n", filepath.Join(dir, "fleet.md"), filepath.Join(dir, "fleet.json"))
	return nil
}
