// Package try is the engine of "hedge try": an A/B test of hedging against
// a user's own replicas, with real traffic: HTTP servers, gRPC servers
// (Options.GRPC) or Redis servers (Options.Redis).
//
// Run sends an open-loop load at a constant rate (after a linear ramp and
// a warm-up, neither measured) to the replicas given, and nowhere else.
// Each request is assigned to an arm, a hedge.Config, at random with a
// seeded generator, and sent through that arm's client: a
// hedgehttp.Transport with a Hedger and a connection pool of its own, so
// the hedging measured is the library's own. The unhedged arm, "none", goes
// through the same transport with MaxAttempts 1, so the arms differ in
// hedging alone. gRPC and Redis runs differ in the client alone (see
// below): the pacing, the assignment, the timing, the back-off and the
// verdicts are the same for every protocol.
//
// Why random assignment rather than alternating blocks: the service's own
// moments (a stall, a garbage collection, a deploy, the back-off below)
// then fall on every arm alike in expectation, whatever their period;
// alternating blocks can beat in step with a periodic stall and hand it to
// one arm. The arms share the replicas, so the hedged arms' extra copies
// load the replicas for the unhedged arm too: a gain measured here is, if
// anything, understated.
//
// The rate is a ceiling at every moment, not an average: a request leaves
// at its intended start or up to one gap (the time to the next arrival)
// after it, never later. An arrival that finds every slot of
// Options.MaxInFlight held for that long (the service stalled), or that
// the load generator reaches later than that (its machine was busy), is
// dropped and counted (Result.DroppedInFlight, DroppedLate, and a note),
// never sent with the next ones in a burst when the stall ends. Latency
// is timed from each request's intended start (so a request that waited
// for a slot, or behind a late dispatcher, carries that wait: no
// coordinated omission) to the end of its body (for gRPC and Redis, to
// its reply). Answers of any status count, and timeouts count at their time;
// failures without an answer (refused connections, refused redirects) are
// counted as errors only. How late the dispatcher itself started the
// measured requests is reported (Result.LagP50, LagP99), and a run whose
// lag p99 is above a millisecond and a tenth of the baseline's p99 says
// so (Result.Overloaded, and a note): the client's machine, not the
// service, may then have shaped the tail.
//
// # Verdicts
//
// Percentiles (p50, p90, p99, p99.9) get 95% intervals from a block
// bootstrap: the measured span is cut into time blocks, and each resample
// draws blocks with replacement, the same blocks for every arm (paired),
// so that the interval of an arm's percentile over the baseline's carries
// the time-varying noise both met. Each hedged arm gets one verdict, by
// its objective percentile (Options.Objective: the p99 unless told; the
// p99.9 where stalls are rare enough to show there alone), in the
// vocabulary of package drill:
//
//   - EXCESS LOAD: hedges above Options.LoadLimit of requests, or the
//     ratio's whole interval above 1 (hedging made the tail worse);
//   - TAIL CUT: the whole interval below 1 and a cut of at least
//     Options.MinCut (10%): a false TAIL CUT needs the interval to miss,
//     which happens in about 2.5% of runs of a service hedging cannot
//     help;
//   - NO TAIL GAIN: a cut of MinCut is ruled out (or the cut is real but
//     smaller);
//   - NOT SIGNIFICANT: the interval holds both no change and a cut of
//     MinCut, or there were too few requests for the percentile (200 an
//     arm, 2,000 for a p99.9);
//   - TOO FEW HEDGES (FewHedges): hedges went with fewer requests than lie
//     above the percentile (at most a hundredth of the requests), which
//     cannot have moved it either way. No verdict on hedging, for or
//     against, comes from such an arm, and the summary says so in
//     capitals (Result.Warnings): a default arm whose rules kept its
//     hedges back says nothing of what hedging would do.
//
// When an arm is no TAIL CUT by the objective but would be one by
// another tail percentile (the p99.9, for a p99 objective), a note says
// so: the gain of hedging against rare stalls may show there alone.
//
// A verdict says what an arm did, and ArmResult.NotSent says why it did
// not do more: the hedges that came due in the measured span and a rule
// of the arm's Hedger kept back (its budget, the spare-capacity and
// payoff rules, the head wait), with its delay when measuring began and
// at the end. A default arm that learnt from a starved warm-up shows it
// there. The arm plain-p95 (ParseArm) hedges at the live p95 with the
// budget and none of the default's other rules: beside default, it tells
// what the rules did from what hedging does.
//
// # Safety
//
// Requests go only to the replicas; redirects are followed only among them
// (ErrRedirectRefused otherwise), no proxy from the environment is used,
// and URLs with credentials are refused. The rate has a ceiling
// (DefaultMaxRate unless Options.AllowHighRate). Only GET and HEAD are
// sent unless Options.AllowWrites and an Options.IdempotencyHeader are both
// set. Pushback (429, or a 5xx with Retry-After) and a fifth of a second's
// requests failing halve the rate (honouring Retry-After up to 5 s); calm
// seconds raise it again; a service still failing at 1/64 of the rate
// stops the run (ErrServiceFailing). The outputs name the headers sent
// but hold none of their values unless Options.ShowHeaderValues asks for
// them, and even then no value that may be a credential: by its header
// (Options.SecretHeaders, and names such as Authorization or X-Api-Key:
// see Sensitive) or by its own shape (a Bearer or Basic token, a JWT, a
// long random-looking string). Request bodies are never written.
//
// # gRPC
//
// With Options.GRPC the replicas are gRPC servers, host:port, and every
// request is a call of one unary method (GRPCOptions.Method,
// "package.Service/Method"), its request messages given in protobuf JSON
// and sent in turn. The method's descriptors come from a descriptor set
// (GRPCOptions.Protoset, as protoc --include_imports -o writes it) or, by
// default, from the first replica's server reflection (grpc.reflection.v1,
// or v1alpha); the messages are built with dynamicpb. Each arm has its own
// Hedger and one ClientConn per replica, all with the arm's
// hedgegrpc.Interceptor (hedgegrpc.WithReplicas), so that every copy goes
// to a replica the Hedger picked; an arm whose Config leaves Retryable nil
// gets hedgegrpc.NonFatal(codes.Unavailable), as hedgegrpc's doc advises:
// another status is the service's answer, not a reason for a copy at
// once. Options.Header is sent as metadata, the names in lower case.
//
// gRPC has no mark of a method's safety on the wire (nothing like GET), and
// a hedge calls the method a second time, on another replica: so a run is
// refused (ErrNotIdempotent) unless GRPCOptions.Idempotent says that two
// calls have the effect of one. Streaming methods are refused
// (ErrStreaming): hedgegrpc hedges unary calls only. Finding the
// descriptors is the only thing sent before the load (a reflection
// stream to the first replica); nothing is sent when they cannot be found
// (ErrDescriptors) or a message does not parse (ErrTargets).
//
// The status codes of a service failing (UNKNOWN, DEADLINE_EXCEEDED from
// the server, RESOURCE_EXHAUSTED, ABORTED, UNIMPLEMENTED, INTERNAL,
// UNAVAILABLE, DATA_LOSS) count as errors with a latency, like 5xx; the
// others are answers, like 4xx. RESOURCE_EXHAUSTED is pushback, as 429,
// and so is UNAVAILABLE with a grpc-retry-pushback-ms trailer, as a 5xx
// with Retry-After (its milliseconds honoured up to 5 s).
//
// # Redis
//
// With Options.Redis the replicas are Redis servers holding the same data
// (redis://host:port[/db], rediss://host:port[/db] for TLS, or host:port),
// and every request reads keys (RedisOptions.Keys, in turn): GET of one,
// or MGET of RedisOptions.MGet. Each arm has its own hedgeredis.Client
// over one go-redis client per replica, the first replica its primary;
// reads are hedged across all of them. try never writes to Redis: GET and
// MGET are all it sends (and what go-redis sends to set up a
// connection). go-redis's own retries are off (hedging sends a read
// again) and the request's deadline bounds each read. A key's absence
// (nil) and error replies are answers; hedgeredis reaps losing copies in
// the background, so a loser still running when its request returned is
// counted until then. Credentials in a replica's URL are refused: give
// RedisOptions.Password, which is never written.
//
// What it is not: a load tester for capacity (the ceiling is low on
// purpose), nor a client for streaming gRPC, Redis writes, or other
// protocols.
package try
