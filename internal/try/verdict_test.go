package try

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/drill"
	"github.com/tailcut/hedge/quantile"
)

// TAIL CUT needs the whole interval of the ratio below 1, not its low end:
// a point cut of 20% whose interval still holds 1 could be chance.
func TestVerdictTailCutNeedsWholeInterval(t *testing.T) {
	res := &Result{LoadLimit: 0.25, MinCut: 0.1}
	base := &ArmResult{Name: "none", lat: make([]int64, 1000), P99: Estimate{Value: 100 * time.Millisecond}}
	for _, c := range []struct {
		ratio [3]float64
		want  drill.Outcome
	}{
		{[3]float64{0.8, 0.6, 1.05}, NotSignificant}, // holds 1 and a cut of 10%
		{[3]float64{0.8, 0.6, 1.0}, NotSignificant},  // reaches 1
		{[3]float64{0.8, 0.6, 0.99}, drill.TailCut},  // wholly below 1
		{[3]float64{0.95, 0.91, 1.2}, drill.NoTailGain},
	} {
		ar := &ArmResult{Name: "default", lat: make([]int64, 1000), Hedged: 50, Hedges: 50, ExtraLoad: 0.05,
			P99: Estimate{Value: time.Duration(c.ratio[0] * float64(100*time.Millisecond)), Ratio: c.ratio[0], RatioLo: c.ratio[1], RatioHi: c.ratio[2]}}
		if got, why := verdict(res, ar, false, base); got != c.want {
			t.Errorf("p99 ratio %.2f (%.2f-%.2f): %s (%s), want %s", c.ratio[0], c.ratio[1], c.ratio[2], got, why, c.want)
		}
	}
}

// interval is the central 95% of the resamples: on 0..1000, the values at
// 2.5% and 97.5%.
func TestIntervalIs95Percent(t *testing.T) {
	if Confidence != 0.95 {
		t.Fatalf("Confidence = %g: the reports and docs say 95%%", Confidence)
	}
	xs := make([]float64, 1001)
	for i := range xs {
		xs[len(xs)-1-i] = float64(i) // unsorted: interval sorts
	}
	xs = append(xs, math.NaN(), math.Inf(1)) // skipped
	if lo, hi := interval(xs); lo != 25 || hi != 975 {
		t.Errorf("interval of 0..1000 = %g to %g, want 25 to 975", lo, hi)
	}
}

// The bootstrap's 95% interval of a median matches the exact one. With
// every latency in a block of its own, a resample draws n latencies with
// replacement, and its median is at most the j-th smallest when at least
// k = Rank(0.5, n) of the n draws are: the binomial's tail, P(Bin(n, j/n)
// >= k). The interval's ends must be where that reaches 2.5% and 97.5%,
// within three standard errors of the resampling (a 90% interval's ends
// are five ranks further in).
func TestBootstrapIntervalExact(t *testing.T) {
	const n, resamples = 1000, 10000
	ar := &ArmResult{Name: "none"}
	for j := 1; j <= n; j++ {
		ar.lat = append(ar.lat, int64(j)) // the j-th smallest is j
		ar.blocks = append(ar.blocks, j-1)
	}
	res := &Result{Arms: []*ArmResult{ar}, Blocks: n, Resamples: resamples, Seed: 7}
	(&runner{}).bootstrap(res, 0)

	k := quantile.Rank(0.5, n)
	cdf := func(j int) float64 { return binomialTail(n, float64(j)/n, k) }
	se := func(p float64) float64 { return math.Sqrt(p * (1 - p) / resamples) }
	for _, c := range []struct {
		name string
		p    float64
		got  time.Duration
	}{
		{"low end", 0.025, ar.P50.Lo},
		{"high end", 0.975, ar.P50.Hi},
	} {
		// The ranks whose CDF lies within three standard errors of p,
		// and the next one up (the interval takes a resampled value,
		// the first whose empirical CDF reaches p).
		first, last := -1, -1
		for j := 1; j <= n; j++ {
			if f := cdf(j); math.Abs(f-c.p) <= 3*se(c.p) || (first < 0 && f > c.p) {
				if first < 0 {
					first = j
				}
				last = j
			}
			if cdf(j-1) > c.p+3*se(c.p) {
				break
			}
		}
		if got := int(c.got); got < first || got > last {
			t.Errorf("%s of the p50's interval: rank %d, want %d to %d (the exact %g point of the bootstrap)", c.name, got, first, last, c.p)
		}
	}
}

