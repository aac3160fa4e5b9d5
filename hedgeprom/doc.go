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
//	hedge_requests_total{hedger,op}                    counter   calls of Do
//	hedge_hedges_sent_total{hedger,op}                 counter   copies beyond the primary
//	hedge_hedge_wins_total{hedger,op}                  counter   calls won by a hedge
//	hedge_primary_wins_total{hedger,op}                counter   calls won by the primary
//	hedge_failures_total{hedger,op}                    counter   calls that returned an error
//	hedge_hedges_refused_total{hedger,op,reason}       counter   reason: budget, in_flight, deadline, replicas
//	hedge_shadow_hedges_total{hedger,op}               counter   hedges Shadow mode would have sent
//	hedge_unhedgeable_requests_total{hedger,op}        counter   NotIdempotent calls without a key
//	hedge_primaries_censored_total{hedger,op}          counter   primaries cancelled because a hedge won
//	hedge_wasted_work_seconds_total{hedger,op}         counter   running time of copies that lost
//	hedge_delay_seconds{hedger,op}                     gauge     delay in force now (absent while Never)
//	hedge_budget_tokens{hedger}                        gauge     budget tokens now (absent if unlimited)
//	hedge_rescued_requests_total{hedger,op}            counter   calls a hedge won while the primary still ran
//	hedge_saved_at_least_seconds_total{hedger,op}      counter   lower bound of the time hedges saved
//	hedge_latency_seconds{hedger,op,path,quantile}     summary   path: caller, primary, hedge, holdout
//	hedge_latency_distribution_seconds{hedger,op,path} histogram the same latencies, native and classic buckets
//	hedge_timer_lag_seconds{hedger,op,quantile}        summary   how late hedge timers fired after coming due
//
// With WithWatcher, for each hedgewatch.Watcher given:
//
//	hedge_watch_alarmed{hedger}                        gauge     1 while the alarm is raised
//	hedge_watch_shadowed{hedger}                       gauge     1 while the watcher holds the Hedger in Shadow
//	hedge_watch_hedge_rate{hedger}                     gauge     hedges decided per request, last judged interval
//	hedge_watch_baseline_rate{hedger}                  gauge     the baseline that rate is compared with
//
// # Why the delay gauge can be absent
//
// While a live delay warms up (or with Fixed(hedge.Never)) the delay is
// hedge.Never: no hedge will be sent. The series is then omitted rather than
// exported as +Inf, because one +Inf sample turns every avg, max or
// comparison over ops into +Inf or NaN. "requests_total present, delay_seconds
// absent" reads "not hedging yet".
//
// # Holdout, rescues and time saved: what each can tell
//
// path="holdout" is the rollout's control group: while a rollout below 1
// is in force (Hedger.SetRollout, Config.Rollout), that share of calls,
// drawn at random, runs in Shadow, unhedged, on the same replicas at the
// same time as the hedged ones. Its latency against path="caller" is the
// honest measure of what hedging buys, the only one of these metrics that
// is: an unbiased control group. It is empty at rollout 1 (every call
// hedged, no control group) and says nothing while the mode is Shadow or
// Off. path="caller" counts the control group too, so keep the group
// small (5 to 10%) and the difference small; compare recent means
// (rate of _sum over rate of _count) or, with the histograms, recent
// quantiles, rather than the summary's quantiles since the start.
//
// hedge_rescued_requests_total counts calls won by a hedge while their
// primary was still running: hedging changed their outcome, but by how
// much it does not say. hedge_saved_at_least_seconds_total is, for the
// rescued calls whose primary later returned a success, how much later it
// did: a lower bound of the time saved, and a poor one where primaries
// stop as soon as they are cancelled (they return at once with an error
// and add nothing); it is close to the truth only where primaries run on
// (hedge.Config.ReapInBackground, clients that ignore cancellation).
// path="primary" is no control group either: it is censored (a primary
// cancelled because a hedge won is recorded at its running time then, see
// hedge_primaries_censored_total), so its high quantiles are lower bounds.
//
// # Summaries and histograms
//
// A Hedger keeps its latencies in bounded-memory log-linear histograms
// (package quantile: 64 buckets per power of two), recorded on every call
// whether or not anyone reads them. The collector exports them twice:
//
//   - hedge_latency_seconds, a summary: count, sum, and p50, p90, p99 and
//     p99.9, each within quantile.RelativeError (about 0.8%) of the exact
//     one. Precise, but a summary's quantiles cannot be aggregated across
//     ops, hedgers or instances, and they cover every call since the
//     Hedger was made, not a recent window.
//   - hedge_latency_distribution_seconds, a histogram of the same values
//     with both native buckets (Prometheus native histograms, schema 6)
//     and classic buckets (DefaultBuckets, or WithBuckets). It aggregates
//     (sum by, across instances) and gives recent quantiles:
//     histogram_quantile(0.99, sum by (op) (rate(hedge_latency_distribution_seconds[5m])))
//     on native histograms, or the same over _bucket by le on classic ones.
//
// Both are built at scrape time from Hedger.Stats and Hedger.Histograms:
// no second histogram is recorded on the request path.
//
// Classic buckets stay on by default because most Prometheus servers, and
// every scrape in the text format, read only them: a native-only
// histogram is, to them, a _count, a _sum and one +Inf bucket. Each costs a
// series per bound, per op and path (15 with DefaultBuckets);
// WithBuckets() with no bounds drops them where every scraper reads native
// histograms. A Prometheus server reads the native buckets when it
// scrapes the protobuf format: Prometheus 2.40 to 3.8 do with
// --enable-feature=native-histograms, 3.9 and later with the scrape
// setting scrape_native_histograms. It then stores only the native
// buckets of a histogram that has both, unless the scrape configuration
// asks for the classic ones too (scrape_classic_histograms, named
// always_scrape_classic_histograms from 3.0). The tests run Prometheus
// 2.42 with the feature flag.
//
// # Native buckets and their error
//
// Native schema 6 has 64 exponential buckets per power of two, the
// bucket with index i holding (2^((i-1)/64), 2^(i/64)] seconds: as many
// per octave as the Hedger's own, a finer schema would only spread the
// same counts over more, emptier buckets. The two layouts do not align
// (the Hedger's octaves are powers of two in nanoseconds, not seconds,
// and its buckets are linear within an octave), so a log-linear bucket
// may straddle a native bound. It is not split: each log-linear bucket is
// counted whole in the native bucket, and the classic buckets, that hold
// its midpoint (quantile.Bucket.Mid, the value the Hedger's quantiles
// report; exact zeros go to the zero bucket, threshold
// NativeZeroThreshold). Splitting a count in proportion would need to
// assume how values spread inside a bucket, and would count fractions of
// a call. The error this makes is bounded: every value of a log-linear
// bucket is within quantile.RelativeError of its midpoint, so a value
// counted in the native bucket (a, b] lies in (a(1-e), b(1+e)], e =
// 1/128; a classic bucket le=x may hold values up to x(1+e), and miss
// values down to x(1-e). The counts and the sum are exact.
// TestRebucketingError checks the bound on every bucket of the layout, and
// TestHistogramMatchesClientGolang checks the buckets against a
// client_golang histogram of the same schema and bounds that observed the
// midpoints.
//
// A scrape builds each histogram with a fixed number of allocations,
// whatever the number of buckets in use once one is (an empty histogram
// takes fewer), so TestCollectorAddsNoAllocation can compare a scrape
// before a call with one after it.
//
// # Dashboard and real-server test
//
// docs/grafana/hedge-dashboard.json is a Grafana dashboard over these
// metrics (hedge rate against the budget, win rate, p99 with and without
// hedging, hedge-path latency, wasted work, refusals by reason, the alarm,
// latency with hedging against the holdout, rescues);
// TestDashboardUsesExportedMetrics checks that every metric its queries
// name is one this package exports. TestPrometheusScrapesWhatClientsCounted
// has a real Prometheus server scrape hedged HTTP traffic and checks,
// through its query API, that the counts, the hedge rate and the win rate
// it stored are exactly the Hedgers' own, and reads the native
// histograms back with histogram_count, histogram_sum and
// histogram_fraction.
package hedgeprom
