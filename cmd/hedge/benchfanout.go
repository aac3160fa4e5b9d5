package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tailcut/hedge/internal/bench"
)

// benchFanOutConfigs are the configurations "hedge bench fanout" compares
// unless --configs says otherwise: no hedging, the default on each leaf,
// and the fan-out call.
const benchFanOutConfigs = "none-two-choice,default,default-fan"

// runBenchFanOut runs "hedge bench" once per width of --width, each with
// --fanout set to it and its own output directory, and sums up request
// latency by width, backend and configuration. Every flag but --width is
// hedge bench's; --fanout is refused (--width gives it). With --shards it
// runs the sharded fan-out instead (runBenchShards).
func runBenchFanOut(args []string, stdout, stderr io.Writer) int {
	if hasShardsFlag(args) {
		return runBenchShards(args, stdout, stderr)
	}
	const usage = "usage: hedge bench fanout [--width 10,40,100] [--out DIR] [--configs LIST] [hedge bench flags]\n   or: hedge bench fanout --shards N [--replicas R] [--quick] [flags] (hedge bench fanout --shards 30 --help)"
	widths := []int{10, 40, 100}
	out := "./bench-fanout-out"
	var rest []string
	configs := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		take := func() (string, bool) {
			if hasVal {
				return val, true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		switch name {
		case "h", "help":
			fmt.Fprintln(stderr, usage)
			fmt.Fprintln(stderr, "Runs hedge bench once per width (--fanout W), each request reading W leaves and waiting for all of them, with the configurations "+benchFanOutConfigs+" unless --configs gives others; writes each width's report to DIR/width-W and a summary to DIR/summary.md. Every other flag is hedge bench's (hedge bench --help).")
			return exitOK
		case "fanout":
			return usageError(stderr, "bench fanout", fmt.Errorf("--fanout: give the widths with --width, e.g. --width 10,40,100"))
		case "width":
			v, ok := take()
			if !ok {
				return usageError(stderr, "bench fanout", fmt.Errorf("--width needs a value, e.g. --width 10,40,100"))
			}
			ws, err := parseWidths(v)
			if err != nil {
				return usageError(stderr, "bench fanout", err)
			}
			widths = ws
		case "out":
			v, ok := take()
			if !ok {
				return usageError(stderr, "bench fanout", fmt.Errorf("--out needs a directory"))
			}
			out = v
		default:
			if name == "configs" {
				configs = true
			}
			rest = append(rest, a)
		}
	}
	if !configs {
		rest = append(rest, "--configs", benchFanOutConfigs)
	}
	if err := bench.CheckOutDir(out); err != nil {
		return usageError(stderr, "bench fanout", err)
	}
	var reports []fanOutReport
	for i, w := range widths {
		dir := filepath.Join(out, fmt.Sprintf("width-%d", w))
		fmt.Fprintf(stderr, "hedge bench fanout: width %d (%d of %d), writing to %s\n", w, i+1, len(widths), dir)
		wargs := append([]string{"--fanout", strconv.Itoa(w), "--out", dir}, rest...)
		if code := runBench(wargs, stdout, stderr); code != exitOK {
			return code
		}
		rep, err := loadBenchReport(filepath.Join(dir, "results.json"))
		if err != nil {
			fmt.Fprintf(stderr, "hedge bench fanout: %v\n", err)
			return exitFailure
		}
		reports = append(reports, fanOutReport{width: w, rep: rep})
	}
	sum := fanOutSummary("hedge bench fanout "+strings.Join(args, " "), reports)
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(sum), 0o644); err != nil {
		fmt.Fprintf(stderr, "hedge bench fanout: %v\n", err)
		return exitFailure
	}
	fmt.Fprint(stdout, "\n"+sum)
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(out, "summary.md"))
	return exitOK
}

// parseWidths reads a comma-separated list of widths, each 1 to
// bench.MaxFanOut.
func parseWidths(v string) ([]int, error) {
	var ws []int
	for _, s := range strings.Split(v, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || w < 1 || w > bench.MaxFanOut {
			return nil, fmt.Errorf("--width %q: give leaves per request, 1 to %d, comma-separated, e.g. 10,40,100", v, bench.MaxFanOut)
		}
		ws = append(ws, w)
	}
	return ws, nil
}

type fanOutReport struct {
	width int
	rep   bench.Report
}

func loadBenchReport(path string) (bench.Report, error) {
	var r bench.Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// fanOutSummary renders the request latency of every width, backend and
// configuration: medians over the repeats, and the ratios to the
// baseline paired by repeat, with their range.
func fanOutSummary(command string, reports []fanOutReport) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Fan-out on real servers\n\n`%s`\n\n", command)
	b.WriteString("Request latency (a request waits for all its leaves): medians over the repeats, in ms; the ratios are to the baseline in the same repeat, median (min–max). Extra: the copies the client sent beyond one per leaf, per leaf.\n\n")
	b.WriteString("| width | backend | config | p50 | p99 | p99.9 | p99 ratio | p99.9 ratio | extra |\n|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
	ms := func(s bench.Spread) string { return fmt.Sprintf("%.2f", s.Median/1000) }
	ratio := func(s bench.Spread) string {
		if !s.OK {
			return "–"
		}
		return fmt.Sprintf("%.2f (%.2f–%.2f)", s.Median, s.Min, s.Max)
	}
	for _, fr := range reports {
		for _, be := range fr.rep.Backends {
			for _, c := range be.Configs {
				name := c.Config
				if name == be.Baseline {
					name += " (baseline)"
				}
				fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %.1f%% |\n", fr.width, be.Backend, name,
					ms(c.P50Us), ms(c.P99Us), ms(c.P999Us), ratio(c.P99Ratio), ratio(c.P999Ratio), c.ExtraPct.Median)
			}
		}
	}
	return b.String()
}
