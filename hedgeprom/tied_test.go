package hedgeprom_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
	"github.com/tailcut/hedge/tied"
)

// checkValues compares gathered series with the values wanted, by key;
// a counter's or a gauge's value, whichever the series is.
func checkValues(t *testing.T, got series, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		m, ok := got[k]
		if !ok {
			t.Errorf("%s missing", k)
			continue
		}
		v := m.GetCounter().GetValue()
		if m.GetGauge() != nil {
			v = m.GetGauge().GetValue()
		}
		if v != w {
			t.Errorf("%s = %v, want %v", k, v, w)
		}
	}
}

// TestReplicaSeries: each replica of a Hedger that picks replicas is
// exported as the Hedger's ReplicaStats has it, labelled by its index, and
// the failovers as Stats.Failovers; a Hedger without replicas has no
// replica series.
func TestReplicaSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settest.Replicas(t, 30)
		plain := mustNew(t, hedge.Config{})
		hedge.Do(context.Background(), plain, "get", trivial)
		c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h, "plain": plain})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		got := gather(t, reg)

		reps := h.ReplicaStats()
		want := map[string]float64{}
		var errs, hedges, wins, probation int64
		for _, r := range reps {
			ls := []string{"hedger=items", "replica=" + strconv.Itoa(r.Replica)}
			want[key("hedge_replica_in_flight", ls...)] = float64(r.InFlight)
			want[key("hedge_replica_copies_total", ls...)] = float64(r.Copies)
			want[key("hedge_replica_errors_total", ls...)] = float64(r.Errors)
			want[key("hedge_replica_hedges_sent_total", ls...)] = float64(r.Hedges)
			want[key("hedge_replica_hedge_wins_total", ls...)] = float64(r.HedgeWins)
			p := 0.0
			if r.Probation {
				p, probation = 1, probation+1
			}
			want[key("hedge_replica_probation", ls...)] = p
			errs, hedges, wins = errs+r.Errors, hedges+r.Hedges, wins+r.HedgeWins

			k := key("hedge_replica_latency_seconds", ls...)
			sum := got[k].GetSummary()
			if sum == nil || sum.GetSampleCount() != uint64(r.Latency.Count) || sum.GetSampleSum() != r.Latency.Sum.Seconds() {
				t.Errorf("%s = %v, want count %d and sum %v", k, sum, r.Latency.Count, r.Latency.Sum.Seconds())
			}
			for _, q := range sum.GetQuantile() {
				if q.GetQuantile() == 0.99 && r.Latency.Count > 0 && q.GetValue() != r.Latency.P99.Seconds() {
					t.Errorf("%s p99 = %v, want %v", k, q.GetValue(), r.Latency.P99.Seconds())
				}
			}
		}
		s := h.OpStats("get")
		want[key("hedge_failovers_total", "hedger=items", "op=get")] = float64(s.Failovers)
		want[key("hedge_failovers_total", "hedger=plain", "op=get")] = 0
		checkValues(t, got, want)
		if len(reps) != 3 || errs == 0 || hedges == 0 || wins == 0 || probation != 1 || s.Failovers == 0 {
			t.Errorf("the workload missed a series: replicas %v, failovers %d", reps, s.Failovers)
		}
		for k := range got {
			if strings.HasPrefix(k, "hedge_replica_") && strings.Contains(k, "hedger=plain") {
				t.Errorf("%s exported for a Hedger without replicas", k)
			}
		}
		if n := testutil.CollectAndCount(c, "hedge_replica_copies_total"); n != 3 {
			t.Errorf("%d replica series, want 3", n)
		}
	})
}

