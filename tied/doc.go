// Package tied implements tied requests (Dean and Barroso, "The Tail at
// Scale", 2013) for real services: a server-side admission queue with peer
// cancellation (Server; HTTP middleware here, gRPC in tiedgrpc), and the
// client that sends the two copies (Client and Run; used by
// hedgehttp.Config.Tied and hedgegrpc.WithTied).
//
// # Why the servers must cooperate
//
// A hedge waits for a delay and then sends a second copy: it pays off when
// the first copy is slow, and costs a second execution whenever both run.
// A tied request sends both copies up front, to two distinct replicas,
// each tagged with a tie identifier and the address of the other's
// server. Each server queues its copy; the first server to start its copy
// tells the other server to drop the sibling from its queue. The copy that
// waits least runs, and mostly only one copy runs. Only a server knows
// when a copy leaves its queue, so only servers can do this: the client
// cannot tell a queued copy from a running one.
//
// A Server admits at most Config.Workers requests at a time and queues the
// rest, FIFO, up to Config.MaxQueue (then refuses: 503, or
// ResourceExhausted). When a tied copy leaves the queue to start, its
// server signs a cancel message and sends it to the sibling's server (one
// of Config.Peers, POST DefaultCancelPath for HTTP, the tiedgrpc cancel
// service for gRPC), on a goroutine, at most Config.MaxCancelsInFlight at
// once (more are shed and counted). The receiver drops the sibling if it
// is still queued, answering its client 409 Conflict with DroppedHeader
// (gRPC: Aborted with a DroppedKey trailer), which clients do not count as
// a failure. If the sibling has started, the message is too late: both
// copies run, the client takes the first answer and cancels the other, as
// for a hedge, and the second execution is duplicated work. If the message
// comes before the sibling (the first server was idle and started at
// once), the receiver remembers the tie and drops the sibling on arrival.
// The client's gap between the two copies (DefaultGap, about two network
// round trips) makes that the usual case on an idle service, so that
// there a call runs once. Requests without tie headers are queued and run
// as usual.
//
// # The cancellation delay
//
// The simulator (package sim, strategy tied, Config.CancelDelay) models
// the same protocol: when a tied copy starts service, each other copy of
// the request still waiting is cancelled CancelDelay later; a copy that
// has started by then is not stopped, both run, and the first to finish
// cancels the other. Here the cancellation delay is real: the time from a
// copy's start on one server (the timestamp of its cancel message) to the
// message acting on the other, where it drops the sibling if that is
// still queued (the receiver's clock; on one machine the two clocks
// agree). Servers report it for every cancel message received
// (Stats.CancelLatencySum, CancelLatencyMax; CancelLatencies for
// percentiles). The study's "tied with a 0.1 cancellation delay" is a
// delay of a tenth of the mean service time: a service with 1 ms requests
// whose measured cancellation latency is 100 µs is at that point. The
// simulator's duplicated work, MultiStarted (the share of requests of
// which more than one copy started), is here the sum of the servers'
// Stats.TiedStarted minus the tied calls, over the tied calls; each such
// call also shows as a too-late cancel message (Stats.CancelsTooLate) on
// each of its two servers. Two differences remain: the simulator enqueues
// both copies at arrival where the client here sends the second after a
// gap, and a cancelled running copy stops at once there, while here it
// stops when its handler honours its context.
//
// # Authentication
//
// A cancel message drops work, so only the service's servers may send
// one. It names the tie and the time its copy started, and is signed with
// HMAC-SHA256 keyed with Config.Secret, a random secret of at least 32
// bytes shared by the servers and nobody else (clients do not need it):
//
//	v1.<tie id>.<start, Unix nanoseconds>.<base64url HMAC-SHA256(secret, "tied-cancel-v1\n<tie id>\n<start>")>
//
// The receiver compares signatures in constant time and refuses messages
// whose timestamp is more than Config.MaxSkew (10 s) from its clock, so a
// captured message is useless after that; within it a replay can only
// drop a queued copy of the same tie, whose sibling has started. Tie
// identifiers are 128 random bits (NewID), so nobody can name another
// client's tie. A server sends cancel messages only to Config.Peers: a
// tie header naming another address makes the request run untied, so a
// client cannot make servers send requests elsewhere. HTTPSender and the
// gRPC Sender carry messages in the clear unless given TLS; the signature
// protects their integrity, not their secrecy (they hold no secret).
//
// # What is counted
//
// Stats: requests started (TiedStarted of them tied copies), refused
// (queue full), abandoned (their client left while queued), dropped
// before start; cancel messages sent, failed, shed (over the in-flight
// bound), received, too late (both copies ran: duplicated work), early
// (came before their copy), rejected (forged, stale, malformed); and the
// cancellation latency of each drop. ClientStats: calls, second copies
// sent, copies answered dropped, calls won by the second copy, failures.
//
// # What it is not
//
// It does not stop a copy that has started: the loser of two running
// copies is cancelled by the client, and stops when its handler honours
// its context. It queues unary requests only (no streams). It keeps no
// state across restarts; a tie remembered for 2*MaxSkew is forgotten
// after.
package tied
