// Package exactlyonce is the proof that hedged keyed writes commit
// exactly once: a scenario shared by the module's tests and the command
// `hedge bench-writes`.
//
// Run starts replica processes of an order service that share one store
// (SQLite file, PostgreSQL or Redis). Each replica serves POST /orders
// through the dedup middleware; its handler appends an order line, a
// write that is not idempotent, with the store's Commit, so that the
// line and the outcome commit together, fenced by the claim. Run sends
// keyed writes through hedgehttp with an aggressive policy (the next copy
// after a millisecond, no budget, up to three copies), while replicas
// stall at random (before the middleware, as if queued, and inside the
// handler, holding the claim) and one replica is killed with SIGKILL and
// restarted. A client that gets no committed outcome retries with the
// same key. Afterwards Run counts the order lines of every key in the
// store and compares each key's stored outcome with what its client got.
//
// The replicas are separate processes, so that SIGKILL is real: the
// program named by Config.Command must call MaybeRunReplica first thing
// (a test binary's TestMain; the hedge command).
//
// MeasureOverhead measures, in one process, what the middleware adds to
// the latency of the same handler.
//
// What it is not: a general load generator, or part of the dedup API.
package exactlyonce
