// Package hedgeprom exports the Stats of one or more *hedge.Hedger as
// Prometheus metrics.
//
// A Collector reads Hedger.Stats at scrape time and nothing else: it adds no
// work, lock or allocation to the request path, so a call that sends no hedge
// costs what it cost before (TestCollectorAddsNoAllocation pins it; a scrape
// allocates on the scraping goroutine only). Wire it up once:
//
//	h, _ := hedge.New(hedge.Config{})
//	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h})
//	if err != nil {
//		log.Fatal(err)
//	}
//	prometheus.MustRegister(c) // or reg.MustRegister(c) on your own registry
//	http.Handle("/metrics", promhttp.Handler())
//
// # Labels
//
// Every series carries "hedger", the map key given to New, and, except the
// budget gauge, "op", the operation class. Op values are bounded by the
// Hedger itself: beyond Config.MaxOps classes all share hedge.OtherOp, so a
// caller passing raw paths as op names cannot blow up the series count. No
// label ever holds request data.
//
// # Metrics
//
// With namespace "hedge" (any valid metric-name prefix works):
//
//	hedge_requests_total{hedger,op}                   counter  calls of Do
//	hedge_hedges_sent_total{hedger,op}                counter  copies beyond the primary
//	hedge_hedge_wins_total{hedger,op}                 counter  calls won by a hedge
//	hedge_primary_wins_total{hedger,op}               counter  calls won by the primary
//	hedge_failures_total{hedger,op}                   counter  calls that returned an error
//	hedge_hedges_refused_total{hedger,op,reason}      counter  reason: budget, in_flight, deadline, replicas
//	hedge_shadow_hedges_total{hedger,op}              counter  hedges Shadow mode would have sent
//	hedge_unhedgeable_requests_total{hedger,op}       counter  NotIdempotent calls without a key
//	hedge_primaries_censored_total{hedger,op}         counter  primaries cancelled because a hedge won
//	hedge_wasted_work_seconds_total{hedger,op}        counter  running time of copies that lost
//	hedge_delay_seconds{hedger,op}                    gauge    delay in force now (absent while Never)
//	hedge_budget_tokens{hedger}                       gauge    budget tokens now (absent if unlimited)
//	hedge_latency_seconds{hedger,op,path,quantile}    summary  path: caller, primary, hedge
//
// With WithWatcher, for each hedgewatch.Watcher given:
//
//	hedge_watch_alarmed{hedger}                       gauge    1 while the alarm is raised
//	hedge_watch_shadowed{hedger}                      gauge    1 while the watcher holds the Hedger in Shadow
//	hedge_watch_hedge_rate{hedger}                    gauge    hedges decided per request, last judged interval
//	hedge_watch_baseline_rate{hedger}                 gauge    the baseline that rate is compared with
//
// # Why the delay gauge can be absent
//
// While a live delay warms up (or with Fixed(hedge.Never)) the delay is
// hedge.Never: no hedge will be sent. The series is then omitted rather than
// exported as +Inf, because one +Inf sample turns every avg, max or
// comparison over ops into +Inf or NaN. "requests_total present, delay_seconds
// absent" reads "not hedging yet".
//
// # Why summaries, not histograms
//
// A Hedger keeps its latencies in bounded-memory log-linear histograms
// (package quantile) and its Stats hold only quantiles of them: count, mean,
// p50, p90, p99, p99.9 and max. Those are exported as a Prometheus summary
// whose quantiles are within quantile.RelativeError (about 0.8%) of the exact
// ones. Re-bucketing them into a Prometheus histogram would either lose that
// precision or cost hundreds of series per op; the price of a summary is that
// its quantiles cannot be aggregated across ops, hedgers or instances (take
// the max, or aggregate _sum and _count for a mean). The quantiles cover every
// call since the Hedger was made, not a recent window: use rate() of _sum and
// _count, or of the counters, to see the present.
//
// # Native histograms
//
// The collector exports no Prometheus histogram, classic or native, and
// this is why. client_golang (v1.25) can build a native histogram at
// scrape time, from a snapshot, with prometheus.NewConstNativeHistogram:
// it takes the count, the sum, and the count of each bucket, keyed by its
// index in an exponential schema. A Hedger's Stats hold no bucket counts:
// hedge.Distribution is the count, the sum, the mean, four quantiles and
// the max, and the bucket counts of the Hedger's quantile.Histogram stay
// in its Snapshot, unexported. Building one here would take a change to
// the core that this package cannot make on its own: an accessor of the
// bucket counts in package quantile, carried in Stats. Recording into a
// second, client_golang histogram instead would add work to every call,
// which this package promises not to do (see BenchmarkDoScraped and
// TestCollectorAddsNoAllocation). Were the counts exported, the mapping is
// close: quantile's layout has 64 linear buckets per power of two, and
// native schema 6 has 64 exponential buckets per power of two (bounds
// 2^(i/64)): counting each of ours in the native bucket of its midpoint
// puts no value further than quantile.RelativeError (0.8%) outside the
// bucket it is counted in.
//
// # Dashboard and real-server test
//
// docs/grafana/hedge-dashboard.json is a Grafana dashboard over these
// metrics (hedge rate against the budget, win rate, p99 with and without
// hedging, hedge-path latency, wasted work, refusals by reason, the alarm);
// TestDashboardUsesExportedMetrics checks that every metric its queries
// name is one this package exports. TestPrometheusScrapesWhatClientsCounted
// has a real Prometheus server scrape hedged HTTP traffic and checks,
// through its query API, that the counts, the hedge rate and the win rate
// it stored are exactly the Hedgers' own.
package hedgeprom
