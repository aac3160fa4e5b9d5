// Package spare runs a server's hedge copies only on capacity that its
// primaries do not want, so that hedging delays no client's primary on
// this server beyond the bounds in "What holds", however many clients
// hedge.
//
// A client alone cannot tell whether a replica is idle: it sees its own
// requests in flight, which are the replica's load only when it sends
// most of the replica's traffic. When many clients share the replicas,
// each client's copies land on queues that other clients fill, and a
// copy that wins for its request delays every primary queued behind it:
// in the simulator, at 90% load and more, the library's default rules
// alone raise the median by up to 14% there (docs/default.md, "Many
// clients"). The server sees what the clients cannot.
//
// A Limiter runs at most Workers requests at once. A request marked as a
// hedge copy ("Hedge-Attempt: N", which hedgehttp.Transport sets on a
// copy sent while another copy of the request runs) waits behind every
// primary. A copy sent when no other copy of its request runs (a
// failover, or the copy sent after a 503) carries no mark: it is the
// request's only copy, and runs as a primary. A primary that finds every
// worker busy takes the worker of a running copy: the copy's context is
// cancelled with cause ErrPreempted, and once its handler has returned
// the copy waits again, first among the copies, to run from the start.
// Its answer is held back until it finishes (Handler), so nothing of a
// preempted run is sent. This is preemptive priority with restart.
//
// # What holds
//
// A primary never waits for a copy that can be preempted. Some copies
// cannot be: a copy with a request body, which cannot be read twice
// (CopyOnce), and a copy that committed its answer, because it outgrew
// MaxBuffer or its handler flushed (Commit). A primary may wait for
// those. They are bounded: a CopyOnce never queues, and runs only on a
// worker free when it comes, with no request waiting; a copy commits
// only while no primary waits; and such copies hold at most
// Config.MaxUnpreemptible workers at once (by default half, at least
// one), so the others are always left to primaries and to copies that
// can be preempted. A copy refused by these rules ends with ErrNoSpare,
// answered as a tied server answers a spare copy with no free worker;
// its primary has the request. So a primary waits for a copy only when
// every worker is busy and some hold copies that cannot be preempted, or
// a preempted copy whose handler has not yet returned.
//
// In the simulator (sim.Config.LowPriorityCopies) such servers keep the
// library's zero Config within 5% of no hedging, or two standard errors,
// at every point measured with one, ten or a hundred clients and
// fan-outs, the worst points measured again with longer runs
// (docs/default.md, "With the servers' help"). The client needs no configuration.
//
// Use it in place of a worker limit the server would have anyway: a
// Limiter with Workers equal to the requests the server can run at once
// without slowing down. Handlers must honour their request's context, as
// they should anyway: a handler that ignores it holds its worker after a
// preemption, and the primary waits for it.
package spare
