package advise

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/internal/drill"
)

// expSample is n exact quantiles of Exp(mean): the i-th is the
// (i+0.5)/n quantile.
func expSample(n int, mean time.Duration) *Sample {
	s := &Sample{Source: "exp"}
	for i := range n {
		x := -math.Log(1 - (float64(i)+0.5)/float64(n))
		s.Latencies = append(s.Latencies, time.Duration(x*float64(mean)))
	}
	return s
}

// TestIndependentExponential checks the exact computation against the
// closed form: with X ~ Exp(1) and delay d, P(L > t) = e^-t for t < d and
// e^-(2t-d) above, so the p99 is (d + ln 100)/2 when that is above d; a
// hedge goes with probability e^-d; and by memorylessness the work is
// unchanged.
func TestIndependentExponential(t *testing.T) {
	s := expSample(50_000, time.Millisecond)
	rep, err := Advise(context.Background(), s, Options{Percentiles: []float64{90}, Delays: []time.Duration{time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Predictions) != 1 || rep.Queue != nil {
		t.Fatalf("%d predictions: without a load only the independent one runs", len(rep.Predictions))
	}
	for _, o := range rep.Predictions[0].Rows {
		if o.Budget {
			continue
		}
		d := float64(o.Choice.Delay) / float64(time.Millisecond)
		wantP99 := (d + math.Log(100)) / 2
		if got := float64(o.P99) / float64(time.Millisecond); math.Abs(got/wantP99-1) > 0.005 {
			t.Errorf("delay %v: p99 %.4f ms, want %.4f", o.Choice.Delay, got, wantP99)
		}
		if got, want := o.HedgeRate, math.Exp(-d); math.Abs(got-want) > 0.001 {
			t.Errorf("delay %v: hedge rate %.4f, want %.4f", o.Choice.Delay, got, want)
		}
		if math.Abs(o.ExtraWork) > 0.002 {
			t.Errorf("delay %v: extra work %.4f, want 0 (memoryless)", o.Choice.Delay, o.ExtraWork)
		}
	}
}

// TestBudgetCaps checks that the default budget caps the hedge rate near
// 10% when half the requests qualify.
func TestBudgetCaps(t *testing.T) {
	rep, err := Advise(context.Background(), expSample(50_000, time.Millisecond), Options{Percentiles: []float64{50}})
	if err != nil {
		t.Fatal(err)
	}
	rows := rep.Predictions[0].Rows
	if rows[0].HedgeRate < 0.49 || rows[0].Verdict != drill.ExcessLoad {
		t.Errorf("no budget at the p50: hedge rate %.3f, verdict %s; want about 0.5, EXCESS LOAD", rows[0].HedgeRate, rows[0].Verdict)
	}
	if r := rows[1].HedgeRate; r < 0.099 || r > 0.101 {
		t.Errorf("default budget at the p50: hedge rate %.4f, want 0.1", r)
	}
}

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		o    Outcome
		want drill.Outcome
	}{
		{Outcome{HedgeRate: 0.3, P99Ratio: 0.2, P999Ratio: 0.2}, drill.ExcessLoad},
		{Outcome{HedgeRate: 0.05, ExtraWork: 0.3, P99Ratio: 0.2, P999Ratio: 0.2}, drill.ExcessLoad},
		{Outcome{HedgeRate: 0.05, P99Ratio: 0.5, P999Ratio: 0.9}, drill.TailCut},
		{Outcome{HedgeRate: 0.05, P99Ratio: 0.5, P999Ratio: 1.2}, drill.NoTailGain},
		{Outcome{HedgeRate: 0.05, P99Ratio: 0.97, P999Ratio: 0.5}, drill.NoTailGain},
	} {
		if got := Judge(tt.o); got != tt.want {
			t.Errorf("Judge(%+v) = %s, want %s", tt.o, got, tt.want)
		}
	}
}

