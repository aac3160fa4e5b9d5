package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Report is everything one invocation measured, as written to results.json.
type Report struct {
	Command    string           `json:"command"`
	Started    time.Time        `json:"started"`
	Elapsed    time.Duration    `json:"elapsed_ns"`
	GoVersion  string           `json:"go_version"`
	Platform   string           `json:"platform"`
	CPUs       int              `json:"cpus"`
	Load1Start float64          `json:"load1_start"`
	Load1End   float64          `json:"load1_end"`
	Backends   []*BackendResult `json:"backends"`
	// Errors lists backends or runs that failed; the report holds what
	// was measured before.
	Errors []string `json:"errors,omitempty"`
}

// NewReport starts a report of command.
func NewReport(command string) *Report {
	return &Report{
		Command:    command,
		Started:    time.Now(),
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		Load1Start: LoadAverage(),
	}
}

// Files written by WriteReport.
const (
	ReportMarkdown = "report.md"
	ReportJSON     = "results.json"
)

// CCDFFile is the name of the CCDF plot of a backend.
func CCDFFile(backend string) string { return "ccdf-" + backend + ".svg" }

// CheckOutDir reports whether dir can be the output directory: it exists
// as a directory or can be created.
func CheckOutDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("output directory %s is a file: choose a directory", dir)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory %s cannot be created: %v", dir, err)
	}
	return nil
}

// WriteReport writes report.md, results.json and one CCDF plot per backend
// into dir, and returns the paths written.
func WriteReport(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	var errs []error
	write := func(name string, f func(w io.Writer) error) {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		if err := f(fh); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
		if err := fh.Close(); err != nil {
			errs = append(errs, err)
		}
		files = append(files, p)
	}
	write(ReportJSON, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	})
	for _, b := range r.Backends {
		var series []Series
		for _, c := range b.Configs {
			series = append(series, Series{Name: c.Config, Points: c.CCDF})
		}
		title := fmt.Sprintf("%s: %d replicas, %.0f req/s, stalls %s x %v", b.Backend, b.Replicas, b.Scenario.Rate,
			pct(b.Scenario.StallShare), b.Scenario.StallLength)
		write(CCDFFile(b.Backend), func(w io.Writer) error { return WriteCCDFSVG(w, title, series) })
	}
	write(ReportMarkdown, func(w io.Writer) error { return WriteMarkdown(w, r) })
	return files, errors.Join(errs...)
}

func pct(f float64) string { return fmt.Sprintf("%g%%", 100*f) }

