package hedgeotel_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestModeAndRollout: hedge.mode shows the mode each Hedger runs in now,
// 1 for it and 0 for the others, and hedge.rollout its rollout; a switch
// shows at the next collection.
func TestModeAndRollout(t *testing.T) {
	a := mustNew(t, hedge.Config{})
	b := mustNew(t, hedge.Config{})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	if _, err := hedgeotel.Register(mp.Meter("test"), map[string]*hedge.Hedger{"a": a, "b": b}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, modes map[string]string, rollouts map[string]float64) {
		t.Helper()
		got := collect(t, reader)
		for name, m := range modes {
			for _, each := range []string{"on", "shadow", "off"} {
				v := 0.0
				if each == m {
					v = 1
				}
				k := key("hedge.mode", "hedger="+name, "mode="+each)
				if p, ok := got[k]; !ok || p != (point{v, "1", "gauge"}) {
					t.Errorf("%s: %s = %+v (present %v), want %v", when, k, p, ok, v)
				}
			}
			k := key("hedge.rollout", "hedger="+name)
			if p, ok := got[k]; !ok || p != (point{rollouts[name], "1", "gauge"}) {
				t.Errorf("%s: %s = %+v (present %v), want %v", when, k, p, ok, rollouts[name])
			}
		}
	}
	settest.ModeSteps(t, a, b, check)
}

// TestReplicaRecentLatency: after a burst of slowness and a recovery,
// hedge.replica.latency.recent shows each replica fast, as its
// ReplicaStats.Recent has it, while hedge.replica.latency, since the
// Hedger was made, still holds the burst in its p99.
func TestReplicaRecentLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settest.Burst(t)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		if _, err := hedgeotel.Register(mp.Meter("test"), map[string]*hedge.Hedger{"items": h}); err != nil {
			t.Fatal(err)
		}
		got := collect(t, reader)
		want := points{}
		wantReplicas(want, "items", h)
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Errorf("%s = %+v (present %v), want %+v", k, g, ok, w)
			}
		}
		fast := 0
		for _, r := range h.ReplicaStats() {
			rep := "replica=" + strconv.Itoa(r.Replica)
			recent, ok := got[key("hedge.replica.latency.recent", "hedger=items", rep, "quantile=p99")]
			if r.Recent.Count == 0 {
				if ok {
					t.Errorf("replica %d, no recent success: recent latency %+v observed", r.Replica, recent)
				}
				continue
			}
			fast++
			since := got[key("hedge.replica.latency", "hedger=items", rep, "quantile=p99")]
			if recent.value > 0.0021 || since.value < 0.79 {
				t.Errorf("replica %d: recent p99 %vs, p99 since made %vs; want about 0.002 and 0.8", r.Replica, recent.value, since.value)
			}
		}
		if fast == 0 {
			t.Error("no replica has a recent latency: the workload does not test it")
		}
	})
}