func TestAdviseRefusesSmallSample(t *testing.T) {
	_, err := Advise(context.Background(), expSample(999, time.Millisecond), Options{})
	if !errors.Is(err, ErrTooSmall) {
		t.Fatalf("error %v, want ErrTooSmall", err)
	}
	_, err = Advise(context.Background(), expSample(2000, time.Millisecond), Options{Load: 1.5, Percentiles: []float64{0}})
	if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "percentile 0") || !strings.Contains(err.Error(), "load 1.5") {
		t.Fatalf("error %v, want every mistake", err)
	}
}

// TestServiceConfigRoundTrip checks that the snippet hedgegrpc parses to
// the recommended delay, with and without a method name.
func TestServiceConfigRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{12500 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second, 1234567 * time.Nanosecond} {
		for _, n := range []struct{ svc, method, full string }{{"pkg.Items", "Get", "/pkg.Items/Get"}, {"", "", "/any.Svc/Any"}} {
			js := ServiceConfigJSON(d, n.svc, n.method)
			sc, err := hedgegrpc.ParseServiceConfig(js)
			if err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			if len(sc.Warnings) > 0 {
				t.Errorf("%s: warnings %v", js, sc.Warnings)
			}
			hp := sc.Lookup(n.full)
			if hp == nil || hp.Delay != d || hp.MaxAttempts != 2 {
				t.Fatalf("%s: policy %v, want delay %v and 2 attempts", js, hp, d)
			}
			if cfg := hp.Config(hedge.Config{Budget: hedge.DefaultBudget()}); cfg.Delay != hedge.Fixed(d) {
				t.Errorf("config delay %v, want Fixed(%v)", cfg.Delay, d)
			}
			if _, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{Budget: hedge.DefaultBudget()}); err != nil {
				t.Errorf("NewFromServiceConfig: %v", err)
			}
		}
	}
}

// TestReport renders a full report: the Go snippet parses, the SVG is
// well-formed XML, and the recommended row is TAIL CUT.
func TestReport(t *testing.T) {
	s := expSample(20_000, time.Millisecond)
	// A slow tail: every 50th request twenty times slower.
	for i := range s.Latencies {
		if i%50 == 7 {
			s.Latencies[i] *= 20
		}
	}
	rep, err := Advise(context.Background(), s, Options{Load: 0.3, Requests: 10_000, Percentiles: []float64{90, 99}, Delays: []time.Duration{5 * time.Millisecond}, GRPCService: "pkg.Items", GRPCMethod: "Get"})
	if err != nil {
		t.Fatal(err)
	}
	// The slow tail is a plateau the stalled estimate fits as stalls.
	if len(rep.Predictions) != 4 || rep.Predictions[3].Kind != "queue-stalls" {
		t.Fatalf("%d predictions, want independent, fresh, shared and stalls", len(rep.Predictions))
	}
	if rep.Recommended == nil || rep.Recommended.Outcome.Verdict != drill.TailCut || !rep.Recommended.Outcome.Budget {
		t.Fatalf("recommendation %+v (%s)", rep.Recommended, rep.NoAdvice)
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{"Independent copies", "Queueing, fresh sizes", "Queueing, shared sizes", "Queueing, stalling servers", "assumes:", "TAIL CUT", "hedge.Fixed(", `"hedgingDelay"`, "pkg.Items", "cannot tell a slow server from a big request"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	src := "package p\nfunc f() {\n" + GoConfig(rep.Recommended.Outcome, false) + "_, _ = h, err\n}\n"
	if _, err := parser.ParseFile(token.NewFileSet(), "", src, 0); err != nil {
		t.Errorf("Go snippet does not parse: %v\n%s", err, src)
	}
	buf.Reset()
	if err := rep.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed: %v", err)
			}
			break
		}
	}
}

