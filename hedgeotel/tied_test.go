package hedgeotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/internal/hedgeset/settest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestReplicaPoints: each replica of a Hedger that picks replicas is
// observed as its ReplicaStats has it, labelled by its index, and the
// failovers as Stats.Failovers.
func TestReplicaPoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := settest.Replicas(t, 30)
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
		s := h.OpStats("get")
		if p := got[key("hedge.failovers", "hedger=items", "op=get")]; p.value != float64(s.Failovers) || s.Failovers == 0 {
			t.Errorf("hedge.failovers = %+v, want %d (not 0)", p, s.Failovers)
		}
		if p := got[key("hedge.replica.probation", "hedger=items", "replica=0")]; p.value != 1 {
			t.Errorf("replica 0, refusing every connection: probation %+v, want 1", p)
		}
	})
}

// TestTiedPoints: a tied client's and a tied server's Stats are observed
// under their names, counters as counters and the running and queued
// requests as gauges, with no Hedger registered.
func TestTiedPoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tt := settest.TiedTraffic(t)
		defer tt.Release()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		reg, err := hedgeotel.Register(mp.Meter("test"), nil, hedgeotel.WithTiedClient("front", tt.Client), hedgeotel.WithTiedServer("items", tt.Server))
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, reader)
		cs, ss := tt.Client.Stats(), tt.Server.Stats()
		cl, sv := "client=front", "server=items"
		c := func(v int64, unit string) point { return point{float64(v), unit, "counter"} }
		want := points{
			key("hedge.tied.client.calls", cl):                 c(cs.Calls, "{request}"),
			key("hedge.tied.client.second_copies", cl):         c(cs.Seconds, "{copy}"),
			key("hedge.tied.client.copies.dropped", cl):        c(cs.Dropped, "{copy}"),
			key("hedge.tied.client.copies.no_spare", cl):       c(cs.NoSpare, "{copy}"),
			key("hedge.tied.client.copies.spares_skipped", cl): c(cs.SparesSkipped, "{copy}"),
			key("hedge.tied.client.second_wins", cl):           c(cs.SecondWins, "{request}"),
			key("hedge.tied.client.failures", cl):              c(cs.Failures, "{request}"),
			key("hedge.tied.client.copies.not_sent", cl):       c(cs.NotSent, "{copy}"),

			key("hedge.tied.server.running", sv):                       {float64(ss.Running), "{request}", "gauge"},
			key("hedge.tied.server.queued", sv):                        {float64(ss.Queued), "{request}", "gauge"},
			key("hedge.tied.server.started", sv):                       c(ss.Started, "{request}"),
			key("hedge.tied.server.tied_started", sv):                  c(ss.TiedStarted, "{copy}"),
			key("hedge.tied.server.refused", sv):                       c(ss.Refused, "{request}"),
			key("hedge.tied.server.abandoned", sv):                     c(ss.Abandoned, "{request}"),
			key("hedge.tied.server.dropped", sv):                       c(ss.Dropped, "{copy}"),
			key("hedge.tied.server.no_spare", sv):                      c(ss.NoSpare, "{copy}"),
			key("hedge.tied.server.unknown_sibling", sv):               c(ss.UnknownSibling, "{request}"),
			key("hedge.tied.server.bad_tie", sv):                       c(ss.BadTie, "{request}"),
			key("hedge.tied.server.claims.sent", sv, "outcome=won"):    c(ss.ClaimsWon, "{claim}"),
			key("hedge.tied.server.claims.sent", sv, "outcome=lost"):   c(ss.ClaimsLost, "{claim}"),
			key("hedge.tied.server.claims.sent", sv, "outcome=failed"): c(ss.ClaimsFailed, "{claim}"),
			key("hedge.tied.server.claims.skipped", sv):                c(ss.ClaimsSkipped, "{copy}"),
			key("hedge.tied.server.claims.received", sv):               c(ss.ClaimsReceived, "{claim}"),
			key("hedge.tied.server.claims.early", sv):                  c(ss.ClaimsEarly, "{claim}"),
			key("hedge.tied.server.claims.crossed", sv):                c(ss.ClaimsCrossed, "{claim}"),
			key("hedge.tied.server.claims.repeated", sv):               c(ss.ClaimsRepeated, "{claim}"),
			key("hedge.tied.server.claims.refused", sv):                c(ss.ClaimsRefused, "{claim}"),
			key("hedge.tied.server.claims.rejected", sv):               c(ss.ClaimsRejected, "{claim}"),
			key("hedge.tied.server.claim.latency", sv):                 {ss.ClaimLatencySum.Seconds(), "s", "counter"},
			key("hedge.tied.server.claim.latency.max", sv):             {ss.ClaimLatencyMax.Seconds(), "s", "gauge"},
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Errorf("%s = %+v (present %v), want %+v", k, g, ok, w)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s unexpected", k)
			}
		}
		if cs.Calls == 0 || cs.SecondWins == 0 || ss.Running == 0 || ss.Queued == 0 || ss.ClaimsWon == 0 || ss.ClaimsLost == 0 || ss.ClaimsFailed == 0 {
			t.Errorf("the workload missed a series: %+v %+v", cs, ss)
		}
		if err := reg.Unregister(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWithTiedValidates(t *testing.T) {
	meter := sdkmetric.NewMeterProvider().Meter("test")
	for _, m := range settest.TiedMistakes(t) {
		var opts []hedgeotel.Option
		for _, c := range m.Clients {
			opts = append(opts, hedgeotel.WithTiedClient(c.Name, c.V))
		}
		for _, s := range m.Servers {
			opts = append(opts, hedgeotel.WithTiedServer(s.Name, s.V))
		}
		reg, err := hedgeotel.Register(meter, nil, opts...)
		if !errors.Is(err, hedgeotel.ErrInvalid) || !strings.Contains(err.Error(), m.Want) || reg != nil {
			t.Errorf("Register with %d options = %v, %v; want ErrInvalid mentioning %q", len(opts), reg, err, m.Want)
		}
	}
}
