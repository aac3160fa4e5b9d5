// Package advise answers "what would hedging buy us?" from a team's own
// latencies: it is the logic of "hedge advise".
//
// # Input
//
// A Sample is the recorded latencies of one operation, with the replica
// and send time of each when the input has them. Parse reads durations
// (one per line, with units), CSV, JSON lines, a Prometheus text scrape of
// a histogram's _bucket series, or a Prometheus HTTP API result; parse
// errors name the line and what was expected. A histogram's counts are
// spread evenly within their buckets (Sample.Binned), into at most
// Fields.MaxBinned latencies (MaxBinned, a million, by default): larger
// counts are scaled down, each bucket keeping its share, so that the work
// follows MaxBinned and not the counts. A count above MaxCount (2^53) is
// no counter's and is refused with ErrCount. Probe records a
// sample live with GET or HEAD requests only, at a low fixed rate in
// all, warm-ups included, spread over the resolved addresses. Advise refuses a sample of fewer than MinSample
// latencies.
//
// # Predictions
//
// For each delay (percentiles of the sample and fixed delays), with and
// without the library's default budget, Advise predicts the hedge rate,
// the p50, p99 and p99.9 and the extra work, two ways:
//
//   - Independent copies: a copy's latency is a fresh draw from the
//     sample, latency = min(X1, d + X2), computed exactly from the
//     empirical distribution (no resampling noise); the budget is the
//     library's own hedge.Budget met by the requests in order. No queueing:
//     a copy adds no load.
//   - Queueing: package sim's engine driven by a generated script
//     (sim.Simulator.RunScript): Poisson arrivals at the stated load, copy
//     sizes drawn from the sample, fresh per copy or shared per request,
//     and the library's own decide.Policy deciding (strategy default with
//     the row's hedge.Config). It shows whether the extra load pushes the
//     tail back up, and, with shared sizes, what happens when a slow
//     request is slow wherever it runs.
//
// A third queueing estimate, with stalling servers, models slowness that
// lives in the servers, in stretches of time: servers that stop now and
// then, whose requests wait out the stop, and copies that escape to a
// server not stopped. It fits a stall process to the latencies alone
// (StallFit): the latencies above the valley below the highest plateau
// of the sample's density (where it stops falling fast: a stall spreads
// the requests it catches over its length) are stall-slow, the rest
// ordinary; the share of time a server is stopped and the mean stop are
// those that, simulated without hedging (sim.Stalls, exponential stops),
// make as many requests as slow as the sample has. The simulation is
// needed because placement that avoids busy servers steers requests away
// from a stalled one: far fewer requests are stall-slow than the share of
// time servers are stalled. Stops of one fixed length L fit as
// exponential stops of mean L/2 to 3L/4 (L/2 is the mean wait of a
// request that meets one at a random moment). The rows and the default
// line then run on the fitted stalls with the ordinary latencies as
// fresh service times per copy. It runs only when the sample shows a
// plateau of at least 20 slow latencies, and not when the diagnosis
// places the slowness in the requests; otherwise a note says why it did
// not. Like the moment-local estimate below, it is shown
// beside the others and does not take part in the recommendation.
//
// With send times (a timestamped sample), a further, informative estimate
// draws each copy's latency from the requests sent within half a delay of
// the copy's own send time (the 64 nearest at most; the nearest before and
// after when none was) instead of from the whole sample: a copy sent into
// a burst of slowness is slow too, which
// the independent estimate cannot see. It is shown beside the others and
// does not take part in the recommendation. Given the number of replicas
// (Options.Replicas, or a replica field), it also has a line for the
// library's default: the sample's requests replayed in the order they were
// sent, on a virtual clock, each on the replica the sample names for it
// (or, without a replica field, on the less busy of two replicas,
// hedge.Picker's choice, busy meaning this client's copies in flight
// there), and every copy decided by the library's own decide.Policy for the zero
// Config, driven through its decide.Runtime interface as the live engine
// and the simulator drive it. So every rule of the default applies as it
// ships: a copy only to an idle replica, asked for again a delay later;
// no copy while fewer than a quarter of recent primaries found their
// replica idle; the head wait, which holds the copy of a primary at the
// head of its replica until it has waited three delays; the payoff rule,
// which stops hedges whose losers cost more than their wins allow,
// learning from the replay's outcomes in the order they happen; the
// default budget. The delay is the sample's p95 (where the
// library's live p95 settles; it does not follow the load as the live one
// does). A copy's latency is drawn from its moment, as the estimate's
// other copies are, and with a replica field from the moment's requests
// on the copy's own replica, so that a copy escaping a stopped replica is
// as fast as the others were then: one seeded draw sets the replay's
// course, and the
// percentiles average over the moment's requests; the primaries keep
// their recorded latencies, a copy adding no load to the servers. A
// request asks at most a thousand times, and with a p95 of 0 (a sample
// logged in whole milliseconds) once, as the library asks again only
// after a positive delay. Slowness that holds every replica's requests at
// once, such as a client's pause, keeps them all busy, and the rule holds
// back the hedges it would bring: the simulated estimates, whose requests
// are slow each on its own, hedge those, and overstated the default's
// hedge rate about fourfold against hedge bench, where the replay came
// within a tenth (BENCHMARKS.md). Where copies could not win (big
// requests, slow on any replica), the payoff rule stops them, as it does
// live.
//
// Every row is plain hedging: a fixed delay, at most two copies, the
// default budget or none, and the library's evidence rules (spare
// capacity, payoff) turned off, since latencies alone cannot model them.
// Verdicts use the drill's words and rules (Objective.Judge), keyed to
// the objective (Options.Objective): the p99 by default, as it rests on
// ten times as many latencies as the p99.9, or the p99.9 for slowness too
// rare to reach the p99; when no row cuts the objective's percentile and
// one cuts the other's, the report says so. The recommended configuration
// keeps the evidence rules on, as they only hold back hedges, unless
// Options.PlainHedging asks for the rows' plain hedging.
//
// # The headline
//
// The report leads with what the library will do (Report.Headline). Its
// first line is the default's prediction: the moment-local replay's
// default line when it ran, else the deciding queueing estimate's (fresh
// sizes, or shared when the slowness lives in the requests). The second
// is the recommended configuration as the library runs it
// (Recommendation.Predicted): the same replay or simulation, driving the
// library's own decision with the recommended Config and its rules on.
// A row chosen by plain hedging may hedge far less once the rules act,
// and cut less. When the recommendation is no TAIL CUT so predicted, or
// does not cut the objective's percentile clearly more than the default
// (TailMargin), the headline says to keep the default
// (Report.KeepDefault). Without a load, or send times with replicas, no
// prediction can apply the rules: the headline says so, and the
// recommendation's plain-hedging hedge rate is an upper bound.
//
// A short summary follows (Report.WriteSummary, what hedge advise prints):
// the sample and its percentiles, where its slowness lives, and one table
// of no hedging, the default and the recommendation, from the prediction
// that leads the headline. The full text (Report.WriteText, report.txt)
// adds the details: the replicas, every row of every prediction with what
// it assumes, and the recommendation as Go and as a gRPC service config.
//
// The queueing estimate's servers are single-slot: Options.Replicas (or
// the replicas the sample names, or 10) times Options.Concurrency, the
// requests each replica serves at once. Its load, unless given, is
// inferred from the send times: the rate over the spans in which requests
// were sent (gaps longer than twenty times the median gap are idle and
// left out, so a recording of blocks with pauses between them counts the
// blocks' rate) times the mean latency, over the servers. Each queueing
// estimate also simulates the library's zero Config on the same script
// (Prediction.Default): a live p95 delay, the default budget, and the
// evidence rules, which the simulation can apply because it has replicas
// with queues and hedges that win or lose. It is reported beside the
// rows, not among them: its delay follows the latency and is not one to
// configure.
//
// The independent estimate can weigh a random send lag
// (Options.SendLagP99): a log-normal through the median and p99 that a
// running Hedger reports as Stats.TimerLag.
//
// # Where the slowness lives
//
// Latencies alone cannot tell a slow server from a big request. With
// replicas and send times the sample can: slow requests gathered on one
// replica or in bursts point to servers (a copy elsewhere is fast); slow
// requests spread evenly over replicas and time point to the requests
// (a copy is as slow, and hedging will not help), and Advise then
// recommends no hedging unless the shared-size estimate still cuts the
// tail.
//
// Advise stops with its context's error wherever it is: every loop over
// the sample or the rows checks the context, and the simulations check it
// every few thousand events (sim.Simulator.RunScriptContext).
//
// # What it is not
//
// It does not model failures, retries, deadlines, fan-out, or, in its
// rows, a live percentile delay's drift (a row predicts the fixed delay
// equal to today's percentile; only the default line follows the
// simulated latency), nor, outside the stalled estimate, copies that
// leave together, as those of the requests caught by one stalled server
// do; and its queueing model is single-slot FCFS servers, as in package
// sim. The tests check its predictions against the simulator's
// own worlds (noise, stalls, big jobs) with stated tolerances.
package advise
