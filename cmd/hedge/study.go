package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tailcut/hedge/internal/sim"
)

func init() { register(studyCommand) }

var studyCommand = &command{
	name:    "study",
	summary: "run the hedging study grid and write results.json, table.md and plots",
	run:     runStudy,
}

func runStudy(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("study", "[--out DIR] [--seed N] [--quick] [--workers N] [--groups LIST]", stderr)
	out := fs.String("out", "./study-out", "output directory (created if needed)")
	seed := fs.Uint64("seed", 1, "master seed; every run's seed derives from it and the point's identity")
	quick := fs.Bool("quick", false, "reduced grid (2 runs x 100,000 requests, or leaves in the fan-out and clients groups; 6 loads)")
	workers := fs.Int("workers", 0, "parallel runs (0: GOMAXPROCS); results do not depend on it")
	groups := fs.String("groups", "", "comma-separated groups to run, of "+strings.Join(sim.StudyGroups, ", ")+
		", or all (default: every group but "+strings.Join(sim.StudyOptInGroups, ", ")+", which run only when named)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *workers < 0 {
		return usageError(stderr, "study", fmt.Errorf("--workers %d: use 0 (all cores) or more", *workers))
	}
	var only []string
	if *groups != "" {
		for _, g := range strings.Split(*groups, ",") {
			only = append(only, strings.TrimSpace(g))
		}
		if err := sim.CheckStudyGroups(only); err != nil {
			return usageError(stderr, "study", fmt.Errorf("--groups %s: %w", *groups, err))
		}
	}
	if err := sim.CheckOutDir(*out); err != nil {
		return usageError(stderr, "study", err)
	}
	opts := sim.StudyOptions{Seed: *seed, Quick: *quick, Workers: *workers, OutDir: *out, Progress: stderr, Groups: only}
	points, runs := sim.StudySize(opts)
	fmt.Fprintf(stderr, "hedge study: %d points, %d runs, writing to %s\n", points, runs, *out)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := sim.RunStudy(ctx, opts)
	el := time.Since(start)
	var reqs int64
	for _, r := range res {
		reqs += int64(r.Runs) * int64(r.Requests)
	}
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "hedge study: interrupted after %s: %d of %d points kept in %s\n",
			el.Round(time.Millisecond), len(res), points, filepath.Join(*out, "results.json"))
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "hedge study: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%d points in %s (%.3g simulated requests/s, calibration runs not counted)\n",
		len(res), el.Round(time.Millisecond), float64(reqs)/el.Seconds())
	fmt.Fprintf(stdout, "wrote %s, %s and the plots in %s\n",
		filepath.Join(*out, "results.json"), filepath.Join(*out, "table.md"), *out)
	return exitOK
}
