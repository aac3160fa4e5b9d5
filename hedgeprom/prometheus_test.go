package hedgeprom_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/internal/promtest"
)

// liveTraffic is real hedged HTTP traffic on loopback, from two Hedgers:
//
//   - "items" drives a hedgehttp.Transport over two replicas with a fixed
//     delay of 10 ms, no budget, and neither the spare-capacity nor the
//     payoff rule: the primary of every fourth key takes 30 ms, so each of
//     those calls is hedged, and the hedge, answered at once, wins unless
//     the machine stalls.
//   - "direct" calls hedge.Do with its own attempt function over
//     net/http, with a fixed delay of 5 ms, a budget of 5% and a burst of
//     2, and the library's other defaults: some slow primaries are hedged
//     and the hedge wins, the rest are refused (by the budget, or a rule)
//     and the primary answers. Its rollout is 0.9: one call in ten, at
//     random, is held out unhedged, the control group of Stats.Holdout.
//
// The test compares what Prometheus scraped with the Hedgers' Stats, so the
// exact numbers do not matter; the design only makes sure that every
// counter the comparison reads is non-zero.
type liveTraffic struct {
	// slowEvery: the primary of every slowEvery-th key is slow (4 unless
	// set); a slow primary answers after 30 ms, or when cancelled.
	slowEvery atomic.Int64
	// slowFor, if positive, is how long a slow primary of the items
	// Hedger takes unless cancelled; zero: until cancelled.
	slowFor atomic.Int64 // nanoseconds

	items, direct *hedge.Hedger
	replicas      []*httptest.Server
	base          *http.Transport
	client        *http.Client // through hedgehttp, for "items"
}

// slowKey reports whether request k has a slow primary.
func (lt *liveTraffic) slowKey(k int) bool { return int64(k)%lt.slowEvery.Load() == 0 }

func startTraffic(t testing.TB) *liveTraffic {
	t.Helper()
	lt := &liveTraffic{}
	lt.slowEvery.Store(4)
	for range 2 {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, _ := strconv.Atoi(r.URL.Query().Get("k"))
			if lt.slowKey(k) && hedgehttp.AttemptIndex(r) == 0 {
				// A slow primary of the items Hedger (plain hedging, no
				// budget) answers only when cancelled (unless slowFor
				// is set): its hedge always goes and wins, however late
				// its timer fires. One of the direct Hedger, whose
				// budget refuses some hedges, answers after 300 ms
				// unless cancelled first: sixty times its 5 ms delay.
				var late <-chan time.Time
				switch {
				case r.URL.Query().Get("via") == "direct":
					late = time.After(300 * time.Millisecond)
				case lt.slowFor.Load() > 0:
					late = time.After(time.Duration(lt.slowFor.Load()))
				}
				select {
				case <-r.Context().Done():
					return
				case <-late:
				}
			}
			io.WriteString(w, "ok")
		}))
		lt.replicas = append(lt.replicas, s)
	}
	t.Cleanup(func() {
		for _, s := range lt.replicas {
			s.Close()
		}
	})
	var err error
	if lt.items, err = hedge.New(hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond), NoBudget: true, Replicas: 2,
		MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}); err != nil {
		t.Fatal(err)
	}
	budget, err := hedge.NewBudget(0.05, 2)
	if err != nil {
		t.Fatal(err)
	}
	if lt.direct, err = hedge.New(hedge.Config{Delay: hedge.Fixed(5 * time.Millisecond), Budget: budget, Replicas: 2,
		MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}); err != nil {
		t.Fatal(err)
	}
	if err := lt.direct.SetRollout(0.9); err != nil {
		t.Fatal(err)
	}
	lt.base = &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(lt.base.CloseIdleConnections)
	rt, err := hedgehttp.New(lt.base, lt.items, hedgehttp.Config{Replicas: []string{lt.replicas[0].URL, lt.replicas[1].URL}})
	if err != nil {
		t.Fatal(err)
	}
	lt.client = &http.Client{Transport: rt}
	return lt
}

// get reads url through rt and fails unless it answers 200 "ok".
func get(ctx context.Context, rt http.RoundTripper, url string, hedgeIndex int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if hedgeIndex > 0 {
		req.Header.Set(hedgehttp.AttemptHeader, strconv.Itoa(hedgeIndex))
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("GET %s: %s %q", url, resp.Status, body)
	}
	return nil
}

