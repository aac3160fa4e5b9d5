package fleetbench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable writes the rows as a Markdown table, with the goals under
// it.
func WriteTable(w io.Writer, res *Result) error {
	o := res.Options
	var b strings.Builder
	attempt := "as long as the store takes"
	if o.Attempt > 0 {
		attempt = o.Attempt.String()
	}
	fmt.Fprintf(&b, "%d watchers in %d processes, %g calls/s each, jitter %v, %d pushes a scenario, a push attempt waits %s; took %s\n\n",
		o.Watchers, o.Procs, o.Rate, o.Jitter, o.Pushes, attempt, res.Elapsed)
	b.WriteString("| source | scenario | pushes | applied | p50 | p99 | max | store accepted | max after accepted | hedges after off (of calls begun after it; calls) | invalid applied | left behind |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Rows {
		applied, p50, p99, mx, acc, after := "—", "—", "—", "—", "—", "—"
		if r.Invalid == nil {
			applied = fmt.Sprintf("%d/%d", r.Applies, r.Applies+r.Missed)
			p50, p99, mx, acc, after = ms(r.P50), ms(r.P99), ms(r.Max), ms(r.Accepted), ms(r.AfterAccepted)
		}
		off := "—"
		if r.HedgesAfterOff != nil {
			off = fmt.Sprintf("%d (%d; %d)", *r.HedgesAfterOff, *r.HedgesBegunAfterOff, *r.CallsAfterOff)
		}
		inv := "—"
		if r.InvalidApplied != nil {
			inv = fmt.Sprintf("%d of %d", *r.InvalidApplied, *r.Invalid)
		}
		behind := "—"
		if r.Behind != nil {
			behind = fmt.Sprint(*r.Behind)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Source, r.Scenario, r.Pushes, applied, p50, p99, mx, acc, after, off, inv, behind)
	}
	b.WriteString("\nTimes run from a push's start to each watcher's apply, over every watcher of every push;\n")
	b.WriteString("max is the time until every watcher applied the slowest push. The store accepted a push\n")
	b.WriteString("when etcd's Put returned (retries included) or the symlink was swapped.\n")
	for _, r := range res.Rows {
		if r.Listed != nil {
			fmt.Fprintf(&b, "%s: after the whole store restarted, it listed %d of %d pods on the latest version (hedge policy status).\n", r.Source, *r.Listed, o.Watchers)
		}
		if r.HedgesOn != nil {
			fmt.Fprintf(&b, "%s: %d hedges were sent in the %v before the kill switch.\n", r.Source, *r.HedgesOn, o.Hold)
		}
	}
	b.WriteString("Goals: p99 under 1 s and max under 5 s through a leader loss; 0 hedges after off;\n")
	b.WriteString("0 invalid documents applied; 0 watchers left behind once the store is back.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes res as indented JSON.
func WriteJSON(w io.Writer, res *Result) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(res)
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
}