// binomialTail returns P(X >= k) for X ~ Bin(n, p).
func binomialTail(n int, p float64, k int) float64 {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	lgN, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for x := k; x <= n; x++ {
		a, _ := math.Lgamma(float64(x + 1))
		b, _ := math.Lgamma(float64(n - x + 1))
		sum += math.Exp(lgN - a - b + float64(x)*math.Log(p) + float64(n-x)*math.Log1p(-p))
	}
	return sum
}

// The verdicts judge by the objective percentile: a cut at the p99.9
// alone is a TAIL CUT by the p99.9 and none by the p99.
func TestVerdictObjective(t *testing.T) {
	base := &ArmResult{Name: "none", lat: make([]int64, 5000), P99: Estimate{Value: 100 * time.Millisecond}, P999: Estimate{Value: time.Second}}
	ar := &ArmResult{Name: "default", lat: make([]int64, 5000), Hedged: 250, Hedges: 250, ExtraLoad: 0.05,
		P99:  Estimate{Value: 100 * time.Millisecond, Ratio: 1, RatioLo: 0.95, RatioHi: 1.05},
		P999: Estimate{Value: 200 * time.Millisecond, Ratio: 0.2, RatioLo: 0.1, RatioHi: 0.5}}
	for _, c := range []struct {
		objective string
		want      drill.Outcome
	}{
		{"", drill.NoTailGain},
		{"p99", drill.NoTailGain},
		{"p99.9", drill.TailCut},
	} {
		res := &Result{LoadLimit: 0.25, MinCut: 0.1, Objective: c.objective}
		got, why := verdict(res, ar, false, base)
		if got != c.want {
			t.Errorf("objective %q: %s (%s), want %s", c.objective, got, why, c.want)
		}
		if name := objectiveOf(c.objective).name; !strings.HasPrefix(why, name+" ") {
			t.Errorf("objective %q: why %q does not name the %s", c.objective, why, name)
		}
	}
	// A p99.9 needs two latencies above it an arm: 2,000 requests.
	short := &ArmResult{Name: "default", lat: make([]int64, 1999), Hedged: 250, P999: ar.P999}
	if got, why := verdict(&Result{LoadLimit: 0.25, MinCut: 0.1, Objective: "p99.9"}, short, false, base); got != NotSignificant || !strings.Contains(why, "at least 2000") {
		t.Errorf("1,999 requests by the p99.9: %s (%s), want %s, at least 2000", got, why, NotSignificant)
	}
}

func TestObjectiveValidate(t *testing.T) {
	o := Options{Replicas: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}, Targets: gets("/"), Arms: arms(t, "none,default")}
	if d := o.Defaults(); d.Objective != "p99" || d.Validate() != nil {
		t.Errorf("default objective %q, %v; want p99, valid", d.Objective, d.Validate())
	}
	for _, good := range []string{"p50", "p90", "p99", "p99.9"} {
		o.Objective = good
		if err := o.Defaults().Validate(); err != nil {
			t.Errorf("objective %s: %v", good, err)
		}
	}
	for _, bad := range []string{"p95", "99", "p99.90", "P99", "median"} {
		o.Objective = bad
		err := o.Defaults().Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "p50, p90, p99, p99.9") {
			t.Errorf("objective %q: %v, want ErrInvalid naming the choices", bad, err)
		}
	}
}

