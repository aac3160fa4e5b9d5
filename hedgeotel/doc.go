// Package hedgeotel exports the Stats of one or more *hedge.Hedger as
// OpenTelemetry metrics, the counterpart of package hedgeprom.
//
// Register creates observable instruments and one callback that reads
// Hedger.Stats at collection time and nothing else: it adds no work, lock or
// allocation to the request path. Wire it up once:
//
//	h, _ := hedge.New(hedge.Config{})
//	reg, err := hedgeotel.Register(otel.Meter("github.com/tailcut/hedge"),
//		map[string]*hedge.Hedger{"items": h})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer reg.Unregister()
//
// The core package does not import OpenTelemetry; only programs that import
// hedgeotel do. Nothing here adds work to a call of hedge.Do, except
// TracedDo, which a caller uses instead of it.
//
// # Attributes
//
// Every point of a Hedger carries "hedger", the map key given to Register,
// and, except the budget gauge and the replica points, "op", the
// operation class. Op values are bounded by the Hedger itself: beyond
// Config.MaxOps classes all share hedge.OtherOp. The replica points carry
// "replica", the server's label (hedge.ReplicaStats.Name): its
// Config.ReplicaNames entry, such as its address, or else its index as a
// decimal string; either way one value per server, bounded by
// Config.Replicas. The shard points carry "shard", the shard's index as a
// decimal string, for at most WithMaxShards shards per op (128 by
// default); the later shards are summed under shard="other", so 1,000
// shards cost the attribute sets of 129. Tied traffic carries "client" or
// "server", the names given to WithTiedClient and WithTiedServer. No
// attribute ever holds request data.
//
// # Instruments
//
// The names are hedgeprom's with dots for underscores and without its
// "_total" and unit suffixes, which OpenTelemetry carries as the instrument
// kind and unit; an OpenTelemetry Prometheus exporter adds them back
// (hedge.requests becomes hedge_requests_total, hedge.wasted.work
// hedge_wasted_work_seconds_total).
//
//	hedge.requests{hedger,op}                      counter  {request}  calls of Do
//	hedge.hedges.sent{hedger,op}                   counter  {hedge}    copies beyond the primary
//	hedge.hedge.wins{hedger,op}                    counter  {request}  calls won by a hedge
//	hedge.primary.wins{hedger,op}                  counter  {request}  calls won by the primary
//	hedge.failures{hedger,op}                      counter  {request}  calls that returned an error
//	hedge.not_needed{hedger,op}                    counter  {request}  fan-out leaves not sent or cancelled: FanOut.Need was met
//	hedge.hedges.refused{hedger,op,reason}         counter  {hedge}    reason: a hedge.Refusal's name
//	hedge.failovers{hedger,op}                     counter  {copy}     copies sent in place of one that never reached its server
//	hedge.load.views{hedger,op,view}               counter  {decision} hedge decisions by the view of the replica's load read: report, own_view
//	hedge.shadow.hedges{hedger,op}                 counter  {hedge}    hedges Shadow mode would have sent
//	hedge.unhedgeable.requests{hedger,op}          counter  {request}  NotIdempotent calls without a key
//	hedge.primaries.censored{hedger,op}            counter  {request}  primaries cancelled because a hedge won
//	hedge.wasted.work{hedger,op}                   counter  s          running time of copies that lost
//	hedge.delay{hedger,op}                         gauge    s          delay in force now (absent while Never)
//	hedge.budget.tokens{hedger}                    gauge    {token}    budget tokens now (absent if unlimited)
//	hedge.mode{hedger,mode}                        gauge    1          1 for the mode in force now (on, shadow, off), 0 for the others
//	hedge.rollout{hedger}                          gauge    1          the rollout fraction now
//	hedge.rescued.requests{hedger,op}              counter  {request}  calls a hedge won while the primary still ran
//	hedge.saved.at.least{hedger,op}                counter  s          lower bound of the time hedges saved
//	hedge.latency{hedger,op,path,quantile}         gauge    s          path: caller, primary, hedge, holdout; quantile: p50, p90, p99, p999
//	hedge.timer.lag{hedger,op,quantile}            gauge    s          how late hedge timers fired after coming due
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
//	hedge.replica.latency{hedger,replica,quantile}  gauge    s          its copies that succeeded; absent before the first
//	hedge.replica.latency.recent{hedger,replica,quantile}  gauge  s  the same over the last 30 to 60 seconds; absent without one then
//	hedge.replica.in_flight{hedger,replica}         gauge    {copy}     copies running there now
//	hedge.replica.copies{hedger,replica}            counter  {copy}     copies sent there: primaries, hedges, failovers
//	hedge.replica.errors{hedger,replica}            counter  {copy}     copies there that failed
//	hedge.replica.hedges.sent{hedger,replica}       counter  {hedge}    hedge copies sent there
//	hedge.replica.hedge.wins{hedger,replica}        counter  {request}  calls won by a hedge there
//	hedge.replica.probation{hedger,replica}         gauge    1          1 while on probation, else 0
//
// For each shard of a Hedger with Config.Shards (none otherwise), from
// hedge.Stats.Shards, per operation class:
//
//	hedge.shard.leaves{hedger,op,shard}             counter  {request}  requests sent to the shard: leaves and DoShard calls
//	hedge.shard.hedges.sent{hedger,op,shard}        counter  {hedge}    hedge copies sent to its servers
//	hedge.shard.hedge.wins{hedger,op,shard}         counter  {request}  its requests a hedge won
//	hedge.shard.stragglers{hedger,op,shard}         counter  {request}  fan-outs whose last needed answer was the shard's
//	hedge.shard.failures{hedger,op,shard}           counter  {request}  its requests that failed on their own
//
// The shard whose stragglers grow fastest is the one that holds the
// requests up. A leaf cancelled, or never sent, because FanOut.Need
// leaves had answered is not a failure: it counts in hedge.not_needed
// and in neither failures instrument.
//
// hedge.replica.latency covers every copy since the Hedger was made, so
// a past burst of slowness stays in its quantiles for good;
// hedge.replica.latency.recent (hedge.ReplicaStats.Recent) holds the last
// 30 to 60 seconds alone: what each replica does now. hedge.mode and hedge.rollout say what each Hedger runs now, so
// that a kill switch can be checked across instances: after
// SetMode(hedge.Off) everywhere, every Hedger reports 1 under mode=off.
//
// With WithTiedClient, for each tied.Client given (tied.ClientStats):
//
//	hedge.tied.client.calls{client}                 counter  {request}  tied calls
//	hedge.tied.client.second_copies{client}         counter  {copy}     second copies sent
//	hedge.tied.client.copies.dropped{client}        counter  {copy}     copies dropped for their sibling
//	hedge.tied.client.copies.no_spare{client}       counter  {copy}     spare copies refused: no free worker
//	hedge.tied.client.copies.spares_skipped{client} counter  {copy}     spare copies not sent: reports said useless
//	hedge.tied.client.second_wins{client}           counter  {request}  calls won by the second copy
//	hedge.tied.client.failures{client}              counter  {request}  tied calls that returned an error
//	hedge.tied.client.copies.not_sent{client}       counter  {copy}     copies that never reached a server
//
// With WithTiedServer, for each tied.Server given (tied.Stats):
//
//	hedge.tied.server.running{server}               gauge    {request}  requests holding a worker now
//	hedge.tied.server.queued{server}                gauge    {request}  requests waiting in the queue now
//	hedge.tied.server.started{server}               counter  {request}  requests started, tied or not
//	hedge.tied.server.tied_started{server}          counter  {copy}     tied copies started
//	hedge.tied.server.refused{server}               counter  {request}  requests refused, the queue full
//	hedge.tied.server.abandoned{server}             counter  {request}  requests whose context ended first
//	hedge.tied.server.dropped{server}               counter  {copy}     tied copies dropped for their sibling
//	hedge.tied.server.no_spare{server}              counter  {copy}     spare copies refused: no free worker
//	hedge.tied.server.unknown_sibling{server}       counter  {request}  tied requests run untied: sibling not a peer
//	hedge.tied.server.bad_tie{server}               counter  {request}  requests with malformed tie headers
//	hedge.tied.server.claims.sent{server,outcome}   counter  {claim}    outcome: won, lost, failed
//	hedge.tied.server.claims.skipped{server}        counter  {copy}     tied copies started without claiming
//	hedge.tied.server.claims.received{server}       counter  {claim}    authentic claims from peers
//	hedge.tied.server.claims.early{server}          counter  {claim}    of them, before their copy arrived
//	hedge.tied.server.claims.crossed{server}        counter  {claim}    of them, won against this server's claim
//	hedge.tied.server.claims.repeated{server}       counter  {claim}    of them, naming a copy dropped already
//	hedge.tied.server.claims.refused{server}        counter  {claim}    of them, answered lost
//	hedge.tied.server.claims.rejected{server}       counter  {claim}    claims malformed, forged or stale
//	hedge.tied.server.claim.latency{server}         counter  s          round trips of the claims answered
//	hedge.tied.server.claim.latency.max{server}     gauge    s          the longest of them
//
// Register may be given tied clients and servers and no Hedger: a server
// process has none.
//
// Counters are cumulative and monotonic, exactly the Stats counters.
//
// # Why the delay gauge can be absent
//
// While a live delay warms up (or with Fixed(hedge.Never)) the delay is
// hedge.Never: no hedge will be sent. The point is then omitted rather than
// exported as +Inf, which would turn every average, max or comparison over
// ops into +Inf or NaN. "hedge.requests present, hedge.delay absent" reads
// "not hedging yet". Likewise a latency path with no samples yet (no hedge
// ever succeeded, say) has no quantile points.
//
// # Holdout, rescues and time saved: what each can tell
//
// path=holdout is the rollout's control group: while a rollout below 1
// is in force (Hedger.SetRollout), that share of calls, drawn at random,
// runs unhedged on the same replicas at the same time as the hedged ones,
// so its latency against path=caller is the honest measure of what
// hedging buys, the only unbiased one. It has no points at rollout 1 (no
// control group), and path=caller counts the control group too: keep it
// small. hedge.rescued.requests counts calls a hedge won while their
// primary still ran (hedging changed their outcome; by how much, it does
// not say); hedge.saved.at.least is, for those whose primary later
// succeeded, how much later it did: a lower bound, far below the real
// saving where primaries stop as soon as they are cancelled. path=primary
// is the primary copy alone, not the latency without hedging: it is
// censored (a primary cancelled because a hedge won is recorded at its
// running time then), so its high quantiles are lower bounds, and it
// equals path=caller while no hedge wins; it is no control group.
//
// # Why gauges of quantiles, not a histogram
//
// A Hedger keeps its latencies in bounded-memory log-linear histograms
// (package quantile) and its Stats hold only quantiles of them: p50, p90,
// p99 and p99.9, each within quantile.RelativeError (about 0.8%) of the exact
// one. OpenTelemetry's histogram instruments are synchronous: they would need
// a Record on the request path, which this package promises not to add, and
// the API has no observable histogram to fill from the Hedger's own
// buckets. The SDK's exponential histogram aggregation cannot be fed
// either: it aggregates Record calls, one per value. So the quantiles are
// exported as they are, one gauge point per path and quantile. Two things
// follow. They cover every call since the Hedger was made, not a recent
// window: use the rate of the counters to see the present. And they cannot
// be aggregated across ops, hedgers or instances: take the max, never the
// mean or the sum.
//
// Programs that use the OpenTelemetry SDK can have the buckets too:
// package otelhist is an SDK Producer that converts Hedger.Histograms to
// exponential histograms (hedge.latency.distribution) at collection time,
// still adding nothing to a call. It is a separate package because it
// imports the SDK, which this one does not.
//
// # Alarm state
//
// RegisterWatchers exports hedgewatch's state (alarm raised, Hedger held
// in Shadow, the last judged hedge rate and its baseline) as gauges keyed
// by the same "hedger" attribute, the counterpart of hedgeprom.WithWatcher.
//
// # The fleet policy
//
// RegisterFleet exports the policy document a pod runs (package fleet):
// its version, when it was applied, its state, and the documents refused
// by reason, the counterpart of hedgeprom.NewFleet.
//
// # Tracing
//
// TracedDo is hedge.Do with each copy in a span of its own, a child of the
// caller's span: the spans of one call carry the copy's index and kind
// (primary or hedge), its replica, and, once the call is decided, its
// outcome (won, cancelled, lost, failed) and the winner's index; they
// are linked to each other. The root package stays free of OpenTelemetry:
// TracedDo wraps the attempt function, and learns which copy won by
// carrying its index beside the result through hedge.Do. DoHeld has no
// traced counterpart yet.
//
// # Imports
//
// Besides the root package the exporter imports two of the toolkit's
// packages, and only for the stats it exports: tied, for the counters of
// a tied.Client and a tied.Server (WithTiedClient, WithTiedServer), and
// hedgewatch, for the type of a watcher's state (hedgewatch.State). It
// imports no client transport and no other server-side package.
package hedgeotel
