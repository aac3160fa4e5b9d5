package advise

import (
	"context"
	"fmt"
	"go/format"
	"strings"
	"testing"
	"time"
)

// summaryLines is the report's short form, a line each, and checks that
// the full text begins with it.
func summaryLines(t *testing.T, rep *Report) []string {
	t.Helper()
	var short, full strings.Builder
	if err := rep.WriteSummary(&short); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteText(&full); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(full.String(), short.String()+"\nDetails\n") {
		t.Errorf("the full report does not begin with the summary, then its details:\n%s", full.String())
	}
	return strings.Split(strings.TrimSuffix(short.String(), "\n"), "\n")
}

// tableLine returns the summary's table line that begins with name.
func tableLine(lines []string, name string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, "  "+name+"  ") {
			return l
		}
	}
	return ""
}

// words is s with every run of spaces one space.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// The summary, for a terminal, is short: the headline, the sample, where
// its slowness lives, and one table of no hedging, the library's default
// and the recommendation, with the numbers of the prediction that leads
// the headline. The tables of every delay, what each prediction assumes
// and the configuration's code are details, in the full text only.
func TestSummaryIsShort(t *testing.T) {
	s := slowTailSample(20_000)
	rep, err := Advise(context.Background(), s, Options{Load: 0.5, Requests: 20_000, Percentiles: []float64{50, 60, 70, 80, 90, 95, 99, 99.9}})
	if err != nil {
		t.Fatal(err)
	}
	p := lead(rep)
	if p == nil || rep.Recommended == nil || rep.Recommended.Predicted == nil {
		t.Fatalf("lead %v, recommendation %+v (%s): want both, the recommendation predicted with the rules", p, rep.Recommended, rep.NoAdvice)
	}
	lines := summaryLines(t, rep)
	if len(lines) > 30 {
		t.Errorf("the summary has %d lines, want at most 30:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	head := rep.Headline()
	if len(lines) < len(head) || strings.Join(lines[:len(head)], "\n") != strings.Join(head, "\n") {
		t.Errorf("the summary does not begin with the headline:\n%s", strings.Join(lines, "\n"))
	}
	text := strings.Join(lines, "\n")
	for _, no := range []string{"assumes:", "hedge.Config{", "hedgingPolicy", "Independent copies"} {
		if strings.Contains(text, no) {
			t.Errorf("the summary holds the details' %q:\n%s", no, text)
		}
	}
	if !strings.Contains(text, fmt.Sprintf("Sample: %d latencies", s.Len())) || !strings.Contains(text, "Where the slowness lives: ") {
		t.Errorf("the summary lacks the sample or the diagnosis:\n%s", text)
	}
	row := func(o Outcome) string {
		return fmt.Sprintf("%.1f%%  %v (%s)  %v (%s)", 100*o.HedgeRate, round(o.P99), ratio(o.P99Ratio), round(o.P999), ratio(o.P999Ratio))
	}
	for _, c := range []struct {
		name, want string
	}{
		{"none", fmt.Sprintf("%v  %v", round(p.Today.P99), round(p.Today.P999))},
		{"the library's default", row(*p.Default)},
		{"recommended", row(*rep.Recommended.Predicted)},
	} {
		if l := tableLine(lines, c.name); !strings.Contains(words(l), words(c.want)) {
			t.Errorf("the %s line %q, want %q", c.name, l, c.want)
		}
	}

	// Without a load, no prediction applies the library's rules: the
	// table shows the recommendation as plain hedging, beside no hedging
	// in the prediction that chose it.
	rep, err = Advise(context.Background(), s, Options{Percentiles: []float64{90, 95}, Sizes: []Sizes{}})
	if err != nil {
		t.Fatal(err)
	}
	if lead(rep) != nil || rep.Recommended == nil {
		t.Fatalf("without a load: recommendation %+v (%s); want one, and no prediction of the default", rep.Recommended, rep.NoAdvice)
	}
	lines = summaryLines(t, rep)
	if len(lines) > 30 || tableLine(lines, "the library's default") != "" {
		t.Errorf("without a load, the summary:\n%s\nwant at most 30 lines and no default line", strings.Join(lines, "\n"))
	}
	if l := tableLine(lines, "recommended, plain"); !strings.Contains(words(l), words(row(rep.Recommended.Outcome))) {
		t.Errorf("without a load, the recommendation's line %q, want %q", l, row(rep.Recommended.Outcome))
	}
}

// The configuration's Go code is as gofmt writes it, whatever the
// delay's width and whether the rules are on.
func TestGoConfigIsFormatted(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, 2480 * time.Microsecond, 1234567 * time.Nanosecond} {
		for _, budget := range []bool{false, true} {
			for _, plain := range []bool{false, true} {
				o := Outcome{Choice: Choice{Label: "p90", Percentile: 90, Delay: d}, Budget: budget}
				src := GoConfig(o, plain)
				got, err := format.Source([]byte(src))
				if err != nil {
					t.Fatalf("%v: %v\n%s", d, err, src)
				}
				if string(got) != src {
					t.Errorf("delay %v, budget %v, plain %v: GoConfig wrote\n%s\ngofmt writes\n%s", d, budget, plain, src, got)
				}
			}
		}
	}
}