// An arm that hedged about nothing gets no verdict on hedging, and the
// summary and report.md warn of it, loudly.
func TestFewHedgesWarned(t *testing.T) {
	_, urls := startReplicas(t, 2, nil)
	a := arms(t, "none,default")
	a = append(a, Arm{Name: "never", Doc: "hedges after an hour", Config: constantConfig(hedge.Config{Delay: hedge.Fixed(time.Hour)})})
	o := Options{Replicas: urls, Targets: gets("/w"), Arms: a, Rate: 200, Duration: 4 * time.Second, Seed: 6, Resamples: 200}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	never := armByName(t, res, "never")
	if never.Hedged != 0 || never.Verdict != FewHedges {
		t.Fatalf("never: %d hedged, verdict %s (%s); want none and %s", never.Hedged, never.Verdict, never.Why, FewHedges)
	}
	files := outputs(t, res)
	if s := files["summary"]; !strings.Contains(s, "WARNING: Arm never hedged 0 of") {
		t.Errorf("the summary does not warn of arm never:\n%s", s)
	}
	if s := files["report.md"]; !strings.Contains(s, "**Warning**: arm never hedged 0 of") {
		t.Errorf("report.md does not warn of arm never:\n%s", s)
	}
	if s := files["results.json"]; !strings.Contains(s, `"warnings"`) || !strings.Contains(s, `"objective": "p99"`) {
		t.Errorf("results.json lacks the warnings or the objective")
	}
}

// The warning of an arm that hedged about nothing says why, and what to
// try instead.
func TestFewHedgesWarning(t *testing.T) {
	for _, c := range []struct {
		ar   ArmResult
		want string
	}{
		{ArmResult{Name: "default"}, "still being learnt"},
		{ArmResult{Name: "default", DelayAtStart: time.Millisecond, DelayAtEnd: time.Millisecond, NotSent: map[string]int64{"head": 9, "budget": 1}}, "its rules kept back held for the head wait 9, budget spent 1. To see what hedging without them does, add an arm such as plain-p95"},
		{ArmResult{Name: "plain-p95", DelayAtStart: time.Millisecond, DelayAtEnd: time.Millisecond, NotSent: map[string]int64{"budget": 4}}, "its budget kept back budget spent 4"},
		{ArmResult{Name: "fixed:1s", DelayAtStart: time.Second, DelayAtEnd: time.Second}, "nearly every request ended before it"},
	} {
		if w := fewHedgesWarning(&c.ar); !strings.Contains(w, c.want) || !strings.HasPrefix(w, "arm "+c.ar.Name+" hedged 0 of 0 requests") {
			t.Errorf("%s, delay %v, not sent %v: %q, want %q", c.ar.Name, c.ar.DelayAtEnd, c.ar.NotSent, w, c.want)
		}
	}
}

// A cut at the p99.9 alone, beyond chance, is noted when the verdict is
// by the p99.
func TestOtherObjectivesNoted(t *testing.T) {
	base := &ArmResult{Name: "none", lat: make([]int64, 5000), P99: Estimate{Value: 100 * time.Millisecond}, P999: Estimate{Value: time.Second}}
	ar := &ArmResult{Name: "default", lat: make([]int64, 5000), Hedged: 250, Hedges: 250, ExtraLoad: 0.05,
		P99:  Estimate{Value: 100 * time.Millisecond, Ratio: 1, RatioLo: 0.95, RatioHi: 1.05},
		P999: Estimate{Value: 200 * time.Millisecond, Ratio: 0.2, RatioLo: 0.1, RatioHi: 0.5}}
	res := &Result{LoadLimit: 0.25, MinCut: 0.1, Objective: "p99"}
	ar.Verdict, ar.Why = verdict(res, ar, false, base)
	notes := otherObjectives(res, ar, base)
	if len(notes) != 1 || !strings.Contains(notes[0], "Arm default is NO TAIL GAIN by the p99, but by the p99.9 it cut the tail") || !strings.Contains(notes[0], "--objective p99.9") {
		t.Errorf("notes %q, want one on the p99.9's cut", notes)
	}
	res.Objective = "p99.9"
	ar.Verdict, ar.Why = verdict(res, ar, false, base)
	if notes := otherObjectives(res, ar, base); len(notes) != 0 {
		t.Errorf("a TAIL CUT by the objective: notes %q, want none", notes)
	}
}
