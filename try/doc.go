// Package try is the engine of "hedge try": an A/B test of hedging against
// a user's own HTTP replicas, with real traffic.
//
// Run sends an open-loop load at a constant rate (after a linear ramp and
// a warm-up, neither measured) to the replicas given, and nowhere else.
// Each request is assigned to an arm, a hedge.Config, at random with a
// seeded generator, and sent through that arm's client: a
// hedgehttp.Transport with a Hedger and a connection pool of its own, so
// the hedging measured is the library's own. The unhedged arm, "none", goes
// through the same transport with MaxAttempts 1, so the arms differ in
// hedging alone.
//
// Why random assignment rather than alternating blocks: the service's own
// moments (a stall, a garbage collection, a deploy, the back-off below)
// then fall on every arm alike in expectation, whatever their period;
// alternating blocks can beat in step with a periodic stall and hand it to
// one arm. The arms share the replicas, so the hedged arms' extra copies
// load the replicas for the unhedged arm too: a gain measured here is, if
// anything, understated.
//
// Latency is timed from each request's intended start (so a request that
// waited for a slot under Options.MaxInFlight, or behind a late
// dispatcher, carries that wait: no coordinated omission) to the end of its
// body. Answers of any status count, and timeouts count at their time;
// failures without an answer (refused connections, refused redirects) are
// counted as errors only.
//
// # Verdicts
//
// Percentiles (p50, p90, p99, p99.9) get 95% intervals from a block
// bootstrap: the measured span is cut into time blocks, and each resample
// draws blocks with replacement, the same blocks for every arm (paired),
// so that the interval of an arm's p99 over the baseline's carries the
// time-varying noise both met. Each hedged arm gets one verdict, by its
// p99, in the vocabulary of package drill:
//
//   - EXCESS LOAD: hedges above Options.LoadLimit of requests, or the p99
//     ratio's whole interval above 1 (hedging made the tail worse);
//   - TAIL CUT: the whole interval below 1 and a cut of at least
//     Options.MinCut (10%): a false TAIL CUT needs the interval to miss,
//     which happens in about 2.5% of runs of a service hedging cannot help;
//   - NO TAIL GAIN: a cut of MinCut is ruled out (or the cut is real but
//     smaller);
//   - NOT SIGNIFICANT: the interval holds both no change and a cut of
//     MinCut, or there were too few requests for a p99.
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
// stops the run (ErrServiceFailing). Header values that may be credentials
// (Options.SecretHeaders, and names such as Authorization or X-Api-Key:
// see Sensitive) and request bodies are never written to any output.
//
// What it is not: a load tester for capacity (the ceiling is low on
// purpose), nor a client for gRPC or Redis (yet).
package try
