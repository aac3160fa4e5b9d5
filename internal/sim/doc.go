// Package sim is the discrete-event simulator of hedged and tied requests,
// and the runner of the hedging study (see shared/study-spec.md).
//
// It drives the hedge package's own policy values on a virtual clock: a
// hedge delay is a hedge.Fixed or a hedge.Percentile estimator, the budget
// is a hedge.Budget, and two-choice and random placement go through
// hedge.Picker. What is measured here is the code that runs in production.
//
// # The model
//
// Servers (10 by default) are first-come-first-served queues with one
// service slot each. Requests arrive as a Poisson process. Time is in units
// of the mean service time (mean size 1). Load is the arrival rate of
// requests (not copies) over the servers' total nominal service rate, so
// load 0.9 on 10 servers is 9 arrivals per unit.
//
// Worlds (Config.World):
//
//   - noise: every copy needs a fresh Exp(1) amount of work.
//   - stalls: a request's size is Exp(1), shared by its copies. Each server
//     alternates independently between normal and stalled stretches, both
//     exponential; stalled stretches average StallMean (50) units, normal
//     ones StallMean*(1-StallShare)/StallShare (2,450), so a server is
//     stalled StallShare (2%) of the time, at 1/StallSlowdown (1/20) speed.
//     A copy's remaining work progresses at the current speed: when a
//     server's speed changes its completion is rescheduled. Servers start in
//     the stationary state (stalled with probability StallShare).
//   - bigjobs: sizes are a balanced-means two-phase hyperexponential with
//     mean 1 and squared coefficient of variation SCV (10), shared by
//     copies (see H2Params).
//   - mixed: bigjobs sizes on stalling servers.
//   - lognormal: sizes lognormal with mean 1 and log-sd Sigma; each copy
//     draws a fresh size unless SameSize.
//
// The stalling worlds' capacity is the servers' mean speed,
// 1 - 0.02*(1 - 1/20) = 0.981: Validate refuses a load at or above it. The
// study's highest load, 0.95, is below it and runs (at utilisation near
// 0.97 of nominal; hedging that adds more than about 3% work there makes the
// system unstable, which is one of the things the study shows).
//
// Routing (Config.Routing): two-choice takes the less busy of two distinct
// uniformly drawn servers (busy = waiting + in service; the Picker takes the
// first on a tie, which is a uniform tie break because the draws are
// exchangeable); random takes one uniform draw; least-loaded scans for the
// minimum (ties at random; hedge.Picker has no such mode); pool makes all
// servers share one FCFS queue (an M/G/c system; a free server takes the
// head, and an arriving copy goes to a uniformly chosen idle server). A copy
// never goes to a server that holds a copy of the same request: the held
// servers are passed to the Picker, which excludes them.
//
// Strategies (Config.Strategy): none; hedge-fixed (Config.Delay);
// hedge-p95-per-load and hedge-p95-quiet (Config.Delay is the p95 of an
// unhedged calibration run at the same load, or at load 0.1: see Calibrate);
// hedge-p95-live (hedge.Percentile over the last LiveWindow client-observed
// latencies); hedge-quiet-budget (quiet-day delay plus hedge.NewBudget(
// Budget, BudgetBurst)); default (the library's zero hedge.Config, or
// Config.Hedge); tied (all copies at arrival, on distinct random servers);
// tied-two-choice (tied, each copy placed by the routing).
//
// # One decision, two clocks
//
// Every hedging strategy is a hedge.Config (Config.HedgeConfig), and the
// engine drives the library's own decide.Policy with it on virtual time:
// the same code that decides in hedge.Do when the next copy is due,
// whether the budget, MaxAttempts, MaxHedgesInFlight, a deadline or the
// mode let it go, and why not (RunResult.Refused counts the refusals as a
// Hedger's Stats do). Up to MaxAttempts copies (2); each further hedge goes
// one more delay after the previous one, the delay read from the
// estimator when the request arrived. A live percentile is fed by the rule
// Config.LiveFeed names: the study's (the client's latency) for
// hedge-p95-live, the library's (the primary's own, censored when a hedge
// wins) for default; with instant cancellation the two coincide. Simulator.
// RunScript drives a scripted scenario with a trace of every decision, and
// a test runs one through hedge.Do and the simulator and requires the
// same decisions.
//
// Simulator.Done is told of every request as it completes, to follow
// latency over time. With Config.SlowFor, the correlated world runs one
// scheduled slowdown of every server instead of random stretches, and
// Simulator.MeasureRecovery uses both to time how soon latency comes back
// after it, window by window: a client whose copies keep overloaded
// servers overloaded after the cause is gone (a metastable collapse)
// shows there, where a whole run's percentiles would average it away.
//
// A request's latency is from its arrival to the completion of its first
// finished copy. When that copy finishes, the others are cancelled at once,
// whether waiting or running (NoCancel turns this off: losers run to
// completion and their work counts).
//
// # Many clients
//
// By default one client owns the servers: one Policy decides for all
// traffic, and the load its picker and spare-capacity rule read is a
// server's whole queue, its evidence (decide.Behind) counts every answer
// of the primary's server, and a cancelled loser's ghost is the server's.
// In production many clients share the servers, each with a Hedger of its
// own that sees only its own requests. Config.Clients = C models that:
//
//   - Each arriving request (a fan-out request with all its
//     sub-requests) belongs to one client, drawn by the clients' shares
//     (ClientShares: even, or Zipf with Config.ClientSkew) from a random
//     stream of its own, so that the arrivals, sizes, stalls and routing
//     draws are the same whatever C (common random numbers again: Clients
//     is not part of a point's seed).
//   - Each client has its own decide.Policy, made by decide.FromConfig
//     from its own call of Config.HedgeConfig, and its own delay
//     estimator fed by its own requests: its own budget (a preset's, or
//     the default one, made afresh for each client), spare-capacity
//     state, payoff record and hedges in flight. An explicit
//     hedge.Config.Budget (or ModeVar) in Config.Hedge is one object,
//     shared by every client, as it is by Hedgers that a user gives the
//     same one.
//   - Each client has its own view of each server: its copies there,
//     waiting or in service (the load its two-choice picker and its
//     spare-capacity rule read, as the live engine's is the Hedger's
//     in-flight copies per replica), a ghost after its own cancelled
//     loser, and the count of its copies the server answered (its
//     evidence). The views are flat slices indexed client*servers+server,
//     updated where the queues' counts are: nothing is allocated per
//     request.
//   - Random routing reads no load, so with random routing and no
//     hedging a run does not depend on C. Least-loaded routing reads the
//     whole queues whatever C: it is an oracle that no client has, kept
//     as a yardstick. Pool routing has no placement to make.
//   - With fan-out, a request's sub-requests are its client's, and so
//     fill that client's view of the servers they go to.
//
// With one client its views would be the queues' own counts, so a run
// with Clients 0 or 1 keeps no views and reads the queues, exactly as
// before clients existed (a test runs both ways and finds the same
// results, bit for bit). What the model leaves out: a client sees its
// own answers at once (no network), and clients share nothing but the
// servers (no probes; load reports only with Config.LoadReports).
//
// # Shards
//
// Config.Shards = N splits the servers into N replica sets of
// Servers/N each: shard s is servers s*R to s*R+R-1. Leaf i of every
// request goes to shard i mod N, as a search over N index shards or a
// multi-get over the tablets that hold its keys does, and every copy of
// the leaf (primary, hedge, a hedge asked for again after a refusal,
// tied copies) is placed among that shard's servers only. The placement
// is the flat case's own code: the shard's servers are places 0 to R-1
// of a replica set of their own, the held copies and the candidates
// decide.Policy.Place passed over are mapped to their places, the
// routing picks among them (decide.Picker, reading each server's load
// at its place), and the place maps back to its server. Nothing else
// knows of shards: load, the ghosts, the spare-capacity rule's record,
// the evidence and the payoff rule's classes are per real server, as
// they are per queue without shards; a request's budget, its cap on
// extra copies, the sibling trigger and FanoutNeed span all its leaves,
// whatever their shards. The Policy's replicas (hedge.Config.Replicas)
// are a shard's R, the most distinct places a leaf's copies have; the
// fan-out call's defaults are decide.ShardFanFrom's, those hedge.DoFan
// gives a Hedger with Config.Shards: the budget is twice the leaves one
// stuck server holds (Fanout/Servers), the mark is by a shard's R. Validate refuses servers or a fanout that are not multiples
// of N (the shards would not share the leaves evenly), and pool
// routing, whose one queue lets any server take any leaf. Shards of 0
// and 1 are the flat case, bit for bit.
//
// # Low-priority copies
//
// Config.LowPriorityCopies models servers that help: each FCFS queue
// keeps a second queue for copies beyond the primary, served only when
// no primary waits, and a primary that arrives while a copy is in
// service preempts it (the copy's work is lost, counted as extra work,
// and it waits again at the front of the copies' queue, to start over:
// preemptive-repeat priority). A primary never waits for a copy, which
// the package's tests check at every start of a copy. RunResult.Preempted
// counts the preemptions.
//
// # Load reports
//
// Config.LoadReports models servers that report their load with every
// answer (hedge.Load): when a queue completes a client's copy, that
// client's view of the queue takes the queue's count of copies after the
// answer left and its count of answers, stamped with the time; each copy
// the client places there since is counted on top. A report is thus as
// old as the client's last answer from that queue, which with many
// clients is seldom fresh, and a stalled queue's last report ages while
// it is stalled. The client's Policy reads it as the live engine does
// (decide.Policy.Place and ReportedLoad for the spare-capacity rule,
// decide.Reported for the primary's evidence); routing keeps to the
// client's own view, and a copy that a queue's report turns away where
// the client's own view saw room goes to the picker's next choice.
// With one client a fresh report plus the copies sent since is the
// queue's own count, but for copies cancelled since, which leave without
// an answer to carry a report (TestLoadReportsOneClientExact).
//
// # Choices where the spec is open
//
//   - Tied placement. As in the source, a tied request's copies go to
//     distinct servers drawn uniformly at random: with two-choice routing,
//     one copy on each of the two servers that two-choice samples, however
//     busy they are. Placing each copy by two choices instead (the less
//     busy of two servers per copy, four looked at for two copies) is a
//     better strategy, 3 to 15% better in every tied cell of the study at
//     high load; it is kept as tied-two-choice, so that the study's tied
//     compares like with like.
//   - Tied cancellation. When a tied copy starts service, each other copy of
//     the request that is still waiting is cancelled, instantly by default or
//     CancelDelay later. A copy that has started service by the time the
//     cancellation arrives is not stopped by it (servers cancel queued work,
//     as in Dean and Barroso's tied requests): both copies then run, and the
//     first to finish cancels the other as usual. With instant cancellation
//     both copies are enqueued before either can start, so when both chosen
//     servers are idle exactly one copy runs. NoCancel also disables tied
//     cancellation (every copy runs to completion).
//   - Budget. A hedge refused by the budget is not retried later: that
//     request sends no further copies. A hedge that finds no eligible server
//     gives its token back (Budget.Refund).
//   - Live percentile. It observes the latency of every completed request
//     (client-observed, the winner's, as the spec says; the hedge package's
//     live engine records primaries instead, see hedge.Percentile). Warm-up:
//     MinSamples = Window and no Warmup delay, so no request is hedged until
//     the window holds 2,000 latencies; in the study that happens long
//     before the 100,000 warm-up requests are over. The "delay" reported is
//     the mean of the delay in force at the arrival of the measured requests.
//   - Calibration. One unhedged run of the point's size (1,000,000 requests,
//     100,000 warm-up) with its own seed, at the same world, world
//     parameters and routing; its p95 is the delay. The quiet-day delay is
//     the calibration at load 0.1 of the same world and routing.
//   - Extra work. Work processed on all copies of the measured requests,
//     including the partial work of cancelled copies, divided by the sum of
//     their sizes, minus 1. Where copies draw fresh sizes (noise, lognormal
//     without SameSize) "the size of one copy" is the primary's size. In the
//     noise world with cancellation the expected work per request is exactly
//     1 at any load and strategy (memorylessness: while n copies run the
//     request completes at rate n, which is also the rate of work), so extra
//     work is 0 up to noise there; the tests check this.
//   - Utilisation is the fraction of server-time with a copy in service,
//     integrated from the arrival of the first measured request to the
//     arrival of the first request after the last measured one. In the
//     stalling worlds it exceeds load x work because stalled service is slow.
//   - Measured requests. Requests warmup..requests-1 are measured; arrivals
//     continue (unmeasured) until every measured request has finished and
//     all its copies are gone, so the last measured requests see the same
//     load as the others.
//   - Percentiles are exact nearest-rank percentiles over the measured
//     requests of a run (a linear-time selection, no sketch). A point's
//     value is the mean over its runs, and its standard error is the
//     standard deviation across runs over sqrt(runs).
//   - Fan-out (Config.Fanout k): a request sends k sub-requests at once, and
//     Load counts sub-requests (the request rate is load*servers/k). Each
//     sub-request is routed and hedged on its own (sub-requests of one
//     request may share a server; only copies of one sub-request may not),
//     the live percentile and the calibration use sub-request latencies, and
//     the budget is shared: one bucket, credited for each sub-request. The
//     request finishes when FanoutNeed (default all) have finished; with
//     cancellation on, the rest are then cancelled.
//   - The fan-out call (Config.FanCall): each fan-out request runs as
//     hedge.DoFan runs one. Its decide.Fan, made from the hedge.FanOut
//     by DoFan's own defaults over the simulator's servers, is shared by
//     its sub-requests' plans: their extra copies take a token of the
//     request's budget and a slot of its cap on top of the Hedger's
//     rules, and give the slot back when they end, however they end.
//     When the Mark-th sub-request finishes, the sibling trigger starts:
//     each unfinished sub-request that has sent only its primary gets its
//     hedge timer brought forward to decide.Policy.Due, the timer it had
//     going stale. A copy the Policy retries after a refusal is asked for
//     again a delay later, even when the trigger's time has passed. With
//     FanCall.Canaries c, sub-requests 0 to c-1 go first and the others
//     once all c have finished; the request's latency counts from its
//     arrival. RunResult.FanExtra, FanMost and FanPeak give the extra
//     copies per request, the most of one request, and the most of one in
//     flight at once.
//
// # The study
//
// RunStudy runs the spec's grid: worlds noise, stalls and bigjobs (and,
// separately, mixed) x strategies none, hedge-p95-per-load,
// hedge-p95-quiet, hedge-p95-live, hedge-quiet-budget and tied x the ten
// loads, two-choice routing, 4 runs of 1,000,000 requests with 100,000
// discarded. The variations, each a group of points (a point in two groups
// runs once):
//
//   - random routing: none and hedge-p95-per-load, worlds noise, stalls,
//     bigjobs, all loads ("with and without hedging"; the other strategies
//     are left out to keep the study within its time budget);
//   - budget: hedge-quiet-budget at 5% and 15%, the same three worlds, all
//     loads;
//   - stall length: mean stall 2, 5, 20, 50, 200, 1000 (2% stalled), none
//     and hedge-p95-live at loads 0.3 and 0.7;
//   - cancel delay: tied with instant cancellation and with 0.1, the three
//     worlds, loads 0.8, 0.9 and 0.95 ("high load");
//   - mixed world: the full strategy x load grid;
//   - default: the library's zero hedge.Config against none, live p95
//     and tied in every world of DefaultScenarios;
//   - fan-out: requests of 10, 40 and 100 leaves (StudyFanWidths), none,
//     the default on each leaf, the fan-out call (Config.FanCall), the
//     first 95% of the leaves with and without it, and the call with one
//     canary, worlds noise, stalls, bigjobs and mixed at StudyManyLoads;
//   - clients: 1, 10 and 100 clients (StudyClientCounts) with requests of
//     1, 10 and 40 leaves (StudyClientWidths), none, the default, the
//     default with low-priority copies and the fan-out call, the same
//     worlds and loads.
//
// The fan-out and clients groups run 400,000 leaves per run (100,000
// with Quick) whatever the width, and compare each point with none at
// the same clients, width and need.
//
// One group runs only when StudyOptions.Groups names it (hedge study
// --groups shards), so that the default grid keeps its time and its
// results.json:
//
//   - shards: 30 shards of 2 and of 3 replicas with requests of 30
//     leaves, and 100 shards of 3 with requests of 1,000 leaves, the
//     Tail at Scale's setting (StudyShardTopologies); worlds noise,
//     stalls, bigjobs and mixed at StudyManyLoads, one and ten clients;
//     none, none with random placement within the shard, and the zero
//     hedge.Config in the fan-out call. The baseline of the fan-out
//     call's ratios is none with the same placement (two choices among
//     the shard's replicas by the client's own requests in flight), so
//     that a gain is hedging's; the placement's own gain, that none
//     against random placement, is reported beside it
//     (PointResult.PlacementP50 ...). Runs of 30 leaves have 30,000
//     requests, runs of 1,000 leaves 3,000 (1,000 and 10,000 with Quick).
//
// Calibration runs (one per world, world parameters, routing and load that
// a calibrated strategy needs) run first, on all workers; then all runs of
// all points. The stalls world at 0.95 runs like any other point: it is
// below capacity. Some hedged points there are not: hedging on a quiet-day
// delay at high load adds more work than the servers have spare, the
// queues grow without bound, and their numbers grow with the run length
// rather than converging. They are reported as measured; the utilisation
// column (near 1) shows which they are.
//
// The tables and plots use p99.9 for the stalling worlds (stalls and mixed)
// and p99 for the others; results.json has every percentile. Quick mode
// (StudyOptions.Quick) keeps the grid's shape with 2 runs of 100,000
// requests at loads 0.1, 0.3, 0.5, 0.7, 0.9 and 0.95.
//
// # Time mapping
//
// The hedge policies take time.Duration. One simulated time unit is Unit
// (1 ms): a delay of 4.3 units is hedge.Fixed(4.3 ms), and latencies are
// observed in nanoseconds, where hedge's quantile window keeps 0.8%
// relative error. Delays read back are converted with the same scale.
//
// # Seeds and determinism
//
// A run is a pure function of its Config (Seed included). Each run draws
// from three random streams derived from its seed (SplitMix64 generators of
// the package's own, whose draws inline into the event loop): arrivals and
// request sizes; stall processes; and routing, fresh copy sizes and tie
// breaks; with more than one client, a fourth draws each request's
// client. The study derives a point's seed from the master seed and the point's scenario
// (world, world parameters, load and sizes; see DeriveSeed), and run i's
// seed from that (RunSeed). Routing and strategy are deliberately not part
// of the seed: run i of every strategy at a point sees the same arrivals,
// sizes and stalls (common random numbers), which makes the ratios to
// "none" far less noisy; their standard error uses the paired runs (see
// Ratio). Results never depend on the number of workers or on scheduling.
//
// # Performance
//
// The event loop allocates nothing per event. Each server's next
// completion (it has at most one, FCFS or processor sharing) is a leaf of a
// tournament tree that finds the earliest in O(1) and updates in log2(S)
// branch-free matches, so a completion moved by a stall or cancelled is
// overwritten rather than left stale; the rarer events are value structs
// in a hand-written 4-ary heap; hedge timers (which a fixed delay produces
// in time order) go to a FIFO that needs no sifting; request records and
// queue rings are reused, and stale timers of finished requests are
// recognised by generation counters instead of being removed. The random
// streams are concrete generators, not math/rand/v2's Source interface,
// and the exponential draws a ziggurat. See BenchmarkRunNoiseHedgeFixed,
// and BenchmarkRunYardstick with scripts/sim-yardstick for a comparison
// with a simulator specialised to one case.
//
// # What this package does not do
//
// It does not model networks, message delays (other than the tied
// cancellation delay), failures, retries of failed requests, client-side
// concurrency limits, per-class delays, or servers of different speeds. It
// does not run the live engine (hedge.Do) or real goroutines: it reuses the
// policy values only. The study writes files; plotting is by hand-written
// SVG with no dependencies.
package sim
