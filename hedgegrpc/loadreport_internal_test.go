package hedgegrpc

import (
	"math"
	"testing"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/loadreport"
)

// marshal is r as it travels in a trailer.
func marshal(t testing.TB, r *v3orcapb.OrcaLoadReport) string {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func named(running, queued, workers, done float64) map[string]float64 {
	return map[string]float64{RunningMetric: running, QueuedMetric: queued, WorkersMetric: workers, DoneMetric: done}
}

func TestParseLoadReport(t *testing.T) {
	for _, c := range []struct {
		name string
		r    *v3orcapb.OrcaLoadReport // marshalled into one value; nil: raw
		raw  []string
		want hedge.Load
		kind reportKind
	}{
		{name: "no trailer", kind: noReport},
		{name: "several values", raw: []string{"", ""}, kind: badReport},
		{name: "not a report", raw: []string{"\xff\xff\xff"}, kind: badReport},
		{name: "an empty report", raw: []string{""}, kind: emptyReport},
		{name: "only a request cost", r: &v3orcapb.OrcaLoadReport{RequestCost: map[string]float64{"db": 3}}, kind: emptyReport},

		{name: "toolkit", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(3, 2, 4, 1e12), ApplicationUtilization: 1.25},
			want: hedge.Load{Running: 3, Queued: 2, Workers: 4, Done: 1e12}, kind: namedReport},
		{name: "toolkit idle", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(0, 0, 1, 0)},
			want: hedge.Load{Workers: 1}, kind: namedReport},
		{name: "toolkit, a metric missing", r: &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{RunningMetric: 2, WorkersMetric: 8}, CpuUtilization: 0.9},
			want: hedge.Load{Running: 2, Workers: 8}, kind: namedReport},
		{name: "toolkit beside other metrics", r: &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{QueuedMetric: 5, "hedge_other": -1}},
			want: hedge.Load{Queued: 5}, kind: namedReport},
		{name: "negative count", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(-1, 0, 4, 0)}, kind: badReport},
		{name: "fractional count", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(1.5, 0, 4, 0)}, kind: badReport},
		{name: "NaN count", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(0, math.NaN(), 4, 0)}, kind: badReport},
		{name: "infinite count", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(0, 0, math.Inf(1), 0)}, kind: badReport},
		{name: "count beyond int32 reads as the cap", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(1<<31, 0, 4, 0)},
			want: hedge.Load{Running: loadreport.MaxCount, Workers: 4}, kind: namedReport},
		{name: "huge queue reads as the cap", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(4, 1.5e300, 4, 9)},
			want: hedge.Load{Running: 4, Queued: loadreport.MaxCount, Workers: 4, Done: 9}, kind: namedReport},
		{name: "done beyond 2^53", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(0, 0, 4, 1<<54)}, kind: badReport},
		{name: "largest counts", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(loadreport.MaxCount, loadreport.MaxCount, loadreport.MaxCount, 1<<53)},
			want: hedge.Load{Running: loadreport.MaxCount, Queued: loadreport.MaxCount, Workers: loadreport.MaxCount, Done: 1 << 53}, kind: namedReport},
		{name: "counts above the cap", r: &v3orcapb.OrcaLoadReport{NamedMetrics: named(math.MaxInt32, math.MaxInt32+1, 1e19, 0)},
			want: hedge.Load{Running: loadreport.MaxCount, Queued: loadreport.MaxCount, Workers: loadreport.MaxCount}, kind: namedReport},

		{name: "application utilization", r: &v3orcapb.OrcaLoadReport{ApplicationUtilization: 0.374, CpuUtilization: 0.9},
			want: hedge.Load{Running: 37, Workers: 100}, kind: utilReport},
		{name: "cpu utilization", r: &v3orcapb.OrcaLoadReport{CpuUtilization: 0.995},
			want: hedge.Load{Running: 100, Workers: 100}, kind: utilReport},
		{name: "utilization above 1", r: &v3orcapb.OrcaLoadReport{ApplicationUtilization: 2.5},
			want: hedge.Load{Running: 100, Queued: 150, Workers: 100}, kind: utilReport},
		{name: "tiny utilization", r: &v3orcapb.OrcaLoadReport{ApplicationUtilization: 1e-9},
			want: hedge.Load{Workers: 100}, kind: utilReport},
		{name: "huge utilization", r: &v3orcapb.OrcaLoadReport{ApplicationUtilization: 1e300},
			want: hedge.Load{Running: 100, Queued: 9900, Workers: 100}, kind: utilReport},
		{name: "negative utilization", r: &v3orcapb.OrcaLoadReport{ApplicationUtilization: -0.5}, kind: badReport},
		{name: "NaN utilization", r: &v3orcapb.OrcaLoadReport{ApplicationUtilization: math.NaN(), CpuUtilization: 0.5}, kind: badReport},
		{name: "infinite cpu", r: &v3orcapb.OrcaLoadReport{CpuUtilization: math.Inf(1)}, kind: badReport},
	} {
		t.Run(c.name, func(t *testing.T) {
			vs := c.raw
			if c.r != nil {
				vs = []string{marshal(t, c.r)}
			}
			got, kind := parseLoadReport(vs)
			if got != c.want || kind != c.kind {
				t.Errorf("got %+v (kind %d), want %+v (kind %d)", got, kind, c.want, c.kind)
			}
		})
	}
}

