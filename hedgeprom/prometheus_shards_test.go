package hedgeprom_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/promtest"
)

// TestPrometheusScrapesShards runs sharded fan-outs over real HTTP
// servers, 3 shards of 2, each request one hedge.DoFan of a leaf per
// shard that needs 2: shard 0's primaries of every fourth request answer
// only when cancelled (their hedge wins), shard 2's leaves of every third
// request answer only when cancelled (not needed), and shard 1 fails
// every sixth request, never one of those (the fan-out could not
// complete). A real Prometheus server scrapes the
// collector; the per-shard counts, the not-needed leaves, the failures
// and the per-server counts it stored, the servers labelled by address,
// must equal the Hedger's own Stats exactly.
func TestPrometheusScrapesShards(t *testing.T) {
	promtest.Need(t)
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // hang guard
	defer cancel()

	var names []string
	for server := range 6 {
		shard := server / 2
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, _ := strconv.Atoi(r.URL.Query().Get("k"))
			a, _ := strconv.Atoi(r.URL.Query().Get("a"))
			switch {
			case shard == 0 && a == 0 && k%4 == 0, shard == 2 && k%3 == 2:
				<-r.Context().Done()
				return
			case shard == 1 && k%6 == 1:
				http.Error(w, "broken", http.StatusInternalServerError)
				return
			}
			io.WriteString(w, "ok")
		}))
		t.Cleanup(s.Close)
		names = append(names, strings.TrimPrefix(s.URL, "http://"))
	}
	h, err := hedge.New(hedge.Config{Replicas: 6, Shards: hedge.ShardGrid(3, 2), ReplicaNames: names,
		Delay: hedge.Fixed(5 * time.Millisecond), NoBudget: true, MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(base.CloseIdleConnections)

	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"search": h})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	prom := promtest.Start(t, promtest.Options{Targets: []string{serveMetrics(t, reg)}, ScrapeInterval: 100 * time.Millisecond})

	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for k := range next {
				// A failed leaf is part of the traffic: the Hedger
				// counts it, and it is compared below.
				// The fan-out's own budget is lifted: shards 0 and 2
				// can hang in one request, and only their hedges end
				// it (a third copy, a slow shard 1's, must not take
				// the last of a default budget of 2).
				_, _ = hedge.DoFan(ctx, h, "search", 3, hedge.FanOut{Need: 2, Hedges: 100}, func(ctx context.Context, _ int, a hedge.Attempt) (struct{}, error) {
					url := fmt.Sprintf("http://%s/item?k=%d&a=%d", names[a.Replica], k, a.Index)
					return struct{}{}, get(ctx, base, url, 0)
				})
			}
		})
	}
	for k := range 200 {
		next <- k
	}
	close(next)
	wg.Wait()
	stopped := time.Now()
	s := h.OpStats("search")
	if len(s.Shards) != 3 || s.Shards[0].HedgeWins == 0 || s.Shards[1].Failures == 0 || s.NotNeeded == 0 || s.Failures == 0 {
		t.Fatalf("%v %v: the traffic should have had hedge wins on shard 0, failures on shard 1 and leaves not needed", s, s.Shards)
	}

	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gathering: %v", err)
	}
	latest, err := prom.WaitScrapedAfter(ctx, "hedge_requests_total", stopped)
	if err != nil {
		t.Fatal(err)
	}
	at := latest[0].Time
	sel := `{hedger="search",op="search"}`
	checkQueries(ctx, t, prom, at, "the Hedger's Stats", []query{
		{"hedge_requests_total" + sel, float64(s.Requests)},
		{"hedge_failures_total" + sel, float64(s.Failures)},
		{"hedge_not_needed_total" + sel, float64(s.NotNeeded)},
		{"sum(hedge_shard_leaves_total" + sel + ")", float64(s.Requests)},
	})
	for _, sh := range s.Shards {
		ssel := fmt.Sprintf(`{hedger="search",op="search",shard="%d"}`, sh.Shard)
		checkQueries(ctx, t, prom, at, "the Hedger's ShardStats", []query{
			{"hedge_shard_leaves_total" + ssel, float64(sh.Leaves)},
			{"hedge_shard_hedges_sent_total" + ssel, float64(sh.Hedges)},
			{"hedge_shard_hedge_wins_total" + ssel, float64(sh.HedgeWins)},
			{"hedge_shard_stragglers_total" + ssel, float64(sh.Stragglers)},
			{"hedge_shard_failures_total" + ssel, float64(sh.Failures)},
		})
	}
	for _, r := range h.ReplicaStats() {
		rsel := fmt.Sprintf(`{hedger="search",replica=%q}`, r.Name)
		checkQueries(ctx, t, prom, at, "the Hedger's ReplicaStats", []query{
			{"hedge_replica_copies_total" + rsel, float64(r.Copies)},
			{"hedge_replica_hedges_sent_total" + rsel, float64(r.Hedges)},
		})
	}
	t.Logf("%v", s)
	t.Logf("%v", s.Shards)
}
