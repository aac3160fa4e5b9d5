package advise

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// WriteSummary writes the report's short form, for a terminal: the
// headline (Headline), then a few lines. They give the sample and its
// percentiles, the notes on the input, where the slowness lives and why,
// and a table of what no hedging, the library's default and the recommendation
// are predicted to do: hedge rate, p99 and p99.9 with their ratios, extra
// work and verdict. The table's lines come from one prediction, the one
// that leads the headline. WriteText writes the same, then the details.
func (r *Report) WriteSummary(w io.Writer) error {
	var b strings.Builder
	r.writeSummary(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSummary writes WriteSummary's text to b.
func (r *Report) writeSummary(b *strings.Builder) {
	for _, l := range r.Headline() {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(b, "\nSample: %d latencies (%s): p50 %v, p99 %v, p99.9 %v, mean %v.\n",
		r.N, r.Source, round(r.Today.P50), round(r.Today.P99), round(r.Today.P999), round(r.Mean))
	for _, n := range r.Notes {
		fmt.Fprintf(b, "Note: %s\n", n)
	}
	fmt.Fprintf(b, "Where the slowness lives: %s.\n", r.Diagnosis.Where)
	for _, s := range r.Diagnosis.Reasons {
		fmt.Fprintf(b, "  - %s\n", s)
	}

	// The table: the leading prediction's lines, or, when none applies
	// the library's rules, the recommendation's plain-hedging row beside
	// no hedging in its own prediction.
	type line struct {
		name, delay string
		o           *Outcome
	}
	var (
		caption string
		today   Percentiles
		lines   []line
	)
	rec := r.Recommended
	if p := lead(r); p != nil {
		caption, today = capitalize(kindName(p.Kind)), p.Today
		lines = append(lines, line{"the library's default", fmt.Sprintf("about %v", round(p.Default.Choice.Delay)), p.Default})
		if rec != nil && rec.Predicted != nil {
			lines = append(lines, line{"recommended", delayOf(*rec.Predicted), rec.Predicted})
		}
	} else if rec != nil {
		caption, today = "Plain hedging, "+kindName(rec.Kind), r.Today
		for _, p := range r.Predictions {
			if p.Kind == rec.Kind {
				today = p.Today
			}
		}
		lines = append(lines, line{"recommended, plain", delayOf(rec.Outcome), &rec.Outcome})
	}
	if lines == nil {
		return
	}
	fmt.Fprintf(b, "\n%s; ratios to no hedging there:\n", caption)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  hedging\tdelay\thedged\tp99\tp99.9\textra work\tverdict")
	fmt.Fprintf(tw, "  none\t-\t-\t%v\t%v\t-\t-\n", round(today.P99), round(today.P999))
	for _, l := range lines {
		o := l.o
		fmt.Fprintf(tw, "  %s\t%s\t%.1f%%\t%v (%s)\t%v (%s)\t%+.1f%%\t%s\n", l.name, l.delay,
			100*o.HedgeRate, round(o.P99), ratio(o.P99Ratio), round(o.P999), ratio(o.P999Ratio), 100*o.ExtraWork, o.Verdict)
	}
	tw.Flush()
}

// delayOf is an outcome's delay with its label, such as "2.48ms (p90)".
func delayOf(o Outcome) string {
	d := fmt.Sprint(round(o.Choice.Delay))
	if o.Choice.Label != "" && o.Choice.Label != d {
		d += " (" + o.Choice.Label + ")"
	}
	return d
}

// capitalize returns s with its first letter upper case.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}