// FuzzLoadReport feeds parseLoadReport arbitrary trailer values, and
// reports made of arbitrary metrics. Whatever it reads is a load
// Hedger.ReportLoad accepts; a report of the toolkit's metrics in range
// reads back exactly, its counts capped at loadreport.MaxCount; one read
// from a utilization has 100 workers.
func FuzzLoadReport(f *testing.F) {
	f.Add([]byte(marshal(f, &v3orcapb.OrcaLoadReport{NamedMetrics: named(3, 2, 4, 17)})), 3.0, 2.0, 4.0, 17.0, 0.5, 0.0)
	f.Add([]byte(marshal(f, &v3orcapb.OrcaLoadReport{ApplicationUtilization: 1.5})), -1.0, 0.5, math.NaN(), 1e20, 2.0, 0.7)
	f.Add([]byte("\x0a\x05hello"), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
	f.Add([]byte{}, 4.0, 1e300, 4.0, 0.0, 0.0, 0.0)
	f.Fuzz(func(t *testing.T, raw []byte, running, queued, workers, done, app, cpu float64) {
		check := func(l hedge.Load, kind reportKind) {
			switch kind {
			case noReport, badReport, emptyReport:
				if l != (hedge.Load{}) {
					t.Fatalf("kind %d with load %+v", kind, l)
				}
			case namedReport, utilReport:
				if l.Running < 0 || l.Queued < 0 || l.Workers < 0 || l.Done < 0 {
					t.Fatalf("negative count in %+v", l)
				}
				if l.Running > loadreport.MaxCount || l.Queued > loadreport.MaxCount || l.Workers > loadreport.MaxCount {
					t.Fatalf("a count above MaxCount in %+v", l)
				}
				if kind == utilReport && (l.Workers != UtilizationWorkers || l.Done != 0 || l.Running > UtilizationWorkers || (l.Queued > 0 && l.Running != UtilizationWorkers)) {
					t.Fatalf("utilization read as %+v", l)
				}
			default:
				t.Fatalf("kind %d", kind)
			}
		}
		check(parseLoadReport([]string{string(raw)}))

		r := &v3orcapb.OrcaLoadReport{NamedMetrics: named(running, queued, workers, done), ApplicationUtilization: app, CpuUtilization: cpu}
		l, kind := parseLoadReport([]string{marshal(t, r)})
		check(l, kind)
		// A count is a finite whole number, read capped at MaxCount; Done
		// one up to maxDone, read exactly.
		count := func(v float64) bool { return v >= 0 && !math.IsInf(v, 1) && v == math.Trunc(v) }
		capped := func(v float64) int { return int(min(v, loadreport.MaxCount)) }
		inRange := count(running) && count(queued) && count(workers) && count(done) && done <= maxDone
		if want := (hedge.Load{Running: capped(running), Queued: capped(queued), Workers: capped(workers), Done: int64(done)}); inRange && (kind != namedReport || l != want) {
			t.Fatalf("%v, %v, %v, %v read as %+v (kind %d)", running, queued, workers, done, l, kind)
		}
		if !inRange && kind != badReport {
			t.Fatalf("%v, %v, %v, %v read as %+v (kind %d), want malformed", running, queued, workers, done, l, kind)
		}

		r.NamedMetrics = nil
		l, kind = parseLoadReport([]string{marshal(t, r)})
		check(l, kind)
		u := app
		if u == 0 {
			u = cpu
		}
		switch {
		case math.IsNaN(u) || u < 0 || math.IsInf(u, 1):
			if kind != badReport {
				t.Fatalf("utilization %v read as %+v (kind %d), want malformed", u, l, kind)
			}
		case u == 0:
			if kind != emptyReport {
				t.Fatalf("no utilization read as %+v (kind %d)", l, kind)
			}
		default:
			if n := math.Round(min(u, maxUtilization) * UtilizationWorkers); kind != utilReport || float64(l.Running+l.Queued) != n {
				t.Fatalf("utilization %v read as %+v (kind %d), want %v requests", u, l, kind, n)
			}
		}
	})
}

// BenchmarkParseLoadReport is what reading a report adds to each copy of
// an Interceptor with WithReplicas, beside hedge.Hedger.ReportLoad.
//
//	go test ./hedgegrpc -run '^$' -bench ParseLoadReport -benchmem
func BenchmarkParseLoadReport(b *testing.B) {
	for _, bc := range []struct {
		name string
		r    *v3orcapb.OrcaLoadReport
	}{
		{"toolkit", &v3orcapb.OrcaLoadReport{NamedMetrics: named(3, 2, 16, 123456), ApplicationUtilization: 0.3125}},
		{"utilization", &v3orcapb.OrcaLoadReport{ApplicationUtilization: 0.42, CpuUtilization: 0.7}},
	} {
		vs := []string{marshal(b, bc.r)}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, kind := parseLoadReport(vs); kind == badReport {
					b.Fatal("bad report")
				}
			}
		})
	}
}
