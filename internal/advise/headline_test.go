package advise

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/drill"
	"github.com/tailcut/hedge/internal/sim"
)

// slowTailSample is expSample with every 50th request twenty times
// slower: a tail that hedging cuts.
func slowTailSample(n int) *Sample {
	s := expSample(n, time.Millisecond)
	for i := range s.Latencies {
		if i%50 == 7 {
			s.Latencies[i] *= 20
		}
	}
	return s
}

// firstLines returns the report's text up to its details.
func firstLines(t *testing.T, rep *Report) []string {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() && sc.Text() != "" {
		lines = append(lines, sc.Text())
	}
	return lines
}

// The report leads with what the library's default will do: its first
// line is the default line of the prediction that applies the library's
// rules, with that line's own numbers, and the recommendation follows.
// Without a load or send times, no prediction applies the rules, and the
// first line says so and what to give.
func TestHeadlineLeadsWithTheDefault(t *testing.T) {
	s := slowTailSample(20_000)
	rep, err := Advise(context.Background(), s, Options{Load: 0.5, Requests: 20_000, Percentiles: []float64{90, 95}, Sizes: []Sizes{Fresh, Shared}})
	if err != nil {
		t.Fatal(err)
	}
	var fresh *Prediction
	for i := range rep.Predictions {
		if rep.Predictions[i].Kind == "queue-fresh" {
			fresh = &rep.Predictions[i]
		}
	}
	if fresh == nil || fresh.Default == nil {
		t.Fatal("no fresh queueing estimate with a default line")
	}
	lines := firstLines(t, rep)
	d := fresh.Default
	want := fmt.Sprintf("hedged %.1f%%, p99 %v (%.2fx)", 100*d.HedgeRate, round(d.P99), d.P99Ratio)
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "The library's default (the zero hedge.Config") || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "queueing, fresh sizes") {
		t.Fatalf("first line %q; want the fresh estimate's default line, %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "Recommended: ") {
		t.Errorf("second line %q; want the recommendation", lines[1])
	}
	if len(lines) > 4 {
		t.Errorf("the headline has %d lines, want it short:\n%s", len(lines), strings.Join(lines, "\n"))
	}

	rep, err = Advise(context.Background(), s, Options{Percentiles: []float64{90}})
	if err != nil {
		t.Fatal(err)
	}
	lines = firstLines(t, rep)
	if !strings.HasPrefix(lines[0], "The library's default (the zero hedge.Config): not predicted here") || !strings.Contains(lines[0], "--load") {
		t.Errorf("without a load, first line %q; want the default first, saying what it needs", lines[0])
	}
	if rep.Recommended == nil || rep.Recommended.Predicted != nil || !strings.Contains(lines[1], "at most that often") {
		t.Errorf("without a load, recommendation %+v, line %q; want one unpredicted with the rules, its rate an upper bound", rep.Recommended, lines[1])
	}
}

// The recommended configuration is predicted as the library runs it: its
// prediction is a simulation of that Config with the library's rules on
// (the zero MaxReplicaLoad and PayoffWinRate), on the same script as the
// rows, and not the rows' plain hedging. Here the two differ: at load 0.5
// the spare-capacity rule holds back hedges that find every replica busy.
func TestRecommendationPredictedWithTheRules(t *testing.T) {
	s := slowTailSample(20_000)
	o := Options{Load: 0.5, Requests: 20_000, Percentiles: []float64{95}, Sizes: []Sizes{Fresh}}
	rep, err := Advise(context.Background(), s, o)
	if err != nil {
		t.Fatal(err)
	}
	rec := rep.Recommended
	if rec == nil || rec.Predicted == nil || rec.PredictedKind != "queue-fresh" {
		t.Fatalf("recommendation %+v (%s); want one predicted by the fresh queueing estimate", rec, rep.NoAdvice)
	}
	// The Config the library runs, written out here: the delay, the
	// budget, two copies, and the rules as the zero Config has them.
	c := rec.Outcome.Choice
	cfg := hedge.Config{MaxAttempts: 2}
	if rec.Outcome.Budget {
		cfg.Budget = hedge.DefaultBudget()
	} else {
		cfg.NoBudget = true
	}
	e := newEmpirical(s.sorted())
	mean := e.mean()
	cfg.Delay = hedge.Fixed(time.Duration(math.Round(float64(c.Delay) / mean * float64(sim.Unit))))
	var sm sim.Simulator
	want, err := runQueue(context.Background(), &sm, *rep.Queue, stallWorld{}, rep.Queue.script(e, Fresh), mean, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Predicted.HedgeRate; got != want.hedged || rec.Predicted.P99 != want.p.P99 {
		t.Errorf("predicted hedge rate %.4f, p99 %v; a simulation of %v with the rules on gives %.4f, %v", got, rec.Predicted.P99, c.Label, want.hedged, want.p.P99)
	}
	var plain *Outcome
	for i, r := range rep.Predictions[1].Rows {
		if r.Choice == c && r.Budget == rec.Outcome.Budget {
			plain = &rep.Predictions[1].Rows[i]
		}
	}
	if plain == nil || plain.HedgeRate == rec.Predicted.HedgeRate {
		t.Errorf("the rows' plain hedging %+v and the prediction with the rules %+v agree: the test cannot tell them apart", plain, rec.Predicted)
	}
}

// The headline says to keep the default when the recommendation, as the
// library runs it, is no TAIL CUT or cuts the objective's percentile by
// less than TailMargin beyond the default's line; otherwise it leads
// with the default and recommends without that advice.
func TestHeadlineKeepsTheDefault(t *testing.T) {
	out := func(p99 float64, v drill.Outcome) Outcome {
		return Outcome{Choice: Choice{Label: "p95", Percentile: 95, Delay: 10 * time.Millisecond}, Budget: true, HedgeRate: 0.02, P99Ratio: p99, P999Ratio: p99, Verdict: v}
	}
	for _, c := range []struct {
		name      string
		def, pred Outcome
		keep      bool
	}{
		{"clearly better", out(0.8, drill.TailCut), out(0.6, drill.TailCut), false},
		{"within the margin", out(0.8, drill.TailCut), out(0.77, drill.TailCut), true},
		{"no tail cut with the rules", out(1.0, drill.NoTailGain), out(0.97, drill.NoTailGain), true},
		{"worse than the default", out(0.5, drill.TailCut), out(0.7, drill.TailCut), true},
	} {
		def, pred := c.def, c.pred
		def.Choice = Choice{Label: "default", Delay: 12 * time.Millisecond}
		rep := &Report{
			Predictions: []Prediction{{Kind: "independent"}, {Kind: "queue-fresh", Default: &def}},
			Recommended: &Recommendation{Outcome: pred, Kind: "independent", Predicted: &pred, PredictedKind: "queue-fresh"},
		}
		lines := rep.Headline()
		said := strings.Contains(strings.Join(lines, "\n"), "keep the default")
		if rep.KeepDefault() != c.keep || said != c.keep || !strings.HasPrefix(lines[0], "The library's default") {
			t.Errorf("%s: KeepDefault %v, headline says to keep it %v, want %v:\n%s", c.name, rep.KeepDefault(), said, c.keep, strings.Join(lines, "\n"))
		}
	}
}
