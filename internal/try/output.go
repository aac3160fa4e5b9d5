package try

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/hedgeset"
)

// LatenciesFile is the name of the file WriteFiles writes, with
// latencies, for the baseline arm: one duration per line, the format
// "hedge advise --in" reads.
func LatenciesFile(arm string) string { return "latencies-" + cleanName(arm) + ".txt" }

// RequestsFile is the name of the JSON lines file written beside
// LatenciesFile: one object per request in send order,
// {"sent": unix seconds, "latency": "1.2ms", "replica": "http://..."}.
func RequestsFile(arm string) string { return "requests-" + cleanName(arm) + ".jsonl" }

func cleanName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, s)
}

// WriteSummary writes the text summary: one row per arm, the verdicts,
// and what each replica did.
func (r *Result) WriteSummary(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "hedge try: %d replicas, %d targets, %g requests/s, measured %s", len(r.Replicas), r.Targets, r.Rate, r.Measured.Round(10*time.Millisecond))
	if r.Interrupted {
		fmt.Fprint(bw, " (interrupted: partial)")
	}
	fmt.Fprintln(bw)
	if r.Stopped != "" {
		fmt.Fprintf(bw, "stopped: %s\n", r.Stopped)
	}
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	obj := objectiveOf(r.Objective)
	fmt.Fprintf(tw, "arm\trequests\terrors\tp50\tp90\tp99\tp99.9\t%s ratio (%g%% CI)\thedged\twins\textra\n", obj.name, 100*Confidence)
	for _, a := range r.Arms {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%d\t%.1f%%\n", a.Name, a.Requests, a.Errors,
			fmtDur(a.P50.Value), fmtDur(a.P90.Value), fmtDur(a.P99.Value), fmtDur(a.P999.Value)+few(a.P999),
			ratioText(obj.of(a)), pct(a.Hedged, a.Requests), a.HedgeWins, 100*a.ExtraLoad)
	}
	tw.Flush()
	fmt.Fprintf(bw, "\nverdicts by the %s (--objective):\n", obj.name)
	for _, a := range r.Arms {
		fmt.Fprintf(bw, "%-16s %s: %s\n", a.Name, a.Verdict, a.Why)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(bw, "WARNING: %s\n", strings.ToUpper(w[:1])+w[1:])
	}
	for _, a := range r.Arms {
		if a.DelayAtEnd > 0 || len(a.NotSent) > 0 {
			fmt.Fprintf(bw, "%-16s delay %s at the start of the measured span, %s at the end; hedges not sent: %s\n", a.Name, fmtDelay(a.DelayAtStart), fmtDelay(a.DelayAtEnd), notSentCell(a.NotSent))
		}
	}
	fmt.Fprintln(bw)
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "replica\tcopies p50\tcopies p99\tper arm: copies / hedges / hedge wins / loser time")
	for j, rr := range r.Replica {
		var parts []string
		for _, a := range r.Arms {
			ar := a.Replicas[j]
			parts = append(parts, fmt.Sprintf("%s %d/%d/%d/%s", a.Name, ar.Copies, ar.Hedges, ar.HedgeWins, fmtDur(ar.LoserTime)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", rr.Replica, fmtDur(rr.P50), fmtDur(rr.P99), strings.Join(parts, "  "))
	}
	tw.Flush()
	fmt.Fprintf(bw, "\nload generator lag (start after intended start): p50 %s, p99 %s\n", fmtDur(r.LagP50), fmtDur(r.LagP99))
	if r.DroppedInFlight > 0 || r.DroppedLate > 0 {
		fmt.Fprintf(bw, "dropped, not sent: %d arrivals (%d with every in-flight slot held, %d reached late): never sent in a burst above the rate\n", r.DroppedInFlight+r.DroppedLate, r.DroppedInFlight, r.DroppedLate)
	}
	if len(r.Backoff) > 0 {
		fmt.Fprintf(bw, "\nback-off: %d changes of the rate (%d pushback responses); lowest x%.3f\n", len(r.Backoff), r.Pushback, minBackoff(r.Backoff))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(bw, "note: %s\n", n)
	}
	return bw.Flush()
}

func few(e Estimate) string {
	if e.Few {
		return "*"
	}
	return ""
}

func ratioText(e Estimate) string {
	if math.IsNaN(e.RatioLo) {
		return fmt.Sprintf("%.2f", e.Ratio)
	}
	return fmt.Sprintf("%.2f (%.2f-%.2f)", e.Ratio, e.RatioLo, e.RatioHi)
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func minBackoff(ev []BackoffEvent) float64 {
	m := 1.0
	for _, e := range ev {
		m = min(m, e.Factor)
	}
	return m
}

// WriteFiles writes report.md, results.json, ccdf.svg (latency CCDF per
// arm), timeline.svg (p50 and p99 per time block per arm) and replicas.svg
// (CCDF of each replica's copy times) into dir, and with latencies also
// LatenciesFile and RequestsFile of the baseline arm. It returns the paths
// written. Header values that may be credentials are never written.
func (r *Result) WriteFiles(dir string, latencies bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	var errs []error
	write := func(name string, f func(w *bufio.Writer) error) {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			errs = append(errs, err)
			return
		}
		bw := bufio.NewWriter(fh)
		err = f(bw)
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writing %s: %w", p, err))
			return
		}
		paths = append(paths, p)
	}
	write("results.json", func(w *bufio.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	})
	write("report.md", r.writeMarkdown)
	write("ccdf.svg", func(w *bufio.Writer) error {
		var series []bench.Series
		for _, a := range r.Arms {
			s := slices.Clone(a.lat)
			slices.Sort(s)
			series = append(series, bench.Series{Name: a.Name, Points: bench.CCDF(s, 200)})
		}
		return bench.WriteCCDFSVG(w, "hedge try: latency by arm", series)
	})
	write("replicas.svg", func(w *bufio.Writer) error {
		var series []bench.Series
		for _, rr := range r.Replica {
			series = append(series, bench.Series{Name: shortHost(rr.Replica), Points: bench.CCDF(rr.dur, 200)})
		}
		return bench.WriteCCDFSVG(w, "hedge try: "+r.words().copyTime+" by replica (all arms)", series)
	})
	write("timeline.svg", r.writeTimeline)
	if latencies {
		base := r.baseline()
		write(LatenciesFile(base.Name), func(w *bufio.Writer) error {
			fmt.Fprintf(w, "# hedge try latencies: arm %s, %d replicas, %g requests/s over all arms, measured %v\n", base.Name, len(r.Replicas), r.Rate, r.Measured)
			fmt.Fprintf(w, "# measured from each request's intended start, in send order; for hedge advise --in\n")
			for _, ns := range base.lat {
				w.WriteString(time.Duration(ns).String())
				w.WriteByte('\n')
			}
			return nil
		})
		write(RequestsFile(base.Name), func(w *bufio.Writer) error {
			for k, ns := range base.lat {
				t := r.start.Add(base.sent[k]).UnixNano()
				rep := ""
				if j := base.winner[k]; j >= 0 {
					rep = r.Replicas[j]
				}
				fmt.Fprintf(w, "{\"sent\":%d.%06d,\"latency\":%q,\"replica\":%q}\n", t/1e9, t%1e9/1e3, time.Duration(ns).String(), rep)
			}
			return nil
		})
	}
	return paths, errors.Join(errs...)
}

func (r *Result) baseline() *ArmResult {
	for _, a := range r.Arms {
		if a.Name == r.Baseline {
			return a
		}
	}
	return r.Arms[0]
}

func shortHost(u string) string {
	for _, p := range []string{"http://", "https://", "redis://", "rediss://"} {
		u = strings.TrimPrefix(u, p)
	}
	return u
}

// words are the phrases of the report that differ by protocol.
type words struct {
	end      string // where a request's latency ends
	clients  string // what each arm's client is
	pushback string // what counts as pushback
	copyTime string // what a copy's time is
}

func (r *Result) words() words {
	switch r.Protocol {
	case ProtocolGRPC:
		return words{
			end:      "to its reply",
			clients:  "hedgegrpc over one ClientConn per replica",
			pushback: "RESOURCE_EXHAUSTED, or UNAVAILABLE with grpc-retry-pushback-ms",
			copyTime: "copy time to reply",
		}
	case ProtocolRedis:
		return words{
			end:      "to its reply",
			clients:  "hedgeredis over one go-redis client per replica, the first the primary; reads only",
			pushback: "Redis has none",
			copyTime: "copy time to reply",
		}
	}
	return words{
		end:      "to the end of its body",
		clients:  "hedgehttp over net/http",
		pushback: "429, or a 5xx with Retry-After",
		copyTime: "copy time to headers",
	}
}

func (r *Result) writeMarkdown(w *bufio.Writer) error {
	fmt.Fprintf(w, "# hedge try\n\n")
	fmt.Fprintf(w, "Started %s; ran %s. **Real traffic** was sent to %d replicas:\n\n", r.Started.Format(time.RFC3339), r.Elapsed.Round(time.Millisecond), len(r.Replicas))
	for _, u := range r.Replicas {
		fmt.Fprintf(w, "- `%s`\n", u)
	}
	methods := []string{}
	for _, m := range slices.Sorted(maps.Keys(r.Methods)) {
		methods = append(methods, fmt.Sprintf("%s %d", m, r.Methods[m]))
	}
	fmt.Fprintf(w, "\n%d targets (%s), sent in turn; %g requests/s after a %v ramp and %v warm-up (neither measured), measured for %v; %d requests sent in all. ",
		r.Targets, strings.Join(methods, ", "), r.Rate, r.Ramp, r.Warmup, r.Measured.Round(time.Millisecond), r.Sent)
	fmt.Fprintf(w, "Each request went to an arm drawn at random (seed %d), so every arm met the same arrivals and the same moments of the service.\n\n", r.Seed)
	if len(r.Headers) > 0 {
		fmt.Fprintf(w, "Headers: %s.\n\n", strings.Join(quoteAll(r.Headers), ", "))
	}
	if r.Interrupted {
		fmt.Fprintf(w, "**Interrupted**: these are the results up to the interruption.\n\n")
	}
	if r.Stopped != "" {
		fmt.Fprintf(w, "**Stopped**: %s.\n\n", r.Stopped)
	}
	obj := objectiveOf(r.Objective)
	fmt.Fprintf(w, "## Verdicts\n\nBaseline: `%s`. A verdict compares an arm's %s (`--objective`) with the baseline's; the interval of the ratio is a %g%% paired block bootstrap (%d resamples of %d time blocks). TAIL CUT needs the whole interval below 1 and a cut of at least %.0f%%; EXCESS LOAD, hedges above %.0f%% of requests or a tail worse beyond chance; TOO FEW HEDGES, hedges with fewer requests than could move the %s, so that no verdict on hedging comes from the arm.\n\n",
		r.Baseline, obj.name, 100*Confidence, r.Resamples, r.Blocks, 100*r.MinCut, 100*r.LoadLimit, obj.name)
	for _, a := range r.Arms {
		fmt.Fprintf(w, "- **%s**: %s. %s\n", a.Name, a.Verdict, a.Why)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "\n**Warning**: %s.\n", warn)
	}
	fmt.Fprintf(w, "\n## Latency\n\nFrom each request's intended start (no coordinated omission) %s; timeouts count at their time, other failures not. Intervals %g%%; * marks fewer than ten latencies above the percentile.\n\n", r.words().end, 100*Confidence)
	fmt.Fprintf(w, "| arm | requests | errors | p50 | p90 | p99 | p99.9 | p99 ratio | p99.9 ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, a := range r.Arms {
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s |\n", a.Name, a.Requests, a.Errors, estText(a.P50), estText(a.P90), estText(a.P99), estText(a.P999), ratioText(a.P99), ratioText(a.P999))
	}
	fmt.Fprintf(w, "\n![CCDF](ccdf.svg)\n\n![latency over time](timeline.svg)\n\n## Hedges\n\nHedges not sent are those that came due in the measured span and a rule of the arm kept back.\n\n| arm | hedged | hedges | hedge wins | extra requests | loser time | hedges not sent | errors by kind | statuses |\n|---|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, a := range r.Arms {
		fmt.Fprintf(w, "| %s | %.1f%% | %d | %d | %.1f%% | %s | %s | %s | %s |\n", a.Name, pct(a.Hedged, a.Requests), a.Hedges, a.HedgeWins, 100*a.ExtraLoad, fmtDur(a.LoserTime), notSentCell(a.NotSent), countsText(a.ErrorKinds), countsText(a.Statuses))
	}
	fmt.Fprintf(w, "\n## Replicas\n\nCopies per arm (hedges among them), requests answered, hedge wins, and time spent on losing copies.\n\n| replica | copies p50 | copies p99 |")
	for _, a := range r.Arms {
		fmt.Fprintf(w, " %s |", a.Name)
	}
	fmt.Fprintf(w, "\n|---|---:|---:|%s\n", strings.Repeat("---|", len(r.Arms)))
	for j, rr := range r.Replica {
		fmt.Fprintf(w, "| `%s` | %s | %s |", rr.Replica, fmtDur(rr.P50), fmtDur(rr.P99))
		for _, a := range r.Arms {
			ar := a.Replicas[j]
			fmt.Fprintf(w, " %d (%d hedges), %d answered, %d hedge wins, %s lost |", ar.Copies, ar.Hedges, ar.Answers, ar.HedgeWins, fmtDur(ar.LoserTime))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n![replicas](replicas.svg)\n\n## Load\n\n")
	fmt.Fprintf(w, "A request leaves at most one gap (the time to the next arrival) after its intended start, or not at all: try never sends above the rate to catch up. ")
	if r.DroppedInFlight == 0 && r.DroppedLate == 0 {
		fmt.Fprintf(w, "No arrival of the measured span was dropped.\n\n")
	} else {
		fmt.Fprintf(w, "**%d arrivals of the measured span were dropped**: %d found every in-flight slot held until the next arrival was due (a stall), %d were reached late by the load generator. Their latencies are not measured.\n\n", r.DroppedInFlight+r.DroppedLate, r.DroppedInFlight, r.DroppedLate)
	}
	if len(r.Backoff) == 0 {
		fmt.Fprintf(w, "No back-off: the service never pushed back (%s) nor failed a fifth of a second's requests.\n", r.words().pushback)
	} else {
		fmt.Fprintf(w, "The load backed off %d times (%d pushback responses):\n\n", len(r.Backoff), r.Pushback)
		for _, e := range r.Backoff {
			fmt.Fprintf(w, "- at %v: x%.3f of the rate (%s)\n", e.At.Round(time.Millisecond), e.Factor, e.Reason)
		}
	}
	fmt.Fprintf(w, "\n## Arms\n\n")
	for _, a := range r.Arms {
		fmt.Fprintf(w, "- `%s`: %s\n", a.Name, a.Doc)
	}
	fmt.Fprintf(w, "\nEvery arm has its own Hedger and connection pool (%s); the arms share the replicas, so the hedged arms' extra copies load the replicas for every arm alike, and a gain measured here is, if anything, understated.\n", r.words().clients)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
	return nil
}

func estText(e Estimate) string {
	s := fmtDur(e.Value)
	if e.Hi > 0 {
		s += fmt.Sprintf(" (%s–%s)", fmtDur(e.Lo), fmtDur(e.Hi))
	}
	return s + few(e)
}

func countsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(out, ", ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}

// writeTimeline draws each arm's p50 (thin) and p99 (thick) per time
// block against time, latency on a log axis.
func (r *Result) writeTimeline(w *bufio.Writer) error {
	const (
		width, height          = 760, 420
		left, right, top, bott = 70, 150, 40, 50
		pw, ph                 = width - left - right, height - top - bott
	)
	type pt struct{ t, p50, p99 float64 }
	lines := make([][]pt, len(r.Arms))
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for i, a := range r.Arms {
		buckets := make([][]int64, r.Blocks)
		for k, b := range a.blocks {
			buckets[b] = append(buckets[b], a.lat[k])
		}
		for b, l := range buckets {
			if len(l) == 0 {
				continue
			}
			slices.Sort(l)
			p := pt{t: (float64(b) + 0.5) / float64(r.Blocks) * r.Measured.Seconds(), p50: float64(bench.Quantile(l, 0.5)), p99: float64(bench.Quantile(l, 0.99))}
			lines[i] = append(lines[i], p)
			ymin, ymax = math.Min(ymin, p.p50), math.Max(ymax, p.p99)
		}
	}
	if math.IsInf(ymin, 1) {
		ymin, ymax = 1e6, 1e7
	}
	ly0, ly1 := math.Floor(math.Log10(math.Max(ymin, 1e3))), math.Ceil(math.Log10(math.Max(ymax, 1e3)))
	if ly1 <= ly0 {
		ly1 = ly0 + 1
	}
	xmax := math.Max(r.Measured.Seconds(), 1e-3)
	px := func(t float64) float64 { return left + t/xmax*pw }
	py := func(v float64) float64 { return top + (ly1-math.Log10(math.Max(v, 1e3)))/(ly1-ly0)*ph }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="%d" y="22" font-size="14" font-weight="bold">hedge try: p50 (thin) and p99 (thick) per time block</text>`+"\n", left)
	for d := ly0; d <= ly1; d++ {
		y := py(math.Pow(10, d))
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+pw, y)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-6, y, fmtDur(time.Duration(math.Pow(10, d))))
	}
	for k := 0; k <= 5; k++ {
		t := xmax * float64(k) / 5
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%.1fs</text>`+"\n", px(t), top+ph+18, t)
	}
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">time since measuring began</text>`+"\n", left+pw/2, height-10)
	palette := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}
	for i, l := range lines {
		col := palette[i%len(palette)]
		var p50, p99 []string
		for _, p := range l {
			p50 = append(p50, fmt.Sprintf("%.1f,%.1f", px(p.t), py(p.p50)))
			p99 = append(p99, fmt.Sprintf("%.1f,%.1f", px(p.t), py(p.p99)))
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1" points="%s"/>`+"\n", col, strings.Join(p50, " "))
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2.4" points="%s"/>`+"\n", col, strings.Join(p99, " "))
		ly := top + 10 + 20*i
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", left+pw+12, ly, left+pw+36, ly, col)
		fmt.Fprintf(w, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", left+pw+42, ly, html.EscapeString(r.Arms[i].Name))
	}
	_, err := w.WriteString("</svg>\n")
	return err
}

// notSentText lists the hedges an arm did not send by rule, most first.
func notSentText(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", notSentNames[k], m[k])
	}
	return strings.Join(parts, ", ")
}

// notSentNames says what each key of ArmResult.NotSent means.
var notSentNames = map[string]string{
	hedgeset.ReasonBudget:   "budget spent",
	hedgeset.ReasonInFlight: "too many hedges in flight",
	hedgeset.ReasonBusy:     "no spare capacity",
	hedgeset.ReasonPayoff:   "not paying",
	hedgeset.ReasonHead:     "held for the head wait",
	hedgeset.ReasonDeadline: "too close to the deadline",
	hedgeset.ReasonReplicas: "every replica had a copy",
	hedgeset.ReasonFanOut:   "fan-out budget spent",
}

func notSentCell(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	return notSentText(m)
}

func fmtDelay(d time.Duration) string {
	if d <= 0 {
		return "none yet"
	}
	return fmtDur(d)
}
