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
// Every series of a Hedger carries "hedger", the map key given to New,
// and, except the budget gauge and the replica series, "op", the
// operation class. Op values are bounded by the Hedger itself: beyond
// Config.MaxOps classes all share hedge.OtherOp, so a caller passing raw
// paths as op names cannot blow up the series count, and a name that is
// not valid UTF-8 is made valid (U+FFFD in place of each bad byte) before
// it is counted, so that a scrape never fails on it. The replica series
// carry "replica", the server's label (hedge.ReplicaStats.Name): its
// Config.ReplicaNames entry, such as its address, or else its index as a
// decimal string; either way one value per server, bounded by
// Config.Replicas. The shard series carry "shard", the shard's index as a
// decimal string, for at most WithMaxShards shards per op (128 by
// default); the later shards are summed under shard="other", so 1,000
// shards cost the series of 129. Tied traffic carries "client" or
// "server", the names given to WithTiedClient and WithTiedServer. No
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
//	hedge_not_needed_total{hedger,op}                  counter   fan-out leaves not sent or cancelled: FanOut.Need was met
//	hedge_hedges_refused_total{hedger,op,reason}       counter   reason: a hedge.Refusal's name
//	hedge_failovers_total{hedger,op}                   counter   copies sent in place of one that never reached its server
//	hedge_load_views_total{hedger,op,view}             counter   hedge decisions by the view of the replica's load read: report, own_view
//	hedge_shadow_hedges_total{hedger,op}               counter   hedges Shadow mode would have sent
//	hedge_unhedgeable_requests_total{hedger,op}        counter   NotIdempotent calls without a key
//	hedge_primaries_censored_total{hedger,op}          counter   primaries cancelled because a hedge won
//	hedge_wasted_work_seconds_total{hedger,op}         counter   running time of copies that lost
//	hedge_delay_seconds{hedger,op}                     gauge     delay in force now (absent while Never)
//	hedge_budget_tokens{hedger}                        gauge     budget tokens now (absent if unlimited)
//	hedge_mode{hedger,mode}                            gauge     1 for the mode in force now (on, shadow, off), 0 for the others
//	hedge_rollout{hedger}                              gauge     the rollout fraction now
//	hedge_rescued_requests_total{hedger,op}            counter   calls a hedge won while the primary still ran
//	hedge_saved_at_least_seconds_total{hedger,op}      counter   lower bound of the time hedges saved
//	hedge_latency_seconds{hedger,op,path,quantile}     summary   path: caller, primary, hedge, holdout
//	hedge_latency_distribution_seconds{hedger,op,path} histogram the same latencies, native and classic buckets
//	hedge_timer_lag_seconds{hedger,op,quantile}        summary   how late hedge timers fired after coming due
//
// The refusal reasons are the names of hedge.Refusal (its String), the
// ones hedge.Stats.Refused, hedgectl's "refused" object and the logs
// use: deadline (less time was left before the caller's deadline than
// the delay), replicas (every replica already held a copy), in_flight
// (Config.MaxHedgesInFlight hedges were in flight already), budget (the
// token bucket was empty), busy (the replica the copy would go to had
// more of this Hedger's requests in flight than Config.MaxReplicaLoad
// allows, by default any: it was not idle), payoff (hedges sent on the
// same evidence have not been winning often enough, Config.PayoffWinRate),
// fan_out (a fan-out leaf's copy, its fan-out's own budget or cap spent),
// head (the primary was at the head of its replica's queue and had not
// yet waited three delays), rate (the cap on hedges per second of the
// Hedger's live settings, hedge.Settings.MaxHedgesPerSecond, was spent).
// Each is exported, zero or not. Failovers
// are not hedges: a copy that never reached its server
// (hedge.ErrNotSent) is replaced at once, outside the budget.
//
// For each replica of a Hedger that picks replicas (Config.Replicas above
// 0; none otherwise), from Hedger.ReplicaStats:
//
//	hedge_replica_latency_seconds{hedger,replica,quantile}  summary  its copies that succeeded, send to success
//	hedge_replica_latency_recent_seconds{hedger,replica,quantile}  gauge  the same over the last 30 to 60 seconds
//	hedge_replica_in_flight{hedger,replica}                 gauge    copies running there now
//	hedge_replica_copies_total{hedger,replica}              counter  copies sent there: primaries, hedges, failovers
//	hedge_replica_errors_total{hedger,replica}              counter  copies there that failed
//	hedge_replica_hedges_sent_total{hedger,replica}         counter  hedge copies sent there
//	hedge_replica_hedge_wins_total{hedger,replica}          counter  calls won by a hedge there
//	hedge_replica_probation{hedger,replica}                 gauge    1 while on probation, else 0
//
// For each shard of a Hedger with Config.Shards (none otherwise), from
// hedge.Stats.Shards, per operation class:
//
//	hedge_shard_leaves_total{hedger,op,shard}               counter  requests sent to the shard: leaves and DoShard calls
//	hedge_shard_hedges_sent_total{hedger,op,shard}          counter  hedge copies sent to its servers
//	hedge_shard_hedge_wins_total{hedger,op,shard}           counter  its requests a hedge won
//	hedge_shard_stragglers_total{hedger,op,shard}           counter  fan-outs whose last needed answer was the shard's
//	hedge_shard_failures_total{hedger,op,shard}             counter  its requests that failed on their own
//
// The shard whose stragglers_total grows fastest is the one that holds
// the requests up; its hedge_wins_total over hedges_sent_total says how
// often its copies save a leaf. The servers that hold it are in the
// replica series, labelled by name. A leaf cancelled, or never sent,
// because FanOut.Need leaves had answered is not a failure: it counts in
// hedge_not_needed_total and in neither failures series.
//
// The replica latency since the Hedger was made is a summary only: a
// Hedger keeps no per-replica buckets to fill a histogram from. Its
// quantiles keep a past burst of slowness for good, so that every replica
// that went through one looks slow; hedge_replica_latency_recent_seconds
// (hedge.ReplicaStats.Recent) holds the last 30 to 60 seconds alone, the
// quantiles 0.5, 0.9, 0.99 and 0.999 as gauges, and is absent for a
// replica with no success in that time.
//
// # What runs now
//
// hedge_mode and hedge_rollout say what each Hedger runs now, so that a
// kill switch can be checked across pods: after SetMode(hedge.Off) on
// every instance, sum by (mode) (hedge_mode) counts every Hedger under
// mode="off" and none under mode="on"; an instance left behind shows at
// once. Hedgers that share a hedge.ModeVar report the same mode.
//
// With WithTiedClient, for each tied.Client given (tied.ClientStats):
//
//	hedge_tied_client_calls_total{client}                   counter  tied calls
//	hedge_tied_client_second_copies_total{client}           counter  second copies sent
//	hedge_tied_client_copies_dropped_total{client}          counter  copies dropped for their sibling
//	hedge_tied_client_copies_no_spare_total{client}         counter  spare copies refused: no free worker
//	hedge_tied_client_copies_spares_skipped_total{client}   counter  spare copies not sent: reports said useless
//	hedge_tied_client_second_wins_total{client}             counter  calls won by the second copy
//	hedge_tied_client_failures_total{client}                counter  tied calls that returned an error
//	hedge_tied_client_copies_not_sent_total{client}         counter  copies that never reached a server
//
// With WithTiedServer, for each tied.Server given (tied.Stats):
//
//	hedge_tied_server_running{server}                       gauge    requests holding a worker now
//	hedge_tied_server_queued{server}                        gauge    requests waiting in the queue now
//	hedge_tied_server_started_total{server}                 counter  requests started, tied or not
//	hedge_tied_server_tied_started_total{server}            counter  tied copies started
//	hedge_tied_server_refused_total{server}                 counter  requests refused, the queue full
//	hedge_tied_server_abandoned_total{server}               counter  requests whose context ended first
//	hedge_tied_server_dropped_total{server}                 counter  tied copies dropped for their sibling
//	hedge_tied_server_no_spare_total{server}                counter  spare copies refused: no free worker
//	hedge_tied_server_unknown_sibling_total{server}         counter  tied requests run untied: sibling not a peer
//	hedge_tied_server_bad_tie_total{server}                 counter  requests with malformed tie headers
//	hedge_tied_server_claims_sent_total{server,outcome}     counter  outcome: won, lost, failed
//	hedge_tied_server_claims_skipped_total{server}          counter  tied copies started without claiming
//	hedge_tied_server_claims_received_total{server}         counter  authentic claims from peers
//	hedge_tied_server_claims_early_total{server}            counter  of them, before their copy arrived
//	hedge_tied_server_claims_crossed_total{server}          counter  of them, won against this server's claim
//	hedge_tied_server_claims_repeated_total{server}         counter  of them, naming a copy dropped already
//	hedge_tied_server_claims_refused_total{server}          counter  of them, answered lost
//	hedge_tied_server_claims_rejected_total{server}         counter  claims malformed, forged or stale
//	hedge_tied_server_claim_latency_seconds_total{server}   counter  round trips of the claims answered
//	hedge_tied_server_claim_latency_max_seconds{server}     gauge    the longest of them
//
// A Collector may hold tied clients and servers and no Hedger: a server
// process has none.
//
// With WithWatcher, for each hedgewatch.Watcher given:
//
//	hedge_watch_alarmed{hedger}                        gauge     1 while the alarm is raised
//	hedge_watch_shadowed{hedger}                       gauge     1 while the watcher holds the Hedger in Shadow
//	hedge_watch_hedge_rate{hedger}                     gauge     hedges decided per request, last judged interval
//	hedge_watch_baseline_rate{hedger}                  gauge     the baseline that rate is compared with
//
// # The fleet policy
//
// NewFleet is a second collector, for the policy document a pod runs
// (package fleet): its version, when it was applied, its state, and the
// documents refused by reason. Register it beside the Collector. With
// one series per pod, a query lists the pods that have not applied the
// latest version.
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
// path="primary" is no control group either, and not the latency without
// hedging: it is the primary copy alone, censored (a primary cancelled
// because a hedge won is recorded at its running time then, see
// hedge_primaries_censored_total), so its high quantiles are lower
// bounds, and it equals path="caller" while no hedge wins.
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
// metrics (hedge rate against the budget, win rate, p99 with hedging
// against the holdout, hedge-path latency, wasted work, refusals by
// reason, the alarm, latency with hedging against the holdout, rescues,
// and each replica's p99, error rate and probation);
// TestDashboardUsesExportedMetrics checks that every metric its queries
// name is one this package exports. TestPrometheusScrapesWhatClientsCounted
// has a real Prometheus server scrape hedged HTTP traffic and checks,
// through its query API, that the counts, the hedge rate and the win rate
// it stored are exactly the Hedgers' own, and reads the native
// histograms back with histogram_count, histogram_sum and
// histogram_fraction.
//
// # Imports
//
// Besides the root package the exporter imports two of the toolkit's
// packages, and only for the stats it exports: tied, for the counters of
// a tied.Client and a tied.Server (WithTiedClient, WithTiedServer), and
// hedgewatch, for the type of a watcher's state (hedgewatch.State). It
// imports no client transport and no other server-side package.
package hedgeprom