// TestDiagnose checks the three conclusions on built samples.
func TestDiagnose(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	build := func(slowOn func(i int) bool, replica func(i int) string) *Sample {
		s := expSample(10_000, time.Millisecond)
		s.Replicas, s.Times = make([]string, s.Len()), make([]time.Time, s.Len())
		// Spread the quantiles in a fixed pseudo-random order.
		for i := range s.Latencies {
			j := (i * 7919) % s.Len()
			s.Latencies[i], s.Latencies[j] = s.Latencies[j], s.Latencies[i]
		}
		for i := range s.Latencies {
			s.Replicas[i] = replica(i)
			s.Times[i] = t0.Add(time.Duration(i) * time.Millisecond)
			if slowOn(i) {
				s.Latencies[i] = 50 * time.Millisecond
			}
		}
		return s
	}
	three := func(i int) string { return []string{"a", "b", "c"}[i%3] }
	// Stalls: replica a is slow in bursts.
	stalls := build(func(i int) bool { return i%3 == 0 && (i/500)%20 == 3 }, three)
	// Big requests: every 50th request, on any replica, at any time.
	big := build(func(i int) bool { return (i*7)%50 == 1 }, three)
	for _, tt := range []struct {
		name string
		s    *Sample
		want Where
	}{{"stalls", stalls, InServers}, {"big requests", big, InRequests}} {
		dg := diagnose(tt.s, newEmpirical(tt.s.sorted()))
		if dg.Where != tt.want {
			t.Errorf("%s: %v, want %v (%q)", tt.name, dg.Where, tt.want, dg.Reasons)
		}
	}
	rep, err := Advise(context.Background(), big, Options{Percentiles: []float64{90}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != nil || !strings.Contains(rep.NoAdvice, "Do not hedge") {
		t.Errorf("big requests: recommended %+v, no-advice %q: hedging will not help there", rep.Recommended, rep.NoAdvice)
	}
}

// TestSendLagDelaysTheCopy checks that a send lag L predicts what a delay
// d + L predicts on time, in both estimates, while the rows keep the delay
// the user would configure; and that a negative lag is refused.
func TestSendLagDelaysTheCopy(t *testing.T) {
	s := expSample(20_000, time.Millisecond)
	const d, lag = 2 * time.Millisecond, 700 * time.Microsecond
	o := Options{Percentiles: []float64{}, Load: 0.3, Servers: 4, Requests: 20_000, Sizes: []Sizes{Fresh}}
	withLag, onTime := o, o
	withLag.Delays, withLag.SendLag = []time.Duration{d}, lag
	onTime.Delays = []time.Duration{d + lag}
	a, err := Advise(context.Background(), s, withLag)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Advise(context.Background(), s, onTime)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Predictions) != 2 || len(b.Predictions) != 2 {
		t.Fatalf("%d and %d predictions, want the independent and one queueing estimate each", len(a.Predictions), len(b.Predictions))
	}
	for i := range a.Predictions {
		for j, ra := range a.Predictions[i].Rows {
			rb := b.Predictions[i].Rows[j]
			if ra.Choice.Delay != d {
				t.Errorf("%s row %d: delay %v, want the configured %v", a.Predictions[i].Kind, j, ra.Choice.Delay, d)
			}
			if ra.P99 != rb.P99 || ra.P999 != rb.P999 || ra.HedgeRate != rb.HedgeRate || ra.ExtraWork != rb.ExtraWork {
				t.Errorf("%s row %d: with a %v lag %+v, want what a %v delay predicts: %+v", a.Predictions[i].Kind, j, lag, ra, d+lag, rb)
			}
		}
	}
	if !strings.Contains(strings.Join(a.Notes, " "), "after their delay") {
		t.Errorf("notes %q do not mention the send lag", a.Notes)
	}
	o.SendLag = -time.Millisecond
	if _, err := Advise(context.Background(), s, o); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "send lag") {
		t.Errorf("negative lag: %v, want ErrOptions naming the send lag", err)
	}
}