// WriteMarkdown writes the report as markdown.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# hedge bench\n\n")
	fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	fmt.Fprintf(&b, "Started %s, took %s. %s, %s, %d CPUs. Load average (1 min) %.2f at the start, %.2f at the end.\n\n",
		r.Started.Format(time.RFC3339), r.Elapsed.Round(time.Second), r.GoVersion, r.Platform, r.CPUs, r.Load1Start, r.Load1End)
	b.WriteString("Latency is measured from each request's intended start time (open-loop Poisson arrivals), so a request delayed by the load generator or by a queue counts its wait. " +
		"Each cell is the median over repeats, with the range (min–max) below it when repeats differ. Every configuration of a repeat saw the same arrivals and the same stall schedule.\n\n")
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "**Error:** %s\n\n", e)
	}
	for _, br := range r.Backends {
		writeBackend(&b, br)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeBackend(b *strings.Builder, br *BackendResult) {
	s := br.Scenario
	stalls := "no stalls"
	if s.StallShare > 0 {
		stalls = fmt.Sprintf("each replica stalled %s of the time in stalls of %v (Poisson starts)", pct(s.StallShare), s.StallLength)
		if s.StallTogether {
			stalls = fmt.Sprintf("every replica stalled together %s of the time in stalls of %v (Poisson starts)", pct(s.StallShare), s.StallLength)
		}
		if s.StallOne {
			stalls = fmt.Sprintf("replica 0 alone stalled %s of the time in stalls of %v (Poisson starts), the others never", pct(s.StallShare), s.StallLength)
		}
	}
	span := fmt.Sprintf("%v measured after %v of warm-up", s.Duration, s.Warmup)
	if s.Requests > 0 {
		span += fmt.Sprintf(", at most %d requests", s.Requests)
	}
	if s.FanOut > 1 {
		span += fmt.Sprintf("; each request reads %d leaves at once and waits for all (hedge.WithFanOut), so the replicas receive %.0f leaves/s", s.FanOut, s.Rate*float64(s.FanOut))
	}
	if s.Clients > 1 {
		span += fmt.Sprintf("; the requests split among %d clients, each with a Hedger and connections of its own", s.Clients)
	}
	fmt.Fprintf(b, "## %s\n\n", br.Backend)
	fmt.Fprintf(b, "%d replicas, %.0f requests/s, %s; %d repeats of %s; seed %d; took %s.\n\n",
		br.Replicas, s.Rate, stalls, s.Repeats, span, s.Seed, br.Elapsed.Round(time.Second))
	for _, n := range br.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	if len(br.Notes) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "![CCDF](%s)\n\n", CCDFFile(br.Backend))

	fmt.Fprintf(b, "### Latency\n\n")
	fmt.Fprintf(b, "| config | p50 | p90 | p99 | p99.9 | max | p99 ÷ %s | p99.9 ÷ %s |\n", br.Baseline, br.Baseline)
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range br.Configs {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Config,
			cellUs(c.P50Us), cellUs(c.P90Us), cellUs(c.P99Us), cellUs(c.P999Us), cellUs(c.MaxUs),
			cellF(c.P99Ratio, "%.2f"), cellF(c.P999Ratio, "%.2f"))
	}
	b.WriteString("\n### Cost\n\n")
	b.WriteString("| config | extra requests | extra at servers | hedge win rate | wasted work per request | timer lag p50 | timer lag p99 | pool waits | pool wait time | dials | errors |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range br.Configs {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Config,
			cellF(c.ExtraPct, "%.2f%%"), cellF(c.ServerExtraPct, "%.2f%%"), cellF(c.WinRate, "%.1f%%"), cellUs(c.WastedUs),
			cellUs(c.TimerLagP50Us), cellUs(c.TimerLagP99Us),
			cellF(c.PoolWaits, "%.0f"), cellF(c.PoolWaitMs, "%.1fms"), cellF(c.Dials, "%.0f"), cellF(c.Errors, "%.0f"))
	}
	b.WriteString("\nTimer lag: how late the client's hedge timers fired after they came due (hedge.Stats.TimerLag), over each whole run, warm-up included; n/a where no timer came due. `hedge advise --send-lag` takes the p50 to predict hedges that leave that late.\n")
	b.WriteString("\n### Noise\n\n")
	b.WriteString("| config | runs | aborted | still noisy | reruns | stalls per run | dispatch lag p99 | other processes (cores) | this process (cores) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range br.Configs {
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %s | %s | %s | %s |\n", c.Config, c.Runs, c.AbortedRuns, c.NoisyRuns, c.Reruns,
			cellF(c.Stalls, "%.0f"), cellUs(c.LagP99Us), cellF(c.OtherCPU, "%.2f"), cellF(c.SelfCPU, "%.2f"))
	}
	fmt.Fprintf(b, "\nA run is noisy when other processes used more than %.2f cores during it, or the dispatch lag p99 (actual start of a request minus its intended time) exceeded %v; "+
		"a noisy run is run again (at most %d times, %d reruns in all) and the least noisy attempt kept. "+
		"A run is aborted, and left out of the measures, when its requests in flight reach %d: the backend or the machine could not keep up.\n\n", s.MaxOtherCPU, s.MaxLag, s.MaxReruns, s.MaxTotalReruns, s.MaxInFlight)
	b.WriteString("### Configurations\n\n")
	for _, c := range br.Configs {
		fmt.Fprintf(b, "- `%s`: %s\n", c.Config, c.Doc)
	}
	b.WriteString("\n### Every run\n\n")
	b.WriteString("| config | repeat | attempt | kept | requests | rate | p50 | p99 | p99.9 | max | extra | delay at end | stalls | lag p99 | others | noise |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range br.Runs {
		kept := ""
		if r.Kept {
			kept = "yes"
		}
		fmt.Fprintf(b, "| %s | %d | %d | %s | %d | %.0f/s | %s | %s | %s | %s | %s | %s | %d | %s | %.2f | %s |\n",
			r.Config, r.Repeat+1, r.Attempt+1, kept, r.Requests, r.Rate, fmtUs(r.P50Us), fmtUs(r.P99Us), fmtUs(r.P999Us), fmtUs(r.MaxUs),
			fmtPct(r.ExtraPct), fmtUs(r.DelayUs), r.Stalls, fmtUs(r.LagP99Us), r.OtherCPU, r.Noise)
	}
	b.WriteString("\n")
}

func cellUs(s Spread) string {
	if !s.OK {
		return "n/a"
	}
	if s.Min == s.Max {
		return fmtUs(s.Median)
	}
	return fmt.Sprintf("%s<br>(%s–%s)", fmtUs(s.Median), fmtUs(s.Min), fmtUs(s.Max))
}

func cellF(s Spread, format string) string {
	if !s.OK || math.IsNaN(s.Median) {
		return "n/a"
	}
	m := fmt.Sprintf(format, s.Median)
	lo, hi := fmt.Sprintf(format, s.Min), fmt.Sprintf(format, s.Max)
	if lo == hi {
		return m
	}
	return fmt.Sprintf("%s<br>(%s–%s)", m, lo, hi)
}
