package advise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge/internal/drill"
)

// rareSlow is a sample whose slowness is too rare to reach the p99: one
// request in 400 (0.25%) is twenty times slower than the rest, so that
// hedging cuts the p99.9 about tenfold and leaves the p99 where it is.
func rareSlow() *Sample {
	s := expSample(40_000, time.Millisecond)
	for i := range s.Latencies {
		s.Latencies[i] += 10 * time.Millisecond
		if i%400 == 3 {
			s.Latencies[i] *= 20
		}
	}
	return s
}

// With the p99.9 as the objective, a delay that cuts it tenfold is a
// TAIL CUT and is recommended, where the p99's objective finds no tail
// gain and says that the p99.9's would.
func TestObjective(t *testing.T) {
	advise := func(obj Objective) *Report {
		t.Helper()
		rep, err := Advise(context.Background(), rareSlow(), Options{Percentiles: []float64{95}, Objective: obj})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	p99, p999 := advise(P99), advise(P999)
	if r := p99.Predictions[0].Rows[1]; r.Verdict != drill.NoTailGain || r.P999Ratio > 0.2 {
		t.Errorf("p99's objective at the p95 with the budget: %s with p99.9 ratio %.2f; want NO TAIL GAIN, the p99.9 cut", r.Verdict, r.P999Ratio)
	}
	if p99.Recommended != nil || !strings.Contains(p99.NoAdvice, "--objective p99.9") {
		t.Errorf("p99's objective: recommendation %+v, no advice %q; want none, pointing to --objective p99.9", p99.Recommended, p99.NoAdvice)
	}
	if r := p999.Predictions[0].Rows[1]; r.Verdict != drill.TailCut {
		t.Errorf("p99.9's objective at the p95 with the budget: %s, want TAIL CUT", r.Verdict)
	}
	if p999.Recommended == nil || !strings.Contains(p999.Recommended.Why, "p99.9") {
		t.Fatalf("p99.9's objective: recommendation %+v (%s); want the p95, chosen by its p99.9", p999.Recommended, p999.NoAdvice)
	}
	var b bytes.Buffer
	if err := p999.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "TAIL CUT when the p99.9 falls by more than 5% and the p99 rises by no more than 5%") {
		t.Errorf("the report does not state the p99.9's rule:\n%s", b.String())
	}
	if _, err := ParseObjective("p50"); !errors.Is(err, ErrOptions) {
		t.Errorf("ParseObjective(p50): %v, want ErrOptions", err)
	}
	for in, want := range map[string]Objective{"p99": P99, "99": P99, "p99.9": P999, "99.9": P999} {
		if got, err := ParseObjective(in); got != want || err != nil {
			t.Errorf("ParseObjective(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// The recommendation keeps the library's spare-capacity and payoff rules
// on: the rows predict plain hedging, and the rules only ever hold back
// hedges that find every replica busy or do not win. Only PlainHedging
// turns them off in the snippet.
func TestRecommendationKeepsTheRules(t *testing.T) {
	s := expSample(20_000, time.Millisecond)
	for i := range s.Latencies {
		if i%50 == 7 {
			s.Latencies[i] *= 20 // a slow tail that hedging cuts
		}
	}
	for _, plain := range []bool{false, true} {
		rep, err := Advise(context.Background(), s, Options{Percentiles: []float64{90}, PlainHedging: plain})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Recommended == nil {
			t.Fatalf("no recommendation: %s", rep.NoAdvice)
		}
		var b bytes.Buffer
		if err := rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		text := b.String()
		off := strings.Contains(text, "MaxReplicaLoad: hedge.AnyReplicaLoad") || strings.Contains(text, "PayoffWinRate:  -1")
		if off != plain {
			t.Errorf("PlainHedging %v: the snippet turns the rules off: %v\n%s", plain, off, text)
		}
	}
}

// The load is inferred from the rate over the spans when requests were
// sent: a recording of blocks at 250 requests/s with idle seconds between
// them was sent at 250/s, not at the count over the whole span.
func TestLoadInferredOverActiveSpans(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := &Sample{Source: "blocks"}
	at := t0
	for k := range 5000 {
		if k > 0 && k%500 == 0 {
			at = at.Add(3 * time.Second) // idle between blocks
		}
		s.Latencies = append(s.Latencies, time.Duration(1+k%3)*time.Millisecond)
		s.Times = append(s.Times, at)
		at = at.Add(4 * time.Millisecond)
	}
	rep, err := Advise(context.Background(), s, Options{Percentiles: []float64{95}, Sizes: []Sizes{Fresh}, Requests: 5000, Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	// 250/s x a mean of 2 ms over 2 servers.
	if rep.Queue == nil || rep.Queue.Load < 0.2499 || rep.Queue.Load > 0.2501 || !strings.Contains(rep.LoadFrom, "250 requests/s") {
		t.Errorf("queue %+v, load from %q; want load 0.25 from 250 requests/s", rep.Queue, rep.LoadFrom)
	}
}

// Replicas and Concurrency say apart what Servers said as one number: the
// replay places requests on the replicas, and the queueing estimate
// simulates replicas x concurrency single-slot servers. Servers alone
// still works where it can mean only the latter, and is refused where it
// could mean either.
func TestReplicasAndConcurrency(t *testing.T) {
	timed := wholeMillis(2000, 5*time.Millisecond)
	for i := range timed.Latencies {
		timed.Latencies[i] += time.Millisecond
	}
	unnamed := &Sample{Latencies: timed.Latencies, Times: timed.Times}
	untimed := &Sample{Latencies: timed.Latencies}
	o := Options{Percentiles: []float64{95}, Sizes: []Sizes{Fresh}, Requests: 2000}
	with := func(f func(*Options)) Options { c := o; f(&c); return c }
	rep, err := Advise(context.Background(), unnamed, with(func(o *Options) { o.Replicas, o.Concurrency = 3, 4 }))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Queue == nil || rep.Queue.Servers != 12 || !strings.Contains(rep.LoadFrom, "3 replicas (--replicas) x 4 (--concurrency)") {
		t.Errorf("replicas 3, concurrency 4: queue %+v from %q; want 12 servers", rep.Queue, rep.LoadFrom)
	}
	if p := rep.Predictions[1]; p.Kind != "independent-local" || p.Default == nil || !strings.Contains(strings.Join(p.Assumes, " "), "over 3 replicas") {
		t.Errorf("replicas 3: the moment-local default line should replay 3 replicas: %+v", p.Assumes)
	}
	for _, c := range []struct {
		name string
		s    *Sample
		o    Options
	}{
		{"servers and replicas", untimed, with(func(o *Options) { o.Servers, o.Replicas = 12, 3 })},
		{"servers and concurrency", untimed, with(func(o *Options) { o.Servers, o.Concurrency = 12, 4 })},
		{"servers on send times", unnamed, with(func(o *Options) { o.Servers = 12 })},
	} {
		if _, err := Advise(context.Background(), c.s, c.o); !errors.Is(err, ErrServers) || !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "--replicas") {
			t.Errorf("%s: error %v, want ErrServers naming --replicas", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		s    *Sample
	}{{"no send times", untimed}, {"named replicas", timed}} {
		rep, err := Advise(context.Background(), c.s, with(func(o *Options) { o.Servers, o.Load = 12, 0.3 }))
		if err != nil {
			t.Fatalf("servers 12, %s: %v", c.name, err)
		}
		if rep.Queue == nil || rep.Queue.Servers != 12 {
			t.Errorf("servers 12, %s: queue %+v, want 12 servers", c.name, rep.Queue)
		}
	}
}

// When no row cuts the objective's percentile and one cuts the other's,
// the report says by how much, from the latency without hedging of the
// prediction that judged it: a simulation's queues make that slower than
// the sample's, and against the sample's the cut could read as a rise.
// Here the slowness lives in the requests (every 50th twenty times
// slower, on every replica, evenly in time), so the shared-size
// simulation decides, and it cuts only the p99.9.
func TestOtherObjectiveCutFromItsOwnBase(t *testing.T) {
	s := &Sample{Source: "test"}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for k := range 3000 {
		x := time.Duration(1+k%7) * time.Millisecond
		if k%50 == 3 {
			x *= 20
		}
		s.Latencies = append(s.Latencies, x)
		s.Replicas = append(s.Replicas, fmt.Sprintf("r%d", k%3))
		s.Times = append(s.Times, t0.Add(time.Duration(k)*4*time.Millisecond))
	}
	rep, err := Advise(context.Background(), s, Options{Requests: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	alt, _ := pick(rep, P999)
	if rep.Recommended != nil || alt == nil {
		t.Fatalf("recommended %+v, by the p99.9 %+v: want none by the p99, one by the p99.9", rep.Recommended, alt)
	}
	var base *Prediction
	for i := range rep.Predictions {
		if rep.Predictions[i].Kind == alt.Kind {
			base = &rep.Predictions[i]
		}
	}
	if base == nil || base.Today.P999 == rep.Today.P999 {
		t.Fatalf("the p99.9's recommendation is by %s, whose p99.9 without hedging is the sample's: want a simulation's, slower", alt.Kind)
	}
	want := fmt.Sprintf("takes it from %v to %v (%s estimate)", round(base.Today.P999), round(alt.Outcome.P999), alt.Kind)
	if !strings.Contains(rep.NoAdvice, want) {
		t.Errorf("no advice %q; want %q", rep.NoAdvice, want)
	}
}