// TestTiedSeries: a tied client's and a tied server's Stats are exported
// under their names, counters as counters and the running and queued
// requests as gauges; a collector may hold tied traffic and no Hedger.
func TestTiedSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := settest.TiedTraffic(t)
		defer tt.Release()
		c, err := hedgeprom.New("hedge", nil, hedgeprom.WithTiedClient("front", tt.Client), hedgeprom.WithTiedServer("items", tt.Server))
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		got := gather(t, reg)

		cs, ss := tt.Client.Stats(), tt.Server.Stats()
		cl, sv := "client=front", "server=items"
		want := map[string]float64{
			key("hedge_tied_client_calls_total", cl):                 float64(cs.Calls),
			key("hedge_tied_client_second_copies_total", cl):         float64(cs.Seconds),
			key("hedge_tied_client_copies_dropped_total", cl):        float64(cs.Dropped),
			key("hedge_tied_client_copies_no_spare_total", cl):       float64(cs.NoSpare),
			key("hedge_tied_client_copies_spares_skipped_total", cl): float64(cs.SparesSkipped),
			key("hedge_tied_client_second_wins_total", cl):           float64(cs.SecondWins),
			key("hedge_tied_client_failures_total", cl):              float64(cs.Failures),
			key("hedge_tied_client_copies_not_sent_total", cl):       float64(cs.NotSent),

			key("hedge_tied_server_running", sv):                             float64(ss.Running),
			key("hedge_tied_server_queued", sv):                              float64(ss.Queued),
			key("hedge_tied_server_started_total", sv):                       float64(ss.Started),
			key("hedge_tied_server_tied_started_total", sv):                  float64(ss.TiedStarted),
			key("hedge_tied_server_refused_total", sv):                       float64(ss.Refused),
			key("hedge_tied_server_abandoned_total", sv):                     float64(ss.Abandoned),
			key("hedge_tied_server_dropped_total", sv):                       float64(ss.Dropped),
			key("hedge_tied_server_no_spare_total", sv):                      float64(ss.NoSpare),
			key("hedge_tied_server_unknown_sibling_total", sv):               float64(ss.UnknownSibling),
			key("hedge_tied_server_bad_tie_total", sv):                       float64(ss.BadTie),
			key("hedge_tied_server_claims_sent_total", "outcome=won", sv):    float64(ss.ClaimsWon),
			key("hedge_tied_server_claims_sent_total", "outcome=lost", sv):   float64(ss.ClaimsLost),
			key("hedge_tied_server_claims_sent_total", "outcome=failed", sv): float64(ss.ClaimsFailed),
			key("hedge_tied_server_claims_skipped_total", sv):                float64(ss.ClaimsSkipped),
			key("hedge_tied_server_claims_received_total", sv):               float64(ss.ClaimsReceived),
			key("hedge_tied_server_claims_early_total", sv):                  float64(ss.ClaimsEarly),
			key("hedge_tied_server_claims_crossed_total", sv):                float64(ss.ClaimsCrossed),
			key("hedge_tied_server_claims_repeated_total", sv):               float64(ss.ClaimsRepeated),
			key("hedge_tied_server_claims_refused_total", sv):                float64(ss.ClaimsRefused),
			key("hedge_tied_server_claims_rejected_total", sv):               float64(ss.ClaimsRejected),
			key("hedge_tied_server_claim_latency_seconds_total", sv):         ss.ClaimLatencySum.Seconds(),
			key("hedge_tied_server_claim_latency_max_seconds", sv):           ss.ClaimLatencyMax.Seconds(),
		}
		checkValues(t, got, want)
		if len(got) != len(want) {
			t.Errorf("%d series, want %d: %v", len(got), len(want), got)
		}
		for k, m := range got {
			isGauge := strings.Contains(k, "_running{") || strings.Contains(k, "_queued{") || strings.Contains(k, "_max_seconds{")
			if isGauge != (m.GetGauge() != nil) {
				t.Errorf("%s: gauge %v, want %v", k, m.GetGauge() != nil, isGauge)
			}
		}
		for name, v := range map[string]int64{"Calls": cs.Calls, "Seconds": cs.Seconds, "Dropped": cs.Dropped, "SecondWins": cs.SecondWins,
			"Failures": cs.Failures, "NotSent": cs.NotSent, "Running": int64(ss.Running), "Queued": int64(ss.Queued),
			"Started": ss.Started, "TiedStarted": ss.TiedStarted, "Refused": ss.Refused, "Dropped (server)": ss.Dropped,
			"UnknownSibling": ss.UnknownSibling, "BadTie": ss.BadTie, "ClaimsWon": ss.ClaimsWon, "ClaimsLost": ss.ClaimsLost,
			"ClaimsFailed": ss.ClaimsFailed, "ClaimsRejected": ss.ClaimsRejected} {
			if v == 0 {
				t.Errorf("the workload left %s at 0", name)
			}
		}
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	})
}

func TestWithTiedValidates(t *testing.T) {
	for _, m := range settest.TiedMistakes(t) {
		var opts []hedgeprom.Option
		for _, c := range m.Clients {
			opts = append(opts, hedgeprom.WithTiedClient(c.Name, c.V))
		}
		for _, s := range m.Servers {
			opts = append(opts, hedgeprom.WithTiedServer(s.Name, s.V))
		}
		_, err := hedgeprom.New("hedge", nil, opts...)
		if !errors.Is(err, hedgeprom.ErrInvalid) || !strings.Contains(err.Error(), m.Want) {
			t.Errorf("New with %d options = %v, want ErrInvalid mentioning %q", len(opts), err, m.Want)
		}
	}
	// A tied client and a tied server may share a name, and a Hedger.
	cl, err := tied.NewClient(tied.ClientConfig{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := tied.NewServer(tied.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": mustNew(t, hedge.Config{})},
		hedgeprom.WithTiedClient("items", cl), hedgeprom.WithTiedServer("items", sv)); err != nil {
		t.Errorf("New: %v", err)
	}
}

// TestInvalidUTF8OpGathers: an op name that is not valid UTF-8 reaches
// the registry as the Hedger made it valid (U+FFFD in place of the bad
// byte), so that a scrape never fails.
func TestInvalidUTF8OpGathers(t *testing.T) {
	h := mustNew(t, hedge.Config{Delay: hedge.Fixed(3600e9)})
	hedge.Do(context.Background(), h, "GET /\xff/{id}", trivial)
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !utf8.ValidString(lp.GetValue()) {
					t.Errorf("%s: label %s=%q is not valid UTF-8", mf.GetName(), lp.GetName(), lp.GetValue())
				}
				if lp.GetName() == "op" {
					n++
					if lp.GetValue() != "GET /\uFFFD/{id}" {
						t.Errorf("%s: op %q, want %q", mf.GetName(), lp.GetValue(), "GET /\uFFFD/{id}")
					}
				}
			}
		}
	}
	if n == 0 {
		t.Error("no series with an op label")
	}
}