// TestLagPoints checks the log-normal send lag: sorted, positive, its
// median at the given median and its 99th percentile at the given p99
// (within the grid's step); a p99 at or below the median is a constant lag.
func TestLagPoints(t *testing.T) {
	const m, p99 = 50 * time.Microsecond, 1500 * time.Microsecond
	pts := LagPoints(m, p99)
	if len(pts) != 100 || !slices.IsSorted(pts) || pts[0] <= 0 {
		t.Fatalf("%d points, sorted %v, first %v: want 100 sorted positive points", len(pts), slices.IsSorted(pts), pts[0])
	}
	if med := (pts[49] + pts[50]) / 2; med < m*95/100 || med > m*105/100 {
		t.Errorf("median %v, want %v", med, m)
	}
	// The 99th percentile lies between the 99th and 100th points.
	if pts[98] > p99 || pts[99] < p99 {
		t.Errorf("points 99 and 100 %v and %v, want %v between them", pts[98], pts[99], p99)
	}
	for _, c := range [][2]time.Duration{{m, m}, {m, m / 2}, {0, p99}} {
		if got := LagPoints(c[0], c[1]); len(got) != 1 || got[0] != c[0] {
			t.Errorf("LagPoints(%v, %v) = %v, want [%v]", c[0], c[1], got, c[0])
		}
	}
}

// TestRandomLagAgreesWithConstant checks the random-lag estimate against
// the exact constant one: a "random" lag whose points are all equal must
// predict exactly what that constant lag predicts (the bisection finds the
// same jumps), with and without the budget; a lag spread around the same
// median sends fewer copies than an on-time one and leaves a longer p99.9.
func TestRandomLagAgreesWithConstant(t *testing.T) {
	s := expSample(20_000, time.Millisecond)
	e := newEmpirical(s.sorted())
	lat := make([]float64, s.Len())
	for i, d := range s.Latencies {
		lat[i] = float64(d)
	}
	order := replayOrder(s, false, 1)
	today := e.percentiles()
	c := Choice{Delay: 2 * time.Millisecond}
	const lag = 300 * time.Microsecond
	ind := func(lags []time.Duration, budget bool) Outcome {
		t.Helper()
		o, err := independent(context.Background(), e, lat, order, c, lags, budget, today)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, budget := range []bool{false, true} {
		want := ind([]time.Duration{lag}, budget)
		got, err := independentLags(context.Background(), e, lat, order, c, []time.Duration{lag, lag, lag}, budget, today)
		if err != nil {
			t.Fatal(err)
		}
		if got.P50 != want.P50 || got.P99 != want.P99 || got.P999 != want.P999 || got.HedgeRate != want.HedgeRate || math.Abs(got.ExtraWork-want.ExtraWork) > 1e-12 {
			t.Errorf("budget %v: three equal lags %+v, want the constant lag's %+v", budget, got, want)
		}
	}
	onTime := ind([]time.Duration{0}, false)
	spread := ind(LagPoints(lag, 10*lag), false)
	if !(spread.HedgeRate < onTime.HedgeRate && spread.P999 > onTime.P999) {
		t.Errorf("random lag (median %v, p99 %v): hedge rate %.4f, p99.9 %v; on time: %.4f, %v; want fewer copies and a longer p99.9", lag, 10*lag, spread.HedgeRate, spread.P999, onTime.HedgeRate, onTime.P999)
	}
}

// TestSendLagP99Refused checks that a lag p99 without a median, or below
// it, is refused with what to give instead.
func TestSendLagP99Refused(t *testing.T) {
	s := expSample(2_000, time.Millisecond)
	for _, c := range [][2]time.Duration{{0, time.Millisecond}, {time.Millisecond, 500 * time.Microsecond}} {
		_, err := Advise(context.Background(), s, Options{SendLag: c[0], SendLagP99: c[1]})
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "hedge.Stats.TimerLag") {
			t.Errorf("send lag %v, p99 %v: err %v; want ErrOptions saying what to give", c[0], c[1], err)
		}
	}
}

