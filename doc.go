// Package hedge sends hedged requests: when a request has outlived the
// normal latency of its kind, it sends a copy to another replica and takes
// the first answer. Done with care this cuts the tail for a few percent more
// requests; done naively it doubles the load on a backend exactly when it
// is slowest. Everything here is about the care.
//
// # Using it
//
// Make one Hedger per backend and share it:
//
//	h, err := hedge.New(hedge.Config{Replicas: 3})
//	...
//	item, err := hedge.Do(ctx, h, "GetItem", func(ctx context.Context, a hedge.Attempt) (*Item, error) {
//		return replicas[a.Replica].GetItem(ctx, id)
//	})
//
// The zero Config is a safe start: the delay is the live p95 of the
// operation's own latency, hedges are budgeted to 10% of requests, at most
// two copies are sent, and the loser is cancelled and waited for.
//
// # Hedge the server, not the request
//
// A percentile says that a request is slow, not why. When its server is
// stuck (a stall, a pause, a bad host), a copy elsewhere wins; when the
// request is big, or every server is busy, a copy takes as long and only
// adds load, and hedging makes the tail worse. With Replicas, the zero
// Config tells the two apart from what the client sees of its own
// traffic, whether or not other clients share the replicas, and is never
// worse than not hedging across the simulator's worlds with one, ten or a
// hundred clients, but for processor-sharing servers at 90% load and more
// with many clients (docs/default.md):
//
//   - spare capacity (Config.MaxReplicaLoad): a copy goes only to a
//     replica with none of this Hedger's requests in flight, is asked for
//     again a delay later when there is none, and no copy goes while fewer
//     than a quarter of recent primaries found their replica idle;
//   - evidence and payoff (Config.PayoffWinRate): a hedge is classed by
//     whether its primary waits behind earlier work of this Hedger on its
//     replica, and may go at the delay, or is at the head of it, where it
//     may be slow itself, stuck with its server or queued behind other
//     clients' work, and goes only once the primary has waited three
//     delays; a class goes on only while its losers cost little for how
//     often it wins (copies of big requests lose and run long; copies
//     around a stuck server win or lose cheaply), and a new Hedger starts
//     just short of that and earns its hedges;
//   - no hiding a stuck replica (Picker): a copy cancelled because another
//     won keeps counting as load on its replica for a while.
//
// # One policy, two clocks
//
// Every decision lives in a small policy value that never reads the clock:
// Delay (Fixed, or a live Percentile) says when to send the next copy,
// Budget says whether we may, Picker says where to, and Mode says whether to
// send at all. A Hedger combines them, with the spare-capacity and payoff
// rules, into the decision of a call: when the next copy is due, whether it
// may go and, if not, why (a Refusal, counted in Stats and told to
// Config.OnEvent). That decision, and the sequence that applies it to a
// call, are clock-free code in one place (the module's internal/decide).
// Do drives it on the wall clock; the simulator in package sim drives the
// very same code, made from the same Config, on virtual time, and advise
// replays it on recorded latencies: a policy tuned in the simulator is the
// code that runs in production.
//
// # The rules of a call
//
//   - The first successful copy wins; the others are cancelled, and by
//     default Do returns only after they have returned, so nothing it
//     started outlives it (Config.ReapInBackground returns at once).
//   - A copy that fails with a retryable error starts the next copy at once:
//     a fast failure is better evidence than any delay. A non-retryable error
//     (Permanent, or Config.Retryable) or the caller's context ending ends
//     the call. When all copies fail, the error wraps each of them.
//   - A hedge never outlives the caller's deadline, and none is sent when
//     the time left is shorter than the delay. Config.AttemptTimeout
//     bounds each copy on its own; a copy that runs out is replaced at
//     once, like any failed copy.
//   - A panic in any copy is re-raised on the caller's goroutine. With
//     DoHeld, a winner chosen before the panic is handed to discard and
//     its context cancelled, since the caller never sees it.
//   - A copy that calls runtime.Goexit (t.FailNow inside an attempt) ends
//     the call with ErrGoexit instead of leaving the caller waiting for it.
//   - A delay so long that the time it is due would overflow means Never:
//     Fixed(math.MaxInt64 - 1) never hedges, rather than wrapping around
//     into an immediate hedge.
//   - A request marked NotIdempotent is never copied unless it carries an
//     idempotency key (WithIdempotencyKey), which every copy sees.
//
// # Design choices
//
// The percentile delay is fed the primary copy's own latency, never the
// winner's, and a primary cancelled because a hedge won is recorded at its
// running time then, a lower bound; see Percentile for why.
//
// Shadow mode makes every decision, spends from a twin of the budget so that
// the real one is untouched, and counts "would have hedged"; SetMode and
// SetRollout switch at run time with one atomic store, and a call takes a
// snapshot when it starts.
//
// Hedge timers of a Hedger are served by one goroutine and a heap, rather
// than one runtime timer per call: the timer is armed on every call and
// fires on few, so arming must be cheap. That goroutine is started only when
// a timer comes due, and lives while timers are pending and for 50 ms after,
// so an idle Hedger runs nothing and needs no Close. Inside a testing/synctest bubble, let fake time pass that
// linger before the bubble ends. The runtime's timers fire up to about a
// millisecond late on many Linux machines, which matters for sub-millisecond
// delays (an in-memory store's p95); Config.PreciseTimers sleeps in the
// kernel until shortly before each timer and spins only the last stretch,
// within 5% of a core (see BENCHMARKS.md). A spinning queue does not block
// as synctest needs, so it cannot run inside a synctest bubble.
//
// When no hedge fires, the primary runs on the caller's goroutine: no
// goroutine is started, and the call costs one small allocation, for the
// primary's context, as long as the attempt function does not ask for its
// Done channel (the context is made lazily; a call's state is reused when
// nothing can outlive it; see BENCHMARKS.md).
//
// # Fan-outs
//
// DoFan runs the leaves of one user request as one decision. Two things
// change when leaves go together. The cost composes: hedging the slowest
// 5% of 100 leaves is five copies per request, so the request gets a
// budget and a cap of its own (FanOut.Hedges, FanOut.InFlight), spent on
// top of the Hedger's, which still applies to every copy. And the leaves
// are evidence about each other: the Hedger's delay is a percentile over
// all requests of the class, but a leaf still running long after most
// of its siblings answered, on the same replicas at the same moment, is
// stuck whatever that percentile says. Load that slows every leaf slows
// the siblings' answers too, so the trigger moves with it; a stalled
// replica slows only its own leaves. That trigger only makes a copy due
// earlier: the copy still passes every rule of the Hedger (the
// spare-capacity and payoff rules, the budget). The rule lives in the
// decision the simulator drives too (its fan-out requests), so that what
// the study measures is what DoFan does.
//
// # Memory
//
// A Hedger's memory is bounded by its configuration: per operation class
// (at most Config.MaxOps, plus OtherOp) it keeps counters, five
// fixed-size histograms of about 20 KB each (the caller's latency, the
// primary's, the hedges', the rollout's holdout and the timers' lag), and, for a Percentile delay,
// a window of 2 bytes per latency. New refuses a configuration whose
// windows would exceed 64 MiB, and says which Window
// would fit.
//
// # What it is not
//
// Package hedge does not retry with backoff, shed load or break circuits:
// it races copies of a request that is slow. Transports for net/http, gRPC
// and Redis build on Do in their own packages.
package hedge
