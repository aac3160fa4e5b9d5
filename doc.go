// Package hedge sends hedged requests. When a request has outlived the
// normal latency of its kind, it sends a copy to another replica. The
// first answer wins, and the other copies are cancelled.
//
// Done with care, this cuts the tail for a few percent more requests.
// Done naively, it doubles the load on a backend exactly when it is
// slowest. Everything in this package is about the care.
//
// Make one [Hedger] per backend with [New], share it, and send each
// request through [Do]:
//
//	h, err := hedge.New(hedge.Config{Replicas: 3})
//	...
//	item, err := hedge.Do(ctx, h, "GetItem", func(ctx context.Context, a hedge.Attempt) (*Item, error) {
//		return replicas[a.Replica].GetItem(ctx, id)
//	})
//
// The [Attempt] says which copy runs and on which replica. The operation
// name ("GetItem") is a class with its own delay and [Stats].
//
// # The default
//
// The zero [Config] is a safe start. The delay is the live p95 of the
// operation's own latency ([Percentile]). Hedges are budgeted to 10% of
// requests ([DefaultBudget]). At most two copies go. The loser is
// cancelled, and Do waits for it before it returns.
//
// # Hedge the server, not the request
//
// A percentile says that a request is slow, not why. When its server is
// stuck (a stall, a pause, a bad host), a copy elsewhere wins. When the
// request is big, or every server is busy, a copy takes as long and only
// adds load. With [Config.Replicas] set, the zero Config tells the two
// apart from what the client sees of its own traffic:
//
//   - Spare capacity ([Config.MaxReplicaLoad]): a copy goes only to a
//     replica with none of this Hedger's requests in flight.
//   - Payoff ([Config.PayoffWinRate]): a kind of hedge goes on only while
//     its losing copies cost little for how often it wins.
//   - No hiding a stuck replica ([Picker]): a copy cancelled because
//     another won keeps counting as load on its replica for a while.
//
// Across the simulator's worlds, with one, ten or a hundred clients, the
// zero Config is never worse than not hedging, but for processor-sharing
// servers at 90% load and more with many clients. docs/default.md has the
// measurements.
//
// # One decision, two clocks
//
// Every decision lives in a value that never reads the clock. A [Delay]
// says when to send the next copy. A [Budget] says whether we may. A
// [Picker] says where to. A [Mode] says whether to send at all. A refused
// copy has a [Refusal], counted in [Stats.Refused] and told to
// [Config.OnEvent].
//
// The decision is one piece of code, in the module's internal/decide.
// Do drives it on the wall clock. The simulator (hedge sim) drives the
// same code, made from the same Config, on virtual time. A policy tuned
// in the simulator is the code that runs in production.
//
// # The rules of a call
//
//   - The first successful copy wins. By default Do returns only after
//     the losers have returned, so nothing it started outlives it
//     ([Config.ReapInBackground] changes that).
//   - A copy that fails with a retryable error starts the next copy at
//     once. [Permanent] errors, [Config.Retryable] and the caller's
//     context ending end the call. When every copy fails, the error is an
//     [AttemptsError].
//   - A hedge never outlives the caller's deadline. None is sent when the
//     time left is shorter than the delay. [Config.AttemptTimeout] bounds
//     each copy on its own.
//   - A panic in any copy is re-raised on the caller's goroutine as a
//     [PanicError].
//   - A copy that calls runtime.Goexit ends the call with [ErrGoexit].
//   - A delay too long to be due, up to [Never], never hedges.
//   - A request marked [NotIdempotent] is sent once, unless it carries an
//     idempotency key ([WithIdempotencyKey]).
//   - A copy that never reached its server ([NotSent]) is replaced at
//     once, outside the budget.
//
// [DoHeld] is Do for results tied to the winner's context, such as an
// HTTP body.
//
// # Replicas that fail
//
// A replica that fails every copy at once has nothing in flight, so a
// picker that prefers idle replicas would prefer it. Three failed copies
// in a row put a replica on probation. It is out of every pick for a
// second. Then it gets one probe copy at a time. A probe that fails puts
// it out again, for twice as long, up to 30 seconds. At most half the
// replicas are on probation at once. [ReplicaStats] shows it.
//
// # Modes and rollout
//
// [Shadow] makes every decision and counts the hedges it would send, but
// sends none. [Off] sends every request once. [Hedger.SetMode] and
// [Hedger.SetRollout] switch at run time with one atomic store. A
// [ModeVar] switches many Hedgers at once. A rollout below 1 keeps a
// control group unhedged: [Stats.Holdout] against [Stats.Latency] shows
// what hedging gains.
//
// [Hedger.SetLive] changes more while a [Hedger] runs: the mode of each
// operation class, the percentile, the budget, MaxAttempts, and a cap on
// hedges per second ([RefusedRate]). What the [Hedger] learned stays.
// Package fleet applies one policy document to every pod this way.
//
// # Cost
//
// When no hedge fires, the primary runs on the caller's goroutine, and
// a call costs one small allocation (while the attempt function does not
// ask for its context's Done channel). The hedge timers of a Hedger share
// one goroutine, started only while timers are pending, so an idle
// Hedger needs no Close. [Config.PreciseTimers] fires timers within tens
// of microseconds, for sub-millisecond delays. BENCHMARKS.md has the
// numbers.
//
// Inside a testing/synctest bubble, let 50 ms of fake time pass before
// the bubble ends, so that the timer goroutine exits. Precise timers
// spin, so they cannot run in a bubble.
//
// # Fan-outs
//
// [DoFan] runs the leaves of one user request as one decision. The
// request gets a budget and a cap of its own ([FanOut.Hedges],
// [FanOut.InFlight]), on top of the Hedger's. A leaf still running long
// after most of its siblings answered is stuck, whatever the percentile
// says: its copy is due then ([FanOut.Straggle]). That copy still passes
// every rule of the Hedger. [WithFanOut] marks leaves that Do sends one
// by one.
//
// # Shards
//
// Most fan-outs are N shards x R replicas: leaf i can only be served by
// shard i's servers. [Config.Shards] says which servers hold each shard
// ([ShardGrid] for the common layout), and [Config.Replicas] is then the
// number of servers:
//
//	h, err := hedge.New(hedge.Config{Replicas: 30 * 2, Shards: hedge.ShardGrid(30, 2)})
//	...
//	res, err := hedge.DoFan(ctx, h, "Search", 30, hedge.FanOut{}, func(ctx context.Context, i int, a hedge.Attempt) (*Hits, error) {
//		return servers[a.Replica].Search(ctx, a.Shard, query)
//	})
//
// The decision does not change. It keeps its state per server: load in
// flight, the spare-capacity and payoff rules' evidence, probation,
// cancelled losers, load reports. To place a copy of a leaf of shard s,
// the same [Picker] runs over shard s's list of servers. The copies
// held and the servers passed over map to positions in that list, and
// the choice maps back to a server. So a server that holds two shards
// is one server, busy for both. One request budget, the sibling trigger,
// [FanOut.Need] and the canaries work across the shards. [DoShard] is
// Do for a request that one shard serves; Do itself refuses a Hedger
// with shards. [Stats.Shards] shows which shard straggles.
//
// # Memory
//
// A Hedger's memory is bounded by its Config. Each operation class, up
// to [Config.MaxOps] plus [OtherOp], keeps counters and five histograms
// of about 20 KB. A [Percentile] delay adds 2 bytes per latency of its
// window. New refuses windows that would exceed 64 MiB in all.
//
// # What it is not
//
// Package hedge does not retry with backoff, shed load or break
// circuits. It races copies of a request that is slow. Transports for
// net/http, gRPC, Redis and SQL build on Do in their own packages.
package hedge