// run sends n requests through each Hedger, from workers goroutines, and
// returns once every call has returned.
func (lt *liveTraffic) run(ctx context.Context, n, workers int) error {
	errs := make(chan error, 2*workers)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for k := range next {
				url := lt.replicas[0].URL + "/item?k=" + strconv.Itoa(k)
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					errs <- err
					return
				}
				resp, err := lt.client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil {
					errs <- fmt.Errorf("items, key %d: %w", k, err)
					return
				}
				_, err = hedge.Do(ctx, lt.direct, "get", func(ctx context.Context, a hedge.Attempt) (struct{}, error) {
					return struct{}{}, get(ctx, lt.base, lt.replicas[a.Replica].URL+"/item?via=direct&k="+strconv.Itoa(k), a.Index)
				})
				if err != nil {
					errs <- fmt.Errorf("direct, key %d: %w", k, err)
					return
				}
			}
		})
	}
feed:
	for k := range n {
		select {
		case next <- k:
		case err := <-errs:
			errs <- err
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// refusals is the sum of s's refusals over every reason.
func refusals(s hedge.Stats) int64 {
	var n int64
	for _, r := range hedgeset.Refusals(s) {
		n += r.N
	}
	return n
}

// serveMetrics serves reg on /metrics on a loopback port until the test
// ends, and returns its address.
func serveMetrics(t testing.TB, reg *prometheus.Registry) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return l.Addr().String()
}

// query is a PromQL expression and the one value it must return.
type query struct {
	expr string
	want float64
}

// checkQueries evaluates each query at at and checks that it returns one
// sample of exactly the value wanted, which source names.
func checkQueries(ctx context.Context, t *testing.T, prom *promtest.Server, at time.Time, source string, qs []query) {
	t.Helper()
	for _, q := range qs {
		got, err := prom.Query(ctx, q.expr, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Value != q.want {
			t.Errorf("%s at %v: %v; want exactly %v (%s)", q.expr, at, got, q.want, source)
		}
	}
}

// TestPrometheusScrapesWhatClientsCounted runs hedged HTTP traffic with the
// collector on /metrics, has a real Prometheus server scrape it, and reads
// the hedge counts, the hedge rate and the win rate back from Prometheus's
// query API once a scrape taken after the traffic stopped was stored: they
// must equal the Hedgers' own Stats exactly. The server ingests native
// histograms, and PromQL's histogram functions read the counts and sums
// of hedge_latency_distribution_seconds back, exactly too.
func TestPrometheusScrapesWhatClientsCounted(t *testing.T) {
	promtest.Need(t)
	t.Cleanup(func() { goleak.VerifyNone(t) })                              // registered first: runs after every other cleanup
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // hang guard
	defer cancel()

	lt := startTraffic(t)
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": lt.items, "direct": lt.direct})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	addr := serveMetrics(t, reg)
	// Native histograms are a feature flag up to Prometheus 2.x; with it,
	// the server scrapes the protobuf format, which carries them.
	prom := promtest.Start(t, promtest.Options{Targets: []string{addr}, ScrapeInterval: 100 * time.Millisecond,
		Args: []string{"--enable-feature=native-histograms"}})

	// Prometheus scrapes while the traffic runs.
	if err := lt.run(ctx, 400, 8); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	want := map[string]hedge.Stats{"items": lt.items.OpStats(http.MethodGet), "direct": lt.direct.OpStats("get")}
	for name, s := range want {
		if s.Requests != 400 || s.Hedges == 0 || s.HedgeWins == 0 || s.PrimaryWins == 0 {
			t.Fatalf("%s: %v; the traffic should have hedged some calls and not others", name, s)
		}
	}
	if want["items"].Hedges < 100 {
		t.Errorf("items: %d hedges; each of the 100 slow primaries should have been hedged", want["items"].Hedges)
	}
	if refusals(want["direct"]) == 0 || want["direct"].Holdout.Count == 0 {
		t.Errorf("direct: no refusal or no holdout: %v", want["direct"])
	}

	latest, err := prom.WaitScrapedAfter(ctx, "hedge_requests_total", stopped)
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 2 {
		t.Fatalf("hedge_requests_total: %v; want the two hedgers' series", latest)
	}
	at := latest[0].Time
	for _, s := range latest[1:] {
		if s.Time.After(at) {
			at = s.Time
		}
	}
	for name, s := range want {
		sel := fmt.Sprintf(`{hedger=%q,op=%q}`, name, s.Op)
		checkQueries(ctx, t, prom, at, "the Hedger's Stats", []query{
			{"hedge_requests_total" + sel, float64(s.Requests)},
			{"hedge_hedges_sent_total" + sel, float64(s.Hedges)},
			{"hedge_hedge_wins_total" + sel, float64(s.HedgeWins)},
			{"hedge_primary_wins_total" + sel, float64(s.PrimaryWins)},
			{"hedge_failures_total" + sel, float64(s.Failures)},
			{"hedge_primaries_censored_total" + sel, float64(s.PrimaryCensored)},
			{"sum(hedge_hedges_refused_total" + sel + ")", float64(refusals(s))},
			{`hedge_hedges_refused_total{reason="budget",hedger="` + name + `"}`, float64(s.Refused[hedge.RefusedBudget])},
			{"hedge_wasted_work_seconds_total" + sel, s.WastedWork.Seconds()},
			// The hedge rate (extra load) and the win rate, as a
			// dashboard computes them.
			{"hedge_hedges_sent_total" + sel + " / hedge_requests_total" + sel, float64(s.Hedges) / float64(s.Requests)},
			{"hedge_hedge_wins_total" + sel + " / hedge_hedges_sent_total" + sel, float64(s.HedgeWins) / float64(s.Hedges)},
			{`hedge_latency_seconds{quantile="0.99",path="caller",hedger="` + name + `"}`, s.Latency.P99.Seconds()},
			{`hedge_latency_seconds_count{path="primary",hedger="` + name + `"}`, float64(s.Primary.Count)},
			{`hedge_latency_seconds_sum{path="hedge",hedger="` + name + `"}`, s.HedgePath.Sum.Seconds()},
			{"hedge_delay_seconds" + sel, s.Delay.Seconds()},
			{"hedge_rescued_requests_total" + sel, float64(s.Rescued)},
			{"hedge_saved_at_least_seconds_total" + sel, s.SavedAtLeast.Seconds()},
			{`hedge_latency_seconds_count{path="holdout",hedger="` + name + `"}`, float64(s.Holdout.Count)},
			// The native histograms, read by PromQL's histogram
			// functions: exact counts and sums.
			{`histogram_count(hedge_latency_distribution_seconds{path="caller",hedger="` + name + `"})`, float64(s.Latency.Count)},
			{`histogram_count(hedge_latency_distribution_seconds{path="hedge",hedger="` + name + `"})`, float64(s.HedgePath.Count)},
			{`histogram_count(hedge_latency_distribution_seconds{path="holdout",hedger="` + name + `"})`, float64(s.Holdout.Count)},
			{`histogram_sum(hedge_latency_distribution_seconds{path="primary",hedger="` + name + `"})`, s.Primary.Sum.Seconds()},
			// Every call took at least a microsecond and less than a
			// minute.
			{`histogram_fraction(1e-6, 60, hedge_latency_distribution_seconds{path="caller",hedger="` + name + `"})`, 1},
			{fmt.Sprintf(`sum(hedge_failovers_total{hedger=%q})`, name), float64(s.Failovers)},
			{"sum(hedge_load_views_total" + sel + ")", float64(s.LoadByReport + s.LoadByOwnView)},
			{`hedge_load_views_total{view="own_view",hedger="` + name + `"}`, float64(s.LoadByOwnView)},
		})
	}
	// Each replica, as the Hedgers counted it.
	for name, h := range map[string]*hedge.Hedger{"items": lt.items, "direct": lt.direct} {
		reps := h.ReplicaStats()
		if len(reps) != 2 {
			t.Fatalf("%s: ReplicaStats %v, want two replicas", name, reps)
		}
		for _, r := range reps {
			sel := fmt.Sprintf(`{hedger=%q,replica="%d"}`, name, r.Replica)
			checkQueries(ctx, t, prom, at, "the Hedger's ReplicaStats", []query{
				{"hedge_replica_copies_total" + sel, float64(r.Copies)},
				{"hedge_replica_errors_total" + sel, float64(r.Errors)},
				{"hedge_replica_hedges_sent_total" + sel, float64(r.Hedges)},
				{"hedge_replica_hedge_wins_total" + sel, float64(r.HedgeWins)},
				{"hedge_replica_probation" + sel, 0},
				{"hedge_replica_latency_seconds_count" + sel, float64(r.Latency.Count)},
			})
		}
		// What the Hedger runs: one mode at 1, and its rollout.
		checkQueries(ctx, t, prom, at, "the Hedger's mode and rollout", []query{
			{fmt.Sprintf(`hedge_mode{hedger=%q,mode=%q}`, name, h.Mode().String()), 1},
			{fmt.Sprintf(`sum(hedge_mode{hedger=%q})`, name), 1},
			{fmt.Sprintf(`hedge_rollout{hedger=%q}`, name), h.Rollout()},
		})
	}
	// The hedge rate over both Hedgers, summed as a dashboard does.
	all := float64(want["items"].Hedges+want["direct"].Hedges) / float64(want["items"].Requests+want["direct"].Requests)
	got, err := prom.Query(ctx, "sum(hedge_hedges_sent_total) / sum(hedge_requests_total)", at)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Value != all {
		t.Errorf("overall hedge rate %v; want %v", got, all)
	}
	t.Logf("items: %v", want["items"])
	t.Logf("direct: %v", want["direct"])
}
