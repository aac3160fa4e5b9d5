// Package hedgegrpc hedges unary gRPC calls with package hedge: a client
// interceptor that runs each call through hedge.Do, so that a slow call
// gets a copy on another backend and the first answer wins, under the
// Hedger's delay, budget and caps.
//
// # Using it
//
// With a Hedger of your own:
//
//	h, err := hedge.New(hedge.Config{Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
//	ic, err := hedgegrpc.New(h)
//	conn, err := grpc.NewClient(target,
//		grpc.WithTransportCredentials(insecure.NewCredentials()), // or your TLS credentials
//		grpc.WithUnaryInterceptor(ic.Unary))
//
// or from gRPC's own service config, the same JSON you may give
// grpc.WithDefaultServiceConfig:
//
//	sc, err := hedgegrpc.ParseServiceConfig(js) // every mistake, each naming its field
//	for _, w := range sc.Warnings {             // near misses, such as "hedgingPolicey"
//		log.Print(w)
//	}
//	ic, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{})
//	conn, err := grpc.NewClient(target,
//		grpc.WithTransportCredentials(insecure.NewCredentials()),
//		grpc.WithUnaryInterceptor(ic.Unary))
//
// (grpc.NewClient requires transport credentials; insecure ones are for
// plaintext, inside a trusted network or a test.)
//
// Those copies go wherever target's balancer sends them, maybe to the
// backend that holds the primary. Given the backends' addresses instead,
// Dial and DialServiceConfig send each copy of a call to a different
// backend (see "Where the copies go").
//
// The operation class of a call (the op of hedge.Do: delay estimates and
// stats) is its full method name, "/package.Service/Method"; WithOpName
// changes that. Interceptor.Hedger(method).OpStats(method) gives the stats.
// A call whose context is marked hedge.NotIdempotent (without an
// idempotency key) is sent once.
//
// # The service config
//
// ParseServiceConfig reads each methodConfig's name list and hedgingPolicy
// and the top-level retryThrottling, and ignores everything else.
// NewFromServiceConfig makes one Hedger per methodConfig entry that has a
// hedgingPolicy, all sharing one Budget:
//
//	gRPC service config             hedge                                 differs from gRPC (grpc-java) in
//	-------------------             -----                                 --------------------------------
//	methodConfig[].name             Interceptor.Hedger(method)            nothing: method > service > default entry
//	hedgingPolicy.maxAttempts       Config.MaxAttempts                    nothing: required, >= 2, capped at 5; with
//	                                                                        WithReplicas, also at most one copy per conn
//	hedgingPolicy.hedgingDelay      Config.Delay = hedge.Fixed(d)         no hedge is sent when the time left before the
//	                                                                        caller's deadline is shorter than the delay; a
//	                                                                        delay from the longest time.Duration
//	                                                                        ("9223372036.854775807s") to the proto maximum
//	                                                                        ("315576000000.999999999s") is hedge.Never
//	hedgingPolicy.nonFatalStatus-   Config.Retryable = NonFatal(codes...) nothing: non-fatal sends the next copy now (while
//	  Codes                                                                 the deadline has not passed); any other code
//	                                                                        cancels the rest and is returned
//	retryThrottling                 Config.Budget = hedge.NewThrottle     one bucket per Interceptor, not per server
//	(no retryThrottling)            one hedge.DefaultBudget()             gRPC hedges without limit: set
//	                                                                        hedge.Config{NoBudget: true} for that
//
// The throttle works as in gRPC: it starts full, each copy that fails
// debits one token before the next copy is decided, each successful call
// credits tokenRatio, and hedges go only while the bucket holds more than
// maxTokens/2. As in grpc-java, only failures with a non-fatal code debit
// (so INVALID_ARGUMENT from bad requests does not stop hedging), and a copy
// ended by the caller's own deadline does not.
//
// Also unlike grpc-java: a copy wins only when it completes with OK (gRPC
// commits an attempt as soon as response headers arrive, which for a unary
// call matters only if the server sends headers and then fails). When
// every copy fails, the last copy's status is returned. A method config may set retryPolicy or
// hedgingPolicy, not both, as in gRPC; gRPC-Go itself ignores hedgingPolicy,
// so giving the same JSON to grpc.WithDefaultServiceConfig does not hedge
// twice. Do not give a hedged method a retryPolicy in a config gRPC-Go
// applies: each copy would then also be retried by gRPC.
//
// # Misspelt keys
//
// gRPC ignores fields it does not know, so a misspelt key such as
// "hedging_policy" would turn hedging off without a word. ParseServiceConfig
// refuses keys that are certainly wrong: another spelling (snake_case,
// kebab-case) of a field hedgegrpc reads, any key in hedgingPolicy,
// retryThrottling or a name entry that is not one of their fields (gRPC
// defines exactly those), and a field given twice. Near misses that might
// be deliberate are accepted and listed in ServiceConfig.Warnings, each a
// *ConfigError naming the key and what to write: a key differing from a
// gRPC field only in case (read, as gRPC-Go reads it, but grpc-java and
// gRPC C++ would not), an unknown key a small edit away from a gRPC field
// in the top level or a methodConfig entry ("hedgingPolicey", "names"), a
// gRPC field hedgegrpc does not read in snake_case ("wait_for_ready"), a
// field in the wrong object, and a hedgingPolicy in an entry without
// names. hedgegrpc logs nothing: log the warnings, or fail on them in a
// test of your configs.
//
// # Server pushback
//
// A server may answer a failing copy with the trailer PushbackKey
// ("grpc-retry-pushback-ms"), gRPC's way to say "hold off": in A6 a
// negative or unparsable value means "send no further copy", and a number
// of milliseconds means "send the next copy only after that long". Every
// copy asks for trailers, so the interceptor sees the key whether or not
// the caller set grpc.Trailer. A failed copy that carries it, with a
// non-fatal status, is marked with hedge.PushbackAfter, which guarantees:
//
//   - with a negative or unparsable value (or several values), no further
//     copy of that call is sent; copies already in flight go on, and the
//     call fails with the last failure only if they all fail;
//   - with a number of milliseconds, the next copy goes after that long
//     (if the budget and caps allow), not at once as after other non-fatal
//     failures nor at the hedging delay; copies after it follow the delay;
//   - a retryThrottling bucket (or any throttle Budget) is debited once for
//     it, as gRPC counts a pushback as a failure.
//
// A fatal status ends the call whatever its trailers say, and a reply with
// OK wins whatever its trailers say. The call's own trailer option, if
// any, receives the trailer of the copy whose outcome the call returns.
//
// Each hedge copy carries the metadata AttemptKey ("hedge-attempt") with
// its attempt index, so that a server can tell hedges from primaries. The
// primary carries none, nor does a copy sent when no other copy of the
// call runs (hedge.Attempt.Hedge): a failover, or the copy sent at once
// after an UNAVAILABLE. That copy is the call's only one, and a server
// must serve it as a primary. Every copy after the first also carries
// PreviousAttemptsKey ("grpc-previous-rpc-attempts"), as in gRPC; it
// marks no hedge, since grpc-go sets it on its own retries too.
//
// # Reply isolation
//
// Copies of a call run at once, so they must not share the caller's reply:
// a losing copy that completes after the winner would overwrite, or race
// with, the answer the caller is reading. Each copy unmarshals into its own
// new message of the reply's type (for replies that are not proto messages,
// a new value of the type the reply points to), and only after hedge.Do has
// returned is the winner's copied into the caller's reply (proto.Reset,
// then proto.Merge; a plain assignment for non-proto replies). Header,
// Trailer and Peer call options get per-copy targets too, and the winner's
// (or, on failure, the returned error's copy's) values are delivered; an
// OnFinish callback runs once per call. This holds even with
// hedge.Config.ReapInBackground, where losers outlive the call; the request
// message is shared read-only by all copies, so with ReapInBackground do not
// modify it after the call either.
//
// # Where the copies go
//
// With a single ClientConn every copy is a new RPC on that conn, and the
// conn's balancer picks a backend for each. Under round_robin consecutive
// RPCs go to different subconns, so copies usually reach different
// backends, but that is not guaranteed: other calls interleave, the picker
// knows nothing of which backend holds the primary, and pick_first sends
// every copy to the same backend. gRPC's own hedging design passes the
// previously used addresses to the balancer; an interceptor has no way
// to.
//
// For a guarantee, give Dial the address of each backend. It dials one
// ClientConn per backend, each with the Interceptor installed, and makes
// the Hedger with Config.Replicas = the number of addresses. The Hedger
// picks a replica for each copy that holds no other copy of the call,
// preferring the less busy, and the copy is invoked on that replica's
// conn:
//
//	conns, err := hedgegrpc.Dial(
//		[]string{"10.0.0.1:50051", "10.0.0.2:50051", "10.0.0.3:50051"},
//		hedge.Config{Retryable: hedgegrpc.NonFatal(codes.Unavailable)},
//		hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))) // or your TLS credentials
//	if err != nil {
//		return err
//	}
//	defer conns.Close()
//	client := pb.NewYourServiceClient(conns.Conn())
//
// With a service config, DialServiceConfig(addrs, sc, hedge.Config{},
// ...) does the same with NewFromServiceConfig's Hedgers.
//
// To bring conns of your own, pass them to New or NewFromServiceConfig
// with WithReplicas, one per backend, and make the Hedger with
// Config.Replicas = the number of conns (NewFromServiceConfig sets it).
// The conns need the interceptor when they are dialed, and the
// Interceptor needs the conns, so the conns are dialed with a function
// that calls the Interceptor made afterwards, as Dial does (see
// ExampleWithReplicas). The Interceptor is installed on every conn: it
// hedges the calls made on any of them and passes its own copies through
// on the others.
//
// # Load reports
//
// A client sees only its own calls in flight on each backend, which are
// the backend's load only when it sends most of the backend's traffic.
// Servers can say their load with every answer, in gRPC's per-call load
// reports (ORCA, gRFC A51): a binary OrcaLoadReport in the trailer
// LoadReportKey ("endpoint-load-metrics-bin"). With WithReplicas, the
// Interceptor reads the report in every copy's trailer, whatever the
// copy's status, and passes the load to Hedger.ReportLoad for the replica
// of the copy's conn (Attempt.Replica), on every Hedger of the
// Interceptor (the load is the server's, whichever method answered).
// While a replica's last report is fresh, a hedge decision reads the
// load of the copy's replica from it rather than from the Hedger's own
// view of its calls in flight (see hedge.Load), and the Hedger's stats
// count which view each decision read: Hedger(method).OpStats(method).
// LoadByReport and LoadByOwnView.
//
// Without WithReplicas the Interceptor does not read the reports: each
// copy goes where the conn's balancer sends it, so Attempt.Replica names
// no backend a report could be charged to (gRPC's weighted_round_robin
// balancer reads them instead).
//
// A report is mapped to a hedge.Load so:
//
//   - the toolkit's servers (spare/sparegrpc, tied/tiedgrpc,
//     LoadReportInterceptor, or RecordLoad in your own) send the named
//     metrics hedge_running, hedge_queued, hedge_workers and hedge_done
//     (RunningMetric and the rest): they are read exactly, each a whole
//     number, a missing one as 0, a hedge_running, hedge_queued or
//     hedge_workers above loadreport.MaxCount (about a billion) as
//     loadreport.MaxCount: a server as busy as can be;
//   - any other ORCA server's report, without them, is read from its
//     utilization u, application_utilization or, when that is 0 (proto3
//     cannot tell unset from zero), cpu_utilization: as round(100u)
//     requests on UtilizationWorkers (100) workers, those beyond 100
//     queued, u capped at 100. A utilization below 1 reads as spare
//     capacity, one above 1 as a queue; such a report has no count of
//     answers (Done 0), and its utilization likely counts the call
//     answered, which the hedge_* metrics leave out. This is how package
//     loadreport reads ORCA's TEXT form over HTTP;
//   - a report with neither (both utilizations 0) carries no load and is
//     ignored: unlike the TEXT form, the binary one cannot say "0"
//     apart from "not reported", and an idle reading would let copies
//     go to a server that said nothing of its load.
//
// A malformed report (not an OrcaLoadReport, several values, a hedge_*
// metric not a finite whole number, a hedge_done above 2^53, a negative,
// NaN or infinite utilization) is ignored and counted, never an error for the call.
// Interceptor.Stats counts the reports read, those read from a
// utilization, the empty and the malformed.
//
// A server sends reports when it is built with
// orca.CallMetricsServerOption(nil) and an interceptor after that
// option's records the load (RecordLoad): spare/sparegrpc and
// tied/tiedgrpc do for their queues (their ServerOptions), and for a
// server without one, LoadReportInterceptor counts its calls in flight:
//
//	lr, err := hedgegrpc.LoadReportInterceptor(16) // calls it runs at once
//	srv := grpc.NewServer(orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(lr))
//
// Install such interceptors with grpc.ChainUnaryInterceptor, after the
// option: grpc.UnaryInterceptor always runs before chained interceptors,
// the option's included, and there finds nowhere to record.
//
// Importing hedgegrpc imports google.golang.org/grpc/orca, whose init
// registers gRPC-Go's parser of these reports, as in any program that
// imports orca: a balancer that asks for each call's outcome then gets the
// call's report parsed too (balancer.DoneInfo.ServerLoad). Reading a
// toolkit report costs the Interceptor about 2µs and two dozen small
// allocations per copy (BenchmarkParseLoadReport).
//
// # Shards
//
// A sharded service (N shards, each with its own replicas, a server
// possibly holding several shards) is dialed with DialShards, one address
// list per shard:
//
//	conns, err := hedgegrpc.DialShards([][]string{
//		{"10.0.0.1:50051", "10.0.0.2:50051"}, // shard 0's replicas
//		{"10.0.0.3:50051", "10.0.0.4:50051"}, // shard 1's
//	}, hedge.Config{}, hedgegrpc.WithDialOptions(creds))
//	res, err := hedgegrpc.Fan(ctx, conns, "Search", 2, hedge.FanOut{},
//		func(ctx context.Context, i int, cc *grpc.ClientConn) (*pb.Reply, error) {
//			return pb.NewSearchClient(cc).Search(ctx, reqs[i]) // leaf i on shard i mod 2
//		})
//
// It makes one conn per distinct server and one Hedger over them, with
// hedge.Config.Shards and ReplicaNames filled in: load, the default's
// rules, probation and ORCA load reports are per server, and stats name
// servers by address. Fan runs hedge.DoFan: each copy of leaf i runs the
// leaf function on the conn of a server of its shard, never another's,
// and the leaves share one budget and the sibling trigger. A single call
// names its shard with WithShard(ctx, s) and is hedged among that shard's
// servers (hedge.DoShard); a unary call on the conns without it fails
// with an error matching ErrNoShard. Copies are marked, and trailers
// read for load and pushback, as for any hedged call.
//
// # Deadlines and cancellation
//
// Every copy's context derives from the caller's, so the caller's deadline
// (sent to servers as grpc-timeout) and cancellation bound all copies. When
// one copy wins, the others are cancelled, and by default the call returns
// only after they have returned: no copy outlives the call.
//
// # What it does not do
//
//   - Streaming calls are not hedged: there is no stream interceptor, and
//     gRPC never hands a stream to a unary interceptor, so streams are
//     passed through untouched, once, on the conn they were made on, also
//     when WithReplicas is used.
//   - Transparent retries (an RPC that never reached the server
//     application) are left to gRPC-Go, which does them for each copy on
//     its own; they do not count as copies.
//   - It does not retry with backoff (gRPC's retryPolicy does), hold a
//     copy back for the delay a server's pushback gives (it stops
//     instead), or shed load.
package hedgegrpc
