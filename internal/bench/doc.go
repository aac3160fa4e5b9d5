// Package bench is the logic of "hedge bench": it measures what hedging
// buys and what it costs against real servers that stall, by running the
// same open-loop workload through several named configurations
// (strategies) and comparing their latency tails and their extra work.
//
// # What runs
//
// A Backend is a set of replicas started on loopback, on free ports, and
// stopped at the end: HTTP (StartHTTP: net/http servers in this process,
// one listener each), Redis (package redisbench: redis-server child
// processes, stopped by pid) and gRPC (package grpcbench: grpc-go servers
// in this process). Each replica can be stalled: an in-process replica's
// handlers all block on a Gate, a redis-server sleeps in DEBUG SLEEP. A
// Contender makes a fresh Client for each run; the strategies registered
// here (none-random, none-two-choice, default, hedge-fixed, ...; see
// RegisterStrategy) are hedge.Configs run through our transports
// (hedgehttp, hedgeredis, hedgegrpc), and other contenders, such as the
// peer libraries in the bench/peers module, plug in through the same
// Client interface.
//
// Two comparisons have runners of their own, on replicas that queue
// behind a worker limit (package tied's middleware): RunTied sets tied
// requests against no hedging and the default, and RunRecovery slows every
// replica at once (Gate.Slow) and times, window by window, how soon each
// configuration's latency comes back after the slowdown ends. StartHTTP
// serves HTTP/1.1 or, with HTTPOptions.H2C, HTTP/2 without TLS, where a
// cancelled copy resets a stream instead of closing its connection.
//
// # Many clients, fan-outs
//
// Scenario.Clients splits each run's requests among that many clients of
// every configuration (ManyClients), each made by the Contender and so
// with a Hedger and connections of its own, as independent services that
// share the replicas are. Scenario.FanOut makes each request read that
// many leaves at once through hedge.WithFanOut and wait for all of them
// (FanOut); latency is then the request's, and the hedging counters count
// leaves.
//
// # Shards
//
// ShardedContender runs a configuration over N shards of R replicas
// (hedge.Config.Shards = hedge.ShardGrid(N, R)), each request one
// hedge.DoFan of Scenario.FanOut leaves, leaf j to shard j mod N. Package
// shardbench runs the N x R servers (HTTP or gRPC) in a child process,
// so that this process's CPU is the client's and the load generator's
// alone: RunResult.SelfCPUPerRequestUs is then the client's cost of a
// request, beside its latency. Scenario.StallOne stalls server 0 alone,
// one bad server among many.
//
// # Open loop, intended start times
//
// Requests arrive as a Poisson process at a fixed rate (Arrivals),
// whatever the backend does: a stalled backend does not slow the arrivals
// down, as it would with a fixed pool of callers waiting for their answers
// (coordinated omission, which hides exactly the queueing a stall causes).
// Each request runs on its own goroutine, so dispatch never waits for
// earlier requests, and its latency is measured from its intended start
// time, not from when it was sent: if the load generator falls behind,
// the delay is charged to the requests, not forgotten.
//
// # Pacing
//
// The Go runtime's timers fire up to about a millisecond late on Linux,
// so sleeping until each intended time would send requests in bursts
// every millisecond. The Pacer sleeps on the runtime timer until 1.5 ms
// before the intended time, then in the kernel (nanosleep, microsecond
// timers) until 200 µs before it, and spins for the rest, yielding the
// processor on each turn. Spinning through the whole 1.5 ms, as a first
// version did, kept a core busy at any rate, CPU taken from the servers
// being measured on a small machine (and their p50 doubled). Its accuracy
// is measured in every run (dispatch lag: when a request's goroutine
// actually started, minus its intended time; p99 per run), never assumed.
// At high rates the gaps are shorter than the margin and the Pacer mostly
// spins: the load generator competes with the client and the servers it
// measures, which the lag makes visible.
//
// # Paired stall schedules
//
// Every replica stalls at Poisson times for a fixed length, so that it is
// stalled a given share of the time (StallSchedule: an alternating renewal
// process). Schedules and arrivals are precomputed from the seed for each
// repeat and replayed relative to the start of the measured span, so every
// configuration compared within a repeat meets the very same stalls at
// the very same moments of the very same arrivals: the comparison is
// paired, and the ratio columns of the report (a configuration's p99 over
// the baseline's in the same repeat) are free of the luck of the draw.
// Repeats use different seeds; the report gives the median and the range
// over repeats, and ConfigResult also the ratios' geometric mean with its
// 95% confidence interval (PairedRatio: Student's t on the log ratios).
// The order of configurations rotates from repeat to repeat.
//
// # Noise control
//
// The machine may be shared. For every run the runner records the CPU
// that other processes used during the measured span (the busy time of
// /proc/stat minus this process's and its children's, from
// /proc/self/stat and /proc/<pid>/stat) and the dispatch lag p99. A run
// above Scenario.MaxOtherCPU or Scenario.MaxLag is flagged noisy and run
// again, within a bounded number of reruns; the least noisy attempt is
// kept, and runs that stayed noisy are counted in the report. Each run
// starts from a collected heap (runtime.GC) and a short pause, and is
// preceded by a warm-up that ramps up to the same rate, fills connection
// pools and the live delay estimate, and is not recorded.
//
// # What it reports
//
// WriteReport writes report.md, results.json and one log-log CCDF plot
// per backend (hand-written SVG): per configuration p50, p90, p99, p99.9
// and max latency, the extra requests sent (as the client counts them, and
// as the servers received them), the hedge win rate, the work wasted on
// losing copies, connection-pool waits (go-redis) and dials (HTTP), and
// the noise of each run.
//
// # What it is not
//
// It is not a load tester for finding a server's capacity, nor a
// microbenchmark of the engine (see the Benchmark functions of package
// hedge and the bench/peers module): it measures one workload's tail with
// and without hedging, with the load generator, the client and the
// in-process servers sharing one machine, which the report says.
package bench
