// Package spare runs a server's hedge copies only on capacity that its
// primaries do not want, so that hedging cannot delay any client's
// primary on this server, however many clients hedge.
//
// A client alone cannot tell whether a replica is idle: it sees its own
// requests in flight, which are the replica's load only when it sends
// most of the replica's traffic. When many clients share the replicas,
// each client's copies land on queues that other clients fill, and a
// copy that wins for its request delays every primary queued behind it:
// in the simulator, at 90% load and more, the library's default rules
// alone raise the median by up to 14% there (docs/default.md, "Many
// clients"). The server sees what the clients cannot. A Limiter runs at most Workers requests at once; a
// request marked as a hedge copy ("Hedge-Attempt: N", which
// hedgehttp.Transport sets on a copy sent while another copy of the
// request runs) waits behind
// every primary, and a primary that finds every worker busy takes the
// worker of a running copy: the copy's context is cancelled with cause
// ErrPreempted, and once its handler has returned the copy waits again,
// first among the copies, to run from the start. Its answer is held back
// until it finishes (Handler), so nothing of a preempted run is sent.
// This is preemptive priority with restart: primaries never wait for a
// copy, and a copy finishes whenever the server has a spell free of
// primaries long enough for it.
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
