// Package hedgeprom exports the Stats of one or more *hedge.Hedger as
// Prometheus metrics.
//
// A Collector reads Hedger.Stats at scrape time and nothing else: it adds no
// work, lock or allocation to the request path, so a call that sends no hedge
// costs what it cost before. Wire it up once:
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
package hedgeprom
