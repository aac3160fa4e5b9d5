package hedgectl_test

import (
	"context"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgectl"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/hedgetest"
)

// refusalWorkload drives two Hedgers, on synctest's fake clock, to
// refusals of four reasons: budget and deadline on "a", replicas and
// in_flight on "b".
func refusalWorkload(t *testing.T) map[string]*hedge.Hedger {
	const ms = time.Millisecond
	budget, err := hedge.NewBudget(0.1, 1) // one hedge, then refusals
	if err != nil {
		t.Fatal(err)
	}
	a := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Budget: budget, PayoffWinRate: -1})
	b := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, MaxAttempts: 3,
		Replicas: 2, MaxHedgesInFlight: 1, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
	ctx := context.Background()
	for range 3 {
		hedge.Do(ctx, a, "get", hedgetest.Sleeper(50*ms, 5*ms))
	}
	dctx, cancel := context.WithTimeout(ctx, 8*ms)
	hedge.Do(dctx, a, "put", hedgetest.Sleeper(2*ms))
	cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { hedge.Do(ctx, b, "scan", hedgetest.Sleeper(40*ms, 35*ms, 1*ms)) })
	}
	wg.Wait()
	time.Sleep(time.Second) // let the Hedgers' timer goroutines exit
	return map[string]*hedge.Hedger{"a": a, "b": b}
}

// snakeCase is the form of every refusal's name.
var snakeCase = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

// TestOneVocabularyForRefusals: for every Refusal value, hedgectl's
// "refused" object, the reason label of hedgeprom's refusal counter and
// the reason attribute of hedgeotel's name it by its String, with the
// count Stats.Refused holds; the refusals not counted appear in none.
func TestOneVocabularyForRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hedgers := refusalWorkload(t)

		// key is a Hedger, an operation class and a reason.
		type key struct{ hedger, op, reason string }

		ctl, err := hedgectl.New(hedgers, hedgectl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		w, state := serve(t, ctl, http.MethodGet, "/", "", local)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /: %d %s", w.Code, w.Body)
		}
		fromJSON := map[key]int64{}
		for _, hs := range state.Hedgers {
			for _, op := range hs.Ops {
				for reason, n := range op.Refused {
					fromJSON[key{hs.Name, op.Op, reason}] = n
				}
			}
		}

		reg := prometheus.NewRegistry()
		c, err := hedgeprom.New("hedge", hedgers)
		if err != nil {
			t.Fatal(err)
		}
		reg.MustRegister(c)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		fromProm := map[key]int64{}
		for _, f := range families {
			if f.GetName() != "hedge_hedges_refused_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				var k key
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "hedger":
						k.hedger = l.GetValue()
					case "op":
						k.op = l.GetValue()
					case "reason":
						k.reason = l.GetValue()
					}
				}
				fromProm[k] = int64(m.GetCounter().GetValue())
			}
		}

		reader := sdkmetric.NewManualReader()
		provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		registration, err := hedgeotel.Register(provider.Meter("test"), hedgers)
		if err != nil {
			t.Fatal(err)
		}
		defer registration.Unregister()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		fromOTel := map[key]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "hedge.hedges.refused" {
					continue
				}
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					var k key
					for _, kv := range p.Attributes.ToSlice() {
						switch kv.Key {
						case "hedger":
							k.hedger = kv.Value.AsString()
						case "op":
							k.op = kv.Value.AsString()
						case "reason":
							k.reason = kv.Value.AsString()
						}
					}
					fromOTel[k] = p.Value
				}
			}
		}

		counted := map[hedge.Refusal]bool{}
		for why := range (hedge.Refusals{}).All() {
			counted[why] = true
		}
		names := map[string]hedge.Refusal{}
		nonzero := 0
		want := 0
		for name, h := range hedgers {
			for _, s := range h.Stats() {
				for r := range hedge.Refusal(len(hedge.Refusals{})) {
					n := r.String()
					if !snakeCase.MatchString(n) {
						t.Errorf("Refusal %d is named %q, not in snake_case", r, n)
					}
					if other, dup := names[n]; dup && other != r {
						t.Errorf("Refusals %d and %d are both named %q", other, r, n)
					}
					names[n] = r
					k := key{name, s.Op, n}
					for _, src := range []struct {
						what string
						m    map[key]int64
					}{{"hedgectl's JSON", fromJSON}, {"hedgeprom's reason label", fromProm}, {"hedgeotel's reason attribute", fromOTel}} {
						got, ok := src.m[k]
						switch {
						case ok != counted[r]:
							t.Errorf("%s: %s/%s has %q: %v; want %v (the refusal is counted: %v)", src.what, name, s.Op, n, ok, counted[r], counted[r])
						case ok && got != s.Refused[r]:
							t.Errorf("%s: %s/%s %q = %d, want Stats.Refused[%d] = %d", src.what, name, s.Op, n, got, r, s.Refused[r])
						}
					}
					if counted[r] {
						want++
					}
					if s.Refused[r] > 0 {
						nonzero++
					}
				}
			}
		}
		for _, src := range []struct {
			what string
			m    map[key]int64
		}{{"hedgectl's JSON", fromJSON}, {"hedgeprom's reason label", fromProm}, {"hedgeotel's reason attribute", fromOTel}} {
			if len(src.m) != want {
				t.Errorf("%s has %d refusal counts, want %d: %v", src.what, len(src.m), want, src.m)
			}
		}
		if nonzero < 4 {
			t.Errorf("%d refusal counts above zero, want at least 4 (budget, deadline, replicas, in_flight): the workload does not test the counts", nonzero)
		}
	})
}
