package hedgeprom_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
)

// TestModeAndRollout: hedge_mode shows the mode each Hedger runs in now,
// 1 for it and 0 for the others, and hedge_rollout its rollout; a switch
// shows at the next scrape.
func TestModeAndRollout(t *testing.T) {
	a := mustNew(t, hedge.Config{})
	b := mustNew(t, hedge.Config{})
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"a": a, "b": b})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	check := func(when string, modes map[string]string, rollouts map[string]float64) {
		t.Helper()
		want := map[string]float64{}
		for name, m := range modes {
			for _, each := range []string{"on", "shadow", "off"} {
				v := 0.0
				if each == m {
					v = 1
				}
				want[key("hedge_mode", "hedger="+name, "mode="+each)] = v
			}
			want[key("hedge_rollout", "hedger="+name)] = rollouts[name]
		}
		got := gather(t, reg)
		checkValues(t, got, want)
		for k, m := range got {
			if m.GetGauge() == nil && (strings.HasPrefix(k, "hedge_mode{") || strings.HasPrefix(k, "hedge_rollout{")) {
				t.Errorf("%s: %s is not a gauge", when, k)
			}
		}
	}
	settest.ModeSteps(t, a, b, check)
}

// TestReplicaRecentLatency: after a burst of slowness and a recovery,
// hedge_replica_latency_recent_seconds shows each replica fast, as its
// ReplicaStats.Recent has it, while the summary since the Hedger was made
// still holds the burst in its p99.
func TestReplicaRecentLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settest.Burst(t)
		c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		got := gather(t, reg)
		fast := 0
		for _, r := range h.ReplicaStats() {
			ls := []string{"hedger=items", "replica=" + strconv.Itoa(r.Replica)}
			if r.Recent.Count == 0 {
				if m, ok := got[skey("hedge_replica_latency_recent_seconds", append(ls, "quantile=0.99")...)]; ok {
					t.Errorf("replica %d, no recent success: recent latency %v exported", r.Replica, m)
				}
				continue
			}
			fast++
			want := map[string]float64{}
			for q, v := range map[string]time.Duration{"0.5": r.Recent.P50, "0.9": r.Recent.P90, "0.99": r.Recent.P99, "0.999": r.Recent.P999} {
				want[skey("hedge_replica_latency_recent_seconds", append(ls, "quantile="+q)...)] = v.Seconds()
			}
			checkValues(t, got, want)
			recent := got[skey("hedge_replica_latency_recent_seconds", append(ls, "quantile=0.99")...)].GetGauge().GetValue()
			var since float64
			for _, q := range got[key("hedge_replica_latency_seconds", ls...)].GetSummary().GetQuantile() {
				if q.GetQuantile() == 0.99 {
					since = q.GetValue()
				}
			}
			if recent > 0.0021 || since < 0.79 {
				t.Errorf("replica %d: recent p99 %vs, p99 since made %vs; want about 0.002 and 0.8", r.Replica, recent, since)
			}
		}
		if fast == 0 {
			t.Error("no replica has a recent latency: the workload does not test it")
		}
	})
}

// skey is key with the labels sorted, as gather sorts them.
func skey(name string, labels ...string) string {
	return key(name, slices.Sorted(slices.Values(labels))...)
}
