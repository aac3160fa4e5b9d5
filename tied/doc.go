// Package tied implements tied requests (Dean and Barroso, "The Tail at
// Scale", 2013) for real services: a server-side admission queue whose tied
// copies claim the right to start at their sibling's server (Server; HTTP
// middleware here, gRPC in tiedgrpc), and the client that sends the two
// copies (Client and Run; used by hedgehttp.Config.Tied and
// hedgegrpc.WithTied).
//
// # Why the servers must cooperate
//
// A hedge waits for a delay and then sends a second copy: it pays off when
// the first copy is slow, and costs a second execution whenever both run.
// A tied request sends both copies up front, to two distinct replicas,
// each tagged with a tie identifier and the address of the other's
// server. A copy about to start claims the tie at the other server, which
// drops the sibling from its queue: only one copy runs. (In the default,
// spare, form only the second copy claims, and only when it finds a free
// worker: see "Two forms".)
// Only a server knows when a copy leaves its queue, so only servers can do
// this: the client cannot tell a queued copy from a running one.
//
// A Server admits at most Config.Workers requests at a time and queues the
// rest, FIFO, up to Config.MaxQueue (then refuses: 503, or
// ResourceExhausted). Requests without tie headers are queued and run as
// usual.
//
// # Two forms
//
// The symmetric form (FormSymmetric, the paper's) queues both copies,
// and the first ready to start claims. Near capacity it loses to
// sending one copy: every copy that starts waits for a claim's round
// trip, a claim ahead commits a call to a server that may stall, and
// both copies lengthen the queues they join (BENCHMARKS.md, "Tied
// requests on real servers").
//
// The spare form (FormSpare, the default) gives the copies roles, sent in
// RoleHeader (gRPC: RoleKey):
//
//   - the primary (copy 0, RolePrimary) queues as an untied request does
//     and starts, when given a worker, without claiming: no primary
//     waits for a round trip. Its tie is only remembered, so that a
//     claim can drop it while it is queued;
//   - the spare (copy 1, RoleSpare), sent Gap later to another replica,
//     runs only on a worker free when it arrives: a server with none
//     refuses it at once (ErrNoSpare; HTTP 409 with DroppedHeader
//     "no-spare", gRPC Aborted with a DroppedKey trailer "no-spare";
//     Stats.NoSpare), without queueing it behind anyone. Given the free
//     worker, it claims its tie at the primary's server, holding that
//     worker for the round trip: if the primary is still queued there it
//     is dropped and the spare runs; if it started, the spare is dropped
//     and frees the worker.
//
// So a spare only ever runs in place of a primary that waits, on a worker
// nobody wanted when it came: the work of a call is done once, as without
// tying, and moved from a queue to an idle worker. The spare's price is
// a message per call (two more, a claim and its answer, when it finds a
// free worker) and a free worker held for a claim's round trip; a
// request arriving within that round trip waits for it. What it cannot
// do is help a primary that started and then stalls: that is a hedge's
// work, and a hedge runs twice.
//
// A spare whose sibling is not among Config.Peers, or whose tie the
// server has seen already, is refused too: it could not claim, and would
// run twice. When the primary never reached its server (ErrNotSent), the
// client sends its twin as a primary instead, so that one replica down
// fails no call (see Run).
//
// # Claim before start
//
// A tied copy does not start before its server has claimed the tie at
// the sibling's server (one of Config.Peers: a POST to the claim path,
// DefaultClaimPath, for HTTP; tiedgrpc's ClaimMethod for gRPC; see "Where
// claims go" below) and had the verdict: a
// signed message sent on the request's own goroutine, whose answer it
// waits for at most Config.ClaimTimeout. The claim is sent when a worker
// frees and the copy is among the next Config.ClaimAhead
// (DefaultClaimAhead, 1) of the queue, so that its round trip overlaps
// the copy's last wait; or, by a copy given a worker without having
// claimed (it arrived at an idle server), holding the worker. The
// receiver decides under its queue's lock, so atomically with respect to
// its own copy:
//
//   - its copy is queued: it is dropped (its client is answered 409
//     Conflict with DroppedHeader; gRPC: Aborted with a DroppedKey
//     trailer, which clients do not count as a failure); verdict go;
//   - its copy has not arrived: a tombstone is kept and the copy is
//     dropped on arrival; go;
//   - its copy was dropped already (a repeated claim): go;
//   - its copy started: lost;
//   - its copy claims too (the two claims crossed):
//     each claim carries a random ticket, and the lower one wins on
//     both servers alike: go if the claimant's ticket is lower (this
//     server's copy is then dropped when its own claim returns), lost
//     otherwise.
//
// On go the claimant starts its copy (when it has a worker); on lost it
// drops it (and gives the worker, if it held one, to the next request).
// So, while claims are answered, a tied call executes exactly once: no
// copy starts before the other's server has promised never to start the
// other one. Tombstones are bounded (Config.MaxTies, oldest forgotten
// first) and forgotten 2*MaxSkew after they were made.
//
// Availability comes before exactly-once. A claim that is not answered in
// time (the peer is down, hung, or too slow) does not stop the copy: it
// starts anyway (Stats.ClaimsFailed), and may then run twice, as a hedge
// would. After a claim to a peer fails, only one claim at a time is sent
// to that peer, a probe, until one is answered again, and copies whose
// sibling is there start without claiming meanwhile
// (Stats.ClaimsSkipped); after three failures in a row, probes are
// Config.ClaimBackoff apart. So a dead or hung peer makes one copy wait
// ClaimTimeout per probe rather than every copy; copies beyond
// Config.MaxClaimsInFlight and after Close start without claiming too.
// Only these unclaimed starts can be duplicated.
//
// The price is one round trip between servers before every tied copy
// starts (Stats.ClaimLatencySum, ClaimLatencies; on loopback 0.2-0.7 ms
// on a loaded machine), paid in latency by a copy that arrives at an idle
// server, and in an idle worker too when a queued copy did not claim
// ahead. Without claiming ahead (ClaimAhead negative), every queued copy
// holds a worker idle for a round trip, which near capacity is capacity
// lost (BENCHMARKS.md). The claim replaces the cancel message that an
// earlier design sent after the start, which cost as many messages but
// let both copies start whenever the sibling's server freed a worker
// within the message's delay (3-12% of calls at half load, more near
// capacity).
//
// Claiming ahead has a price: a copy commits the call to its server
// before a worker is free there, so a stall of the running requests
// holds the call too, where a copy claiming at start would have been
// dropped for its sibling. Only a worker freeing triggers claims ahead,
// so a server already stalled commits no more calls; a larger
// ClaimAhead commits more of them at once.
//
// The client's gap between the two copies (DefaultGap, about two network
// round trips) lets the first copy, on an idle server, claim the tie
// before the second is even queued, so that the second is dropped on
// arrival and the two claims rarely cross.
//
// A copy that provably never reached its server (its error matches
// ErrNotSent: hedgehttp marks a dial that failed before any connection,
// such as a refused one) is not a failure of the call: no server can
// have claimed its tie or run it, so the call is its twin's, sent at once
// if the gap has not passed yet (ClientStats.NotSent). One replica down
// thus fails no call; its twin's server finds the claim unanswered and
// starts the copy anyway. Any other failure of the first copy before the
// gap still ends the call without a second copy: a tied call is no retry.
//
// # Where claims go
//
// An HTTP server posts its claims to each peer's base URL followed by the
// claim path: Config.ClaimPath, by default DefaultClaimPath
// ("/.tied/claim"), which Handler serves (ClaimHandler). Servers of
// earlier versions posted them to DefaultCancelPath ("/.tied/cancel"),
// and so do servers configured with that path: when the claim path is
// either of the two, Handler serves claims at both, so that a service
// whose servers run different versions keeps its claims answered.
// Config.CancelPath is the earlier name of Config.ClaimPath (setting
// both, to different paths, is an error), CancelHandler of ClaimHandler,
// and ErrCancelStatus of ErrClaimStatus.
//
// A gRPC server's Sender calls tiedgrpc.ClaimMethod; tiedgrpc.Register
// serves it and its earlier name, tiedgrpc.CancelMethod, alike.
//
// Middleware that sits in front of the Server and must tell claims from
// the application's requests (to count requests, say) asks
// Server.ServesClaims of a path, or tiedgrpc.IsClaimMethod of a gRPC
// method, rather than comparing names: both know the earlier names too.
//
// A server of an earlier version serves only the cancel path and method.
// An HTTP claim sent to it at the claim path fails, and its copy starts
// unclaimed (Stats.ClaimsFailed) as when the peer is down. To upgrade an
// HTTP service without that, run the new version with Config.ClaimPath
// set to DefaultCancelPath until every server runs it, then drop the
// setting. The gRPC Sender needs no such step: a peer that answers
// ClaimMethod with Unimplemented gets the claim again at CancelMethod,
// and its later claims there.
//
// # The simulator's cancellation delay
//
// The simulator (package sim, strategy tied, Config.CancelDelay) models
// the protocol of cancel messages: when a tied copy starts service, each
// other copy of the request still waiting is cancelled CancelDelay later,
// and a copy that has started by then runs too. With claims no copy
// starts within that delay; instead every tied copy starts a claim round
// trip later than it would have, and its worker idles meanwhile. A claim
// round trip of a tenth of the mean service time is the study's "0.1"
// point in cost, with none of its duplicated work. The simulator's
// duplicated work, MultiStarted (the share of requests of which more than
// one copy started), is here the sum of the servers' Stats.TiedStarted
// minus the tied calls, over the tied calls.
//
// # Authentication
//
// A claim drops work, so only the service's servers may send one. It
// names the tie, a ticket and the time it was sent, and is signed with
// HMAC-SHA256 keyed with Config.Secret, a random secret of at least 32
// bytes shared by the servers and nobody else (clients do not need it):
//
//	v2.<tie id>.<ticket>.<sent, Unix nanoseconds>.<base64url HMAC-SHA256(secret, "tied-claim-v2\n<tie id>\n<ticket>\n<sent>")>
//
// The receiver compares signatures in constant time and refuses messages
// whose timestamp is more than Config.MaxSkew (10 s) from its clock, so a
// captured message is useless after that; within it a replay can only
// drop a copy of the same tie, whose sibling had the right to start, and
// finds it dropped already or started. Tie identifiers are 128 random
// bits (NewID), so nobody can name another client's tie. A server sends
// claims only to Config.Peers: a tie header naming another address makes
// the request run untied, so a client cannot make servers send requests
// elsewhere. A server has at most Config.MaxClaimsInFlight claims in
// flight (a copy beyond it starts unclaimed; in practice a claim is
// sent by one of the Workers running copies or the ClaimAhead copies
// next in the queue), so a server receives at most the sum of its peers'
// bounds at once. HTTPSender and the gRPC Sender carry
// messages in the clear unless given TLS; the signature protects their
// integrity, not their secrecy (they hold no secret).
//
// # What is counted
//
// Stats: requests started (TiedStarted of them tied copies), refused
// (queue full), abandoned (their client left while queued or claiming),
// dropped before start, spare copies refused for want of a free worker
// (NoSpare); claims sent and won, lost, failed (started
// anyway) or skipped; claims received, of which early (tombstones),
// crossed, repeated, refused (answered lost) and rejected (forged, stale,
// malformed); and the round trip of each answered claim. ClientStats:
// calls, second copies sent, copies answered dropped, spare copies
// refused, copies that never reached a server, calls won by the second
// copy, failures.
//
// # What it is not
//
// It does not stop a copy that has started: the loser of two running
// copies (after a failed claim) is cancelled by the client, and stops
// when its handler honours its context. It queues unary requests only
// (no streams). It keeps no state across restarts; a tie remembered for
// 2*MaxSkew is forgotten after. It promises exactly-once execution only
// while claims are answered: it is no substitute for idempotency.
package tied
