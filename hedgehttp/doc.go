// Package hedgehttp is an http.RoundTripper that sends hedged requests: when
// a request has outlived the delay of its operation class, a copy goes to
// another backend (or, with one host, over another connection) and the
// first good answer wins. Every decision of when, whether and where is the
// *hedge.Hedger's, through hedge.DoHeld; this package only decides what an
// HTTP copy is and what an HTTP answer means.
//
//	h, _ := hedge.New(hedge.Config{Replicas: 2})
//	t, err := hedgehttp.New(nil, h, hedgehttp.Config{
//		Replicas: []string{"http://replica-a.example:8080", "http://replica-b.example:8080"},
//		Route:    func(r *http.Request) string { return "/items/{id}" }, // class "GET /items/{id}"
//	})
//	client := &http.Client{Transport: t}
//
// # Which requests are hedged
//
// GET, HEAD, OPTIONS and TRACE are hedged: the rule of net/http's own
// isReplayable. Any other method is never copied, unless the request
// carries a non-empty Idempotency-Key (or X-Idempotency-Key) header and
// Config.HedgeKeyedWrites is set; then every copy carries the same key, so
// that a server that deduplicates by key applies it once. PUT and DELETE
// are idempotent when repeated one after the other, but two copies in
// flight at once can interleave with another client's write, so they count
// as writes here. The request is marked with hedge.NotIdempotent (and, when
// keyed, hedge.WithIdempotencyKey) so that the Hedger itself refuses to
// copy it and counts it in its Stats.Unhedgeable; a key attached to the
// context by an outer caller is cleared for a request that must go once,
// since the server would never see it. Requests with an Upgrade header
// (WebSocket) bypass hedging altogether and go to the base transport as
// they are.
//
// # Bodies
//
// A copy never shares a body reader with another copy. The primary sends
// the request's own Body; each hedge gets a fresh one from GetBody, which
// http.NewRequest sets for in-memory bodies. A body without GetBody is
// read into memory first, up to Config.MaxBodyBuffer (1 MiB by default),
// and every copy reads the buffer (sent with its exact Content-Length). A
// body that does not fit is sent once, unhedged, with the part already
// read put back in front (counted in Stats.Unreplayable); a known
// Content-Length above the limit skips the reading. Buffering waits for
// the whole body before sending: set MaxBodyBuffer negative for bodies
// that must stream (a pipe fed while the response arrives), which are then
// sent once.
//
// # Where a hedge goes
//
// With Config.Replicas, the replicas' origins (scheme, host and port),
// and those of Config.ServiceURLs (names of the service as a whole, such
// as its load balancer's), are the service. Every copy of a request
// addressed to the service, the primary included, goes to the replica
// the Hedger's Picker chooses (hedge.Attempt.Replica; never one holding
// another copy of the request): the URL's scheme and host are replaced,
// the path and query kept, and the Host header follows the new URL
// unless the caller set it to something else on purpose. A request
// addressed to any other origin, such as the target of a redirect that
// a replica answered and http.Client follows, is not the service's: it is
// sent once, as it is, through the base transport, never to a replica
// (counted in Stats.OtherOrigins; the Hedger does not see it). Origins
// are compared in normal form: scheme and host name in lower case, a
// trailing dot dropped, default ports explicit, IP addresses parsed. The
// Hedger must be made with as many replicas as the list has entries, and
// without replicas in single-host mode; New checks both, and rejects a
// list that could never hedge, such as a single replica or two entries
// naming the same host and port.
//
// With one host, a hedge that reuses the primary's connection pool is
// little use: over HTTP/1.1 with MaxConnsPerHost it queues behind the slow
// primary, and over HTTP/2 it rides the very same TCP connection. So when
// the base transport is an *http.Transport, hedge copies go through a
// Clone of it, which has its own pools: a hedge always travels on a
// different connection from the primary it races (the server sees another
// RemoteAddr). The clone has the same settings, limits included, so hedges
// may hold up to as many connections again per host; the Hedger's budget
// keeps them few. CloseIdleConnections closes both pools. A base transport
// whose TLSNextProto was filled by golang.org/x/net/http2.ConfigureTransport
// shares its HTTP/2 pool with its clones; pass Config.HedgeTransport then.
// An opaque RoundTripper cannot be cloned: hedges then go through it too
// and may share its connections, unless Config.HedgeTransport supplies a
// second, independent instance.
//
// # Credentials
//
// A request's credentials (the Authorization, Proxy-Authorization,
// Cookie, Cookie2, WWW-Authenticate and Proxy-Authenticate headers, any
// header named in Config.SensitiveHeaders, and user information in the
// URL) go only to the origin the request addressed or, when that origin
// is the service's, to the replicas; header names are matched in any
// case, since net/http sends a key of the Header map as it is written
// ("authorization" included). No copy is ever sent stripped of them: a
// copy that reaches a server without the credentials its caller attached
// would fail in a way that only a counter would show.
//
// Config.CredentialScope says whether the replicas share credentials.
// OneService, the default, declares them one service: a request goes to
// every replica with all its headers, whichever replica or service URL it
// addressed. PerOrigin declares that each replica has credentials of its
// own: since any copy may go to any replica, a request addressed to the
// service that carries credentials is refused, before anything is sent,
// with an error that matches ErrCredentialsNotShared (counted in
// Stats.CredentialsRefused); requests without credentials are hedged
// across the replicas as usual. In single-host mode every copy goes to
// the request's own origin, credentials and all.
//
// # What an answer means
//
//   - 2xx, 3xx, 4xx other than 429 and the 409 below, and 5xx other than
//     502, 503 and 504 are final: the copy wins and its response is returned as it is. A
//     fast 500 from one replica beats a slow 200 from another, as a gRPC
//     status not listed non-fatal does.
//   - 502, 503 and 504 without Retry-After are a failed copy, a retryable
//     one: the Hedger sends the next copy at once, if its budget and caps
//     allow, instead of waiting for the delay.
//   - Pushback, 429 or any 5xx with a Retry-After header, ends the
//     request: no further copy is sent, the others are cancelled, and that
//     response is returned. The copy fails with a hedge.Pushback error:
//     the Hedger counts a failed call and debits a throttle budget
//     (NewThrottle), as gRPC does for server pushback. Retry-After is not
//     otherwise acted on: waiting and retrying is the caller's business.
//   - 409 with "Tied-Dropped: no-spare" (tied.DroppedHeader) is a copy
//     that a server running hedges on spare capacity only (package spare)
//     refused: no further copy is sent, and the others, the primary
//     among them, go on (hedge.PushbackAfter with a negative pause).
//   - A transport error is a retryable failed copy.
//
// A failed copy's body is read (up to 64 KiB, which drains a typical error
// page so the connection is reused) and closed. When every copy failed
// and at least one failed with a response, RoundTrip returns the response
// of the copy that failed last, body readable from memory, and no error,
// as the bare transport would have. A failed-status body larger than 64
// KiB makes its response final instead, streamed.
//
// # Load reports
//
// A client alone sees only its own requests in flight on each replica.
// Servers that run the toolkit's middleware (loadreport.Handler,
// spare.Handler, tied.Server.Handler), or any server that sends ORCA
// load reports, say on every answer how busy they were, in the
// Endpoint-Load-Metrics header (loadreport.Header, ORCA's TEXT form).
// With Config.Replicas, the Transport reads that header on the answer of
// every copy, whatever its status (a 503 carries a report as a 200 does),
// and passes the load to the Hedger as the replica's
// (hedge.Hedger.ReportLoad), before it classifies the answer: while the
// report is fresh, the Hedger's hedge decisions read the replica's load
// from it (counted in its Stats.LoadByReport) rather than from its own
// view (Stats.LoadByOwnView). Reports read are counted in
// Stats.LoadReports. A report it cannot read, malformed or reporting
// nothing it reads (see loadreport.Parse), is counted in
// Stats.BadLoadReports and ignored: it never fails the request, and the
// answer is taken as if it carried none. The header is left on the
// response. Without Replicas there is no replica to pin a report on, and
// the header is not read. Tied copies' answers (Config.Tied) are read
// the same way, a dropped copy's included.
//
// # The winner's body
//
// RoundTrip returns when a copy has its response headers; the losers are
// cancelled and, unless the Hedger reaps in the background, waited for
// (their connections closed, their bodies closed if they succeeded late)
// before it returns. The winner's context stays
// alive while the caller reads: the body is wrapped so that Close, or a
// Read that returns io.EOF or another error, releases it. So reading to
// EOF without Close leaks nothing, but, as with any http.RoundTripper, a
// body neither read to the end nor closed holds its connection and its
// context until the caller's context ends.
//
// # Operation classes
//
// The Hedger keeps a delay estimate and stats per operation class. The
// class is the method alone, or the method, a space and the route
// template that WithRoute on the request's context or Config.Route gives:
// a route "/items/{id}" makes the class "GET /items/{id}" of a GET. A
// route therefore never starts with the method. The URL path is never
// used: raw paths would make a class per item. Beyond the Hedger's
// MaxOps classes, the rest share one.
//
// # Marking
//
// Every hedge copy carries "Hedge-Attempt: N" (AttemptHeader, N >= 1) so
// that servers, logs and tied-request middleware can tell copies apart;
// AttemptIndex reads it. The primary never carries it, nor does a copy
// sent when no other copy of the request runs (hedge.Attempt.Hedge): a
// failover, or the copy sent at once after a 503. That copy is the
// request's only one, and a server must serve it as a primary. The caller's
// *http.Request is never modified: each hedge is a req.Clone, and the
// primary, to keep the path without hedges cheap, a shallow copy with its
// own context (req.WithContext) that deep-copies the headers only when it
// changes them. The primary thus shares the caller's header map with the
// base transport, which, as the RoundTripper contract requires, must not
// modify it: hedges read it concurrently.
//
// # Shards
//
// A sharded service (N shards, each with its own replicas, a server
// possibly holding several shards) is served by Shards, not Transport:
//
//	sh, err := hedgehttp.NewShards(nil, [][]string{
//		{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}, // shard 0's replicas
//		{"http://10.0.0.3:8080", "http://10.0.0.4:8080"}, // shard 1's
//	}, hedgehttp.ShardConfig{})
//	res, err := hedgehttp.Fan(ctx, sh, reqs, hedge.FanOut{}, read) // leaf i on shard i mod 2
//
// NewShards makes one Hedger over the distinct servers, with
// hedge.Config.Shards and ReplicaNames filled in, so that load, the
// default's rules, probation and load reports are per server, and stats
// name servers by URL. Fan runs hedge.DoFan: leaf i's copies go only to
// its shard's servers, and the leaves share one budget and the sibling
// trigger. DoShard sends one request to one shard. Both read the winning
// answer inside its copy, with the caller's function, since a fan-out's
// values outlive its copies. Answers are judged as RoundTrip judges them.
// Every server is the service: a request goes to its shard's servers
// with all its headers.
//
// # What it deliberately does not do
//
// It does not retry after the request has ended, wait out Retry-After,
// follow redirects (http.Client does), balance load across replicas beyond
// the Picker's choice of each copy, check replicas' health, or dedupe
// writes on the server (see the Idempotency-Key contract). It adds no
// goroutine of its own: the Hedger runs the copies.
package hedgehttp