// TestQueueingPredictsTheDefault checks the queueing estimates' line for
// the library's zero Config: present in each (and not in the independent
// estimate, which cannot apply its rules), within the default budget, and,
// where copies are as slow as their primaries (shared sizes), sending far
// fewer hedges than plain hedging at the same p95 with the same budget:
// its payoff rule stops hedges that do not win.
func TestQueueingPredictsTheDefault(t *testing.T) {
	s := expSample(20_000, time.Millisecond)
	rep, err := Advise(context.Background(), s, Options{Percentiles: []float64{95}, Load: 0.5, Servers: 4, Requests: 40_000, Sizes: []Sizes{Fresh, Shared}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Predictions {
		d := p.Default
		if p.Kind == "independent" {
			if d != nil {
				t.Errorf("independent estimate has a default line %+v", d)
			}
			continue
		}
		if d == nil {
			t.Errorf("%s: no default line", p.Kind)
			continue
		}
		if d.Choice.Label != "default" || !d.Budget || d.Choice.Delay <= 0 || d.HedgeRate <= 0 || d.HedgeRate > 0.1 {
			t.Errorf("%s: default line %+v; want a positive delay and a hedge rate within the 10%% budget", p.Kind, d)
		}
		if p.Kind != "queue-shared" {
			continue
		}
		var plain Outcome
		for _, o := range p.Rows {
			if o.Choice.Label == "p95" && o.Budget {
				plain = o
			}
		}
		if !(d.HedgeRate < plain.HedgeRate/2) {
			t.Errorf("shared sizes: the default hedges %.4f of requests, plain hedging at p95 %.4f; want the payoff rule to hold most back", d.HedgeRate, plain.HedgeRate)
		}
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "the library's default (the zero hedge.Config") {
		t.Errorf("report does not show the default line:\n%s", b.String())
	}
}

// TestLocalCopies checks the estimate that draws each copy from the
// requests sent around the copy's own send time. Where slowness does not
// depend on time (exponential latencies shuffled over evenly spaced send
// times), it agrees with the independent estimate: the same hedges, a p99
// and p99.9 within 10%. Where slowness comes in bursts (every request of
// a 40 ms spell takes 20 ms, every other 1 ms), it sees what the
// independent estimate cannot: a copy sent into the spell is as slow, so
// the p99.9 stays near 20 ms where the independent estimate puts it near
// the delay plus a fast copy. And it appears only for a sample with send
// times.
func TestLocalCopies(t *testing.T) {
	const d = 2 * time.Millisecond
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	predictions := func(s *Sample) map[string]Outcome {
		t.Helper()
		rep, err := Advise(context.Background(), s, Options{Percentiles: []float64{}, Delays: []time.Duration{d}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Outcome{}
		for _, p := range rep.Predictions {
			out[p.Kind] = p.Rows[0] // without the budget
		}
		return out
	}

	s := expSample(20_000, time.Millisecond)
	if _, ok := predictions(s)["independent-local"]; ok {
		t.Error("a moment-local estimate without send times")
	}
	perm := rand.New(rand.NewPCG(1, 2)).Perm(s.Len())
	shuffled := &Sample{Source: "shuffled"}
	for k, i := range perm {
		shuffled.Latencies = append(shuffled.Latencies, s.Latencies[i])
		shuffled.Times = append(shuffled.Times, t0.Add(time.Duration(k)*100*time.Microsecond))
	}
	p := predictions(shuffled)
	ind, loc := p["independent"], p["independent-local"]
	near := func(a, b time.Duration) bool { return math.Abs(float64(a)/float64(b)-1) <= 0.10 }
	if loc.HedgeRate != ind.HedgeRate || !near(loc.P99, ind.P99) || !near(loc.P999, ind.P999) {
		t.Errorf("no bursts: moment-local %+v, want the independent estimate's hedges and tail within 10%%: %+v", loc, ind)
	}

	bursty := &Sample{Source: "bursty"}
	for k := range 20_000 {
		at := time.Duration(k) * time.Millisecond
		x := time.Millisecond
		if at%(2*time.Second) < 40*time.Millisecond {
			x = 20 * time.Millisecond
		}
		bursty.Latencies = append(bursty.Latencies, x)
		bursty.Times = append(bursty.Times, t0.Add(at))
	}
	p = predictions(bursty)
	ind, loc = p["independent"], p["independent-local"]
	if ind.P999 > 4*time.Millisecond || loc.P999 < 15*time.Millisecond {
		t.Errorf("bursts: p99.9 %v independent, %v moment-local; want about delay + 1 ms and about 20 ms", ind.P999, loc.P999)
	}
}

// TestLocalDefaultSeesCommonSlowness checks the moment-local default line:
// the library's spare-capacity rule, replayed on the occupancy the sample
// records, never holds back the hedges of requests that are slow alone,
// and holds back those of requests slow together, when every replica has
// requests in flight. Two samples at 1,000 requests/s on 3 replicas, each
// with 5% of requests slow by the same latencies (0.2 to 10 ms; the
// others 0.2 ms): in one, the client pauses for 10 ms in every 200, and
// every request sent in a pause is answered when it ends; in the other,
// the same slow latencies come one request in twenty.
func TestLocalDefaultSeesCommonSlowness(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const n = 40_000
	const fast = 200 * time.Microsecond
	paused := &Sample{Source: "pauses"}
	var slow []time.Duration
	for k := range n {
		at := time.Duration(k) * time.Millisecond
		x := fast
		if ph := at % (200 * time.Millisecond); ph < 10*time.Millisecond {
			x = 10*time.Millisecond - ph + fast
			slow = append(slow, x)
		}
		paused.Latencies = append(paused.Latencies, x)
		paused.Times = append(paused.Times, t0.Add(at))
	}
	alone := &Sample{Source: "alone"}
	for k := range n {
		x := fast
		if k%20 == 7 {
			x = slow[(k/20)%len(slow)]
		}
		alone.Latencies = append(alone.Latencies, x)
		alone.Times = append(alone.Times, t0.Add(time.Duration(k)*time.Millisecond))
	}
	// The spare-capacity rule: alone, the slow request holds its replica
	// and the other two are nearly always idle, so its copy is never
	// held back as busy; in a pause every request stays in flight until
	// it ends, no replica is idle after the first few, and asking again a
	// delay later finds none either, until the pause ends.
	busy := func(s *Sample) int {
		t.Helper()
		return replayed(t, s, 3).refused[hedge.RefusedBusy]
	}
	slowAlone := len(slow)
	ba, bp := busy(alone), busy(paused)
	if ba > slowAlone/100 {
		t.Errorf("slow requests one at a time: %d busy refusals for %d slow requests, want nearly none", ba, slowAlone)
	}
	if bp < 5*len(slow) {
		t.Errorf("slow requests together: %d busy refusals for %d slow requests, want several each", bp, len(slow))
	}
	// The payoff rule: a copy draws its latency from its moment, and a
	// request slow alone has no other request in its moment, so its
	// copies replay as slow as it is, as a big request's are; they lose
	// and run long, and the zero Config stops them (it does not go on
	// for winning alone), whatever the spare capacity.
	rep, err := Advise(context.Background(), alone, Options{Percentiles: []float64{}, Delays: []time.Duration{time.Millisecond}, Replicas: 3, Load: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Predictions {
		if p.Kind == "independent-local" && (p.Default == nil || p.Default.HedgeRate > 0.01) {
			t.Errorf("slow requests one at a time, copies as slow: default line %+v, want under 1%% hedged", p.Default)
		}
	}
	t.Logf("busy refusals: alone %d, in pauses %d, for %d slow requests each", ba, bp, len(slow))
}
