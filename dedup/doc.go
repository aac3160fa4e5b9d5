// Package dedup is the server half of hedged writes: it makes a write
// that carries an idempotency key commit once, however many copies of it
// arrive (hedges, retries, a client that resends after a timeout), and
// answers every copy with the one outcome.
//
// A client marks a write with a key (hedge.NewIdempotencyKey, made once
// per user intent; the Idempotency-Key header with hedgehttp's
// HedgeKeyedWrites), and every copy carries it. New wraps an
// http.Handler; package dedupgrpc does the same for gRPC unary calls.
// Requests without a key pass through untouched, unless Config.RequireKey
// says a write must carry one.
//
// # How a keyed request is handled
//
//  1. The key is validated: 1 to MaxKeyLen bytes of printable ASCII, bare
//     or as a quoted Structured Field string; otherwise 400.
//  2. The request is fingerprinted: SHA-256 over the method, the escaped
//     path, the raw query and the body (read whole, up to MaxRequestBody;
//     413 beyond). Headers are not fingerprinted: they vary between
//     copies (Hedge-Attempt, tracing) without changing the operation.
//  3. The key is put in its scope (Config.Scope): by default
//     (DefaultScope) a SHA-256 of the credentials the request carries,
//     its Authorization and Cookie headers and TLS client certificate,
//     so that two users who send the same key never share an outcome
//     (another user's body and Location are never replayed to them), and
//     the store sees the hash, never the credentials. The Host is not in
//     the default scope, since hedged copies reach each replica with its
//     own Host; a copy whose credentials changed (a refreshed token) is a
//     new write, so a Scope that returns the authenticated account is
//     better where the handler knows it.
//  4. The key is claimed in the Store: an insert that succeeds only if the
//     key is absent, in one atomic step of the store, never a read
//     followed by a write, so that of any number of racing copies, across
//     processes, exactly one wins. The claim carries a lease.
//  5. The winner runs the handler. Its response is buffered, and the
//     outcome (status, the headers in StoredHeaders, the body up to
//     MaxStoredBody) is stored under the key before the response is sent.
//  6. Every other copy waits for that outcome, bounded by its own
//     context, and then replays it with the header Idempotent-Replayed:
//     true. A waiting copy in the same process is woken at once; one in
//     another process reads the store with pauses growing to
//     PollInterval. A copy that arrives after the outcome was stored
//     replays it at once, for the TTL.
//
// # Refusals
//
//   - The key was first used with a different request (another
//     fingerprint): 422 Unprocessable Entity, as the IETF draft on the
//     Idempotency-Key header recommends. The client must make a new key
//     for each operation.
//   - The store fails (down, timing out): 503 with Retry-After. The
//     middleware fails closed: it never runs a keyed request it could not
//     claim, since that could be a duplicate.
//   - A copy's context ends while another copy still holds the claim:
//     409 Conflict with Retry-After (the client has usually gone by then).
//     With Options.InProgress set to RefuseInProgress a copy that finds
//     the key held gets that 409 at once, as the IETF draft describes,
//     instead of waiting. Waiting (WaitInProgress) is the default because
//     the package exists for hedged writes: a hedge copy arrives while
//     the first runs, and its client takes the first answer, so a 409 at
//     once would beat the real outcome to it. Clients that only retry,
//     on their own schedule, may prefer to be told at once.
//   - With Config.RequireKey, a write (any method but GET, HEAD, OPTIONS
//     and TRACE) without a key: 400 Bad Request, saying that the
//     resource requires the Idempotency-Key header.
//   - The first response's body exceeded MaxStoredBody: that response is
//     sent to its client in full, but only a marker is stored, and later
//     copies get 409 with ErrOutcomeTooLarge's message, rather than a
//     truncated body or a second run.
//
// # Leases, crashes and panics
//
// A claim holds for Options.Lease, and the middleware renews it every
// third of a lease while the handler runs (Coordinator.KeepAlive), so a
// handler may run longer than the lease: other copies wait for it. The
// lease ends only when its holder crashes, stalls as a whole process, or
// cannot reach the store to renew it; then a later copy claims the key
// and runs the handler. A request never runs the handler twice: a holder
// that outlived its lease stores its outcome only if the key is still
// free (its handler did run), and otherwise its buffered response is
// discarded and its client gets the outcome of the copy that took over
// (Coordinator.Settle). But the two runs may both have committed their
// writes. To close that window, commit the write and the outcome in one
// transaction fenced by the claim: the SQLite, PostgreSQL and Redis
// stores have Commit helpers for this (see ClaimFromContext), and then a
// write commits exactly once even when a stalled holder wakes up after
// its lease. A handler that hangs keeps its claim for as long as it
// hangs; copies waiting for it give up with their contexts (409).
//
// A handler that panics releases its claim (the panic then goes on to
// net/http): its work is taken as unfinished, and a retry runs it again.
// A handler that returns has finished its work, even when its client left
// meanwhile and even when it wrote no response (an implicit 200): its
// outcome is stored and replayed to the retry. So a handler that gives up
// because its context ended, without writing, must say so with a status
// that Config.Keep rejects (such as 503), or its silence is replayed as
// a success.
// A response whose status Config.Keep rejects releases the claim too, and
// is not replayed; but if the claim was lost while the handler ran (a
// store's Commit answered ErrLostClaim, and the handler refused), the
// client gets the outcome of the copy that took over instead
// (Coordinator.Yield). By default (DefaultKeep) only 2xx and 3xx are kept: a
// 4xx refused the request without doing it, and a 5xx is taken to mean it
// failed, so a retry runs the handler again (with its fresh credentials,
// after the Retry-After of a 429 or 503) rather than getting the refusal
// again for the TTL. A kept outcome is replayed with the headers in
// StoredHeaders, Retry-After and Location among them. If storing the outcome fails after
// the handler ran, the client still gets the handler's response, and the
// claim ends with its lease.
//
// # What hedging a write buys
//
// A hedged write helps only when the slowness comes before the claim: a
// slow network path, a load balancer, a replica whose queue or handshake
// delays the first copy before it reaches the store. Then the hedge copy
// claims first, runs, and answers early, and the first copy replays its
// outcome. Once a copy holds the claim, every other copy can only wait
// for that same run (or be refused, with RefuseInProgress): a handler that
// is slow after the claim, a slow database write, is not hedged away, and
// the hedge only adds a waiting request. Hedge writes for the latency in
// front of the handler, not in it.
//
// # With tied requests
//
// On a server that runs package tied too, put tied outermost and dedup
// inside it: tied.Server.Handler(dedup.New(app, ...)). tied's handler
// queues a copy, claims the tie at its sibling's server and drops the
// sibling before either has started, answering the dropped one 409 with
// Tied-Dropped; only the copy that wins, the one that waited least, calls
// the next handler. So with dedup inside:
//
//   - the dropped copy never reaches the store: no claim, no round trip,
//     no lease held by a request that will not run;
//   - the copy that runs is the one tied chose by queueing time; with
//     dedup outside, whichever copy claimed the key first (usually the
//     first to arrive) would run, however long it then queued, and its
//     sibling would wait in dedup without ever entering tied's queue;
//   - the lease runs from the copy's start, not from its arrival, so
//     time in the queue does not count against it;
//   - tied's 409 is never taken for the write's outcome (with dedup
//     outside, only Keep stands between a dropped copy and a stored 409);
//   - dedup still catches what tied lets through: a tie whose claim went
//     unanswered (ClaimTimeout) starts both copies, and dedup makes them
//     one write; so it does for client retries and hedges.
//
// The cost is that a copy waiting in dedup for another copy's outcome
// holds one of tied's Workers while it waits. Tied pairs rarely wait
// (tied dropped the sibling), so what waits is a retry or a hedge that
// arrived while the first copy ran.
//
// # Stores
//
// MemoryStore, the default, deduplicates within one process: bounded,
// with expiry. Replicated services share a store: dedupsqlite (one node,
// survives restarts), deduppg (PostgreSQL, with a Do that runs the claim
// and the user's write in one transaction), dedupredis. Package storetest
// is the conformance suite every store runs against its real server.
//
// What it is not: a distributed lock service (a lease is not a lock: see
// above), or a cache of GET responses.
package dedup
