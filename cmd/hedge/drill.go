package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tailcut/hedge/internal/drill"
)

func init() { register(drillCommand) }

var drillCommand = &command{
	name:    "drill",
	summary: "replay the 20-request hedging drill and print its trace and outcome",
	run:     runDrill,
}

func runDrill(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("drill", "[--delay 130ms] [--budget 100] [--no-cancel] [--op read|write|write-key] [--no-hedge]", stderr)
	d := drill.DefaultParams()
	delay := fs.Duration("delay", d.Delay, "send the backup this long after the primary if it has not answered (0 to 10s)")
	budget := fs.Int("budget", d.Budget, "percentage of the requests that may hedge, spent in arrival order (0 to 100)")
	noCancel := fs.Bool("no-cancel", false, "let the losing copy run to completion instead of cancelling it")
	op := fs.String("op", d.Op.String(), "operation: read, write (no idempotency key) or write-key")
	noHedge := fs.Bool("no-hedge", false, "send primaries only (the baseline)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	o, err := drill.ParseOp(*op)
	if err != nil {
		return usageError(stderr, "drill", fmt.Errorf("--op: %w", err))
	}
	p := drill.Params{Hedge: !*noHedge, Delay: *delay, Budget: *budget, Cancel: !*noCancel, Op: o}
	if err := p.Validate(); err != nil {
		return usageError(stderr, "drill", err)
	}
	r, err := drill.Run(p)
	if err != nil {
		return usageError(stderr, "drill", err)
	}
	printDrill(stdout, &r)
	return exitOK
}

// printDrill writes the trace and the outcome of r.
func printDrill(w io.Writer, r *drill.Result) {
	fmt.Fprintf(w, "Drill: %d requests, %s.\n\n", drill.Count, r.Params)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "time\trequest\t\tevent")
	for _, e := range r.Events {
		fmt.Fprintf(tw, "%s\t%d\t\t%-7s %s\n", drill.FormatMs(e.At), e.Req, e.Kind, e.Text)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nOutcome: %s\n%s\n\n", r.Outcome, r.Summary)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  p95\t%s without hedging -> %s (p50 %s -> %s)\n",
		drill.FormatMs(r.BaselineP95), drill.FormatMs(r.P95), drill.FormatMs(r.BaselineP50), drill.FormatMs(r.P50))
	hedged := r.HedgedRequests()
	fmt.Fprintf(tw, "  hedges\t%d of %d (%s), +%g%% backend requests (limit %d%%)\n",
		r.Hedges, drill.Count, joinInts(hedged), r.ExtraLoad, drill.LoadLimit)
	var wins []string
	for _, rr := range r.Requests {
		if rr.Hedged && rr.Winner == drill.Backup {
			wins = append(wins, fmt.Sprintf("%d at %s", rr.N, drill.FormatMs(rr.Latency)))
		}
	}
	if len(wins) > 0 {
		fmt.Fprintf(tw, "  backups won\t%s\n", strings.Join(wins, ", "))
	}
	fmt.Fprintf(tw, "  loser work\t%s of backend time spent on losing copies\n", drill.FormatMs(r.LoserWork))
	if r.Params.Op != drill.Read {
		fmt.Fprintf(tw, "  writes\t%d requests wrote twice, %d second commits deduplicated\n", r.DuplicateWrites, r.Deduplicated)
	}
	tw.Flush()
}

func joinInts(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return "requests " + strings.Join(s, ", ")
}
