// Package lab is the hedge toolkit's interactive lab: an HTTP server with a
// page embedded in the binary, started by "hedge lab".
//
// The page has four views, all hand-written HTML, CSS and JavaScript with
// SVG charts drawn by its own code (no framework, no CDN, nothing fetched
// from elsewhere: it works offline):
//
//   - Explorer: choose a world (noise, stalls, big jobs, mixed, or
//     log-normal sizes with tail heaviness sigma), the utilisation before
//     hedging, a strategy (the library default, the zero hedge.Config,
//     which the page opens on; none, fixed delay, a percentile delay
//     measured on a quiet day or at this load, live percentile, or a
//     percentile delay with a budget), cancel the loser, tied requests
//     and routing. The fixed delay is typed in milliseconds, one mean
//     service time each (sim.Unit): "2.5", "2.5ms" or "500us".
//     Every change reruns the simulator (debounced, the previous request
//     aborted) and shows a verdict, the p50/p95/p99/p99.9 side by side with
//     the gap, extra attempts and extra work, and a CCDF on log axes.
//     The address keeps the scenario, as /api/explore's parameters: the
//     page reads them when it opens and writes them on every change, so
//     that a copied address opens what it showed.
//   - Study: ratio to no hedging and extra work against load, per world and
//     strategy, from the results.json of "hedge study".
//   - Drill: the twenty-request replay of package drill, with Play/Pause,
//     Next event, Restart, speed and a time slider.
//   - Advise: upload (or paste) recorded latencies of one operation and
//     see what "hedge advise" says of them: the verdict, its text report
//     and its chart (shown as an image), the same package advise code.
//
// # Why the simulation runs on the server
//
// The numbers come from package sim, the same discrete-event simulator and
// the same hedge policy values as "hedge sim" and "hedge study". Running it
// in the browser would mean either a second simulator written in
// JavaScript, which would drift from the measured one and would need its
// own tests to prove agreement, or the Go simulator compiled to WebAssembly,
// a multi-megabyte download and a second build step for no gain: the lab
// is a local tool, started from the binary that holds the simulator. On
// the server the simulator runs natively (about 2 million simulated
// requests per second per core), the page stays small, and there is one
// source of truth. The price is that the page needs the "hedge lab"
// process; it cannot be served as static files. The drill is computed on
// the server for the same reason: the page draws and replays what package
// drill returns, so the terminal command, the API and the page cannot
// disagree.
//
// # API
//
// Every endpoint answers JSON; every error is an ErrorResponse with a
// message that says what to do. All are read-only GETs but /api/advise,
// which takes a POST; another method gets 405 with the Allow header of the
// route. A POST from a page of another origin gets 403: any page on the
// web may POST a text body to the lab without asking first (a no-cors
// fetch needs no preflight), so the browser's Sec-Fetch-Site must say
// same-origin or none, or, from a browser that does not send it, the
// Origin must name the request's Host (http.CrossOriginProtection); a
// request with neither header, from a tool such as curl, passes.
//
//   - /api/explore?world=&sigma=&load=&routing=&strategy=&delay=&p=&calib=
//     &livep=&budget=&cancel=&tied=&clients=&help=&width=&need=&fancall=
//     &runs=&requests=&seed= runs the chosen strategy and "none" at the
//     same point (same seeds, so the runs are paired) and returns an
//     ExploreResponse. Parameters are described on ExploreParams; all are
//     optional. With a fan-out (width > 1) both sides also report their
//     leaves' percentiles and the copies per request (Measures.Fan), and
//     the hedged side the fan-out call's extra copies when it ran.
//   - /api/drill?hedge=&delay=&budget=&cancel=&op= returns a DrillResponse
//     (delay in milliseconds, "130", or as a duration, "130ms").
//   - /api/study returns the study's results.json.
//   - POST /api/advise?format=&field=&replica-field=&time-field=&unit=
//     &metric=&load=&replicas=&concurrency=&servers=&objective=
//     &plain-hedging=&percentiles=&delays=&send-lag=&send-lag-p99= runs
//     package advise on the request body, a file as "hedge advise --in"
//     reads it (durations one per line, CSV, JSON lines, a Prometheus
//     scrape or API result), and returns an AdviseResponse: the text
//     report, the SVG chart and the headline (what the library's default
//     will do, then the recommended Config as the library runs it, its
//     rules on). The parameters mirror the
//     command's flags, with the same rules; all are optional. The body may
//     hold MaxAdviseBody bytes (4 MiB; a larger one gets 413, and "hedge
//     advise --in" has no limit). A histogram is spread into at most
//     MaxAdviseHistogram latencies (100,000), whatever its counts, and
//     counts above 2^53 get 400: a file of 74 bytes cannot ask for more
//     work than one of lines. The analysis takes a simulation slot
//     like the explorer (503 when none frees in time), runs under the
//     same Timeout, and its queueing estimate simulates at most 200,000
//     requests per run, within MaxRequests and MaxMemory. A file that does
//     not parse gets 400 naming the line; a sample advise refuses (fewer
//     than advise.MinSample latencies) gets 400 saying why.
//
// # Strategies
//
// Each strategy choice runs one of package sim's strategies, through one
// table (choices in strategy.go): none; fixed is hedge-fixed; percentile
// is hedge-p95-quiet or hedge-p95-per-load (calib=quiet or load), with the
// chosen percentile as its delay; live is hedge-p95-live; budget is
// hedge-quiet-budget; default is sim's default, the library's zero
// hedge.Config (what hedge.New runs with nothing set); tied=true is tied,
// whatever the strategy, and tied=true with help=idle-only is tied-spare
// (the spare form of package tied: the second copy runs only on an idle
// server). The hedging ones are presets of a hedge.Config
// (sim.Config.HedgeConfig), so the page measures the library's own
// decisions. For the live estimates (live, default) the delay shown is the
// mean delay in force.
//
// A calibrated delay is measured by the unhedged run that
// sim.CalibrationConfig prescribes: one run at the calibration load, its
// seed derived from the query's by sim's one rule. At p95 the delay is
// exactly sim.Calibrate's, so "hedge sim", "hedge study" and the lab hedge
// after the same delay at the same point and seed. The budget at this load,
// for which sim has no preset, runs hedge-quiet-budget with the per-load
// calibration.
//
// # Queries
//
// Queries are parsed with url.ParseQuery, and nothing is silently dropped:
// a malformed query gets a 400 naming each malformed parameter, instead of
// the defaults (url.URL.Query would drop the error, so "load=5;" would
// answer for load 0.5). Refused are a ';' (it does not separate parameters:
// use '&', or write it as %3B), a bad %-escape (write '%' as %25), more
// than 64 parameters (the explorer reads 20), a parameter given twice
// (the answer quotes the values), an unknown one, and a value out of its
// range. Names and values quoted back are clipped to 40 bytes. A fuzz
// test (FuzzForm, corpus in testdata/fuzz) holds the parser to this: no
// panic, each error names a parameter of the query, and whatever it
// accepts is in range.
//
// # Bounds
//
// One visitor cannot pin the machine:
//
//   - Size: at most 4 runs and Options.MaxRequests (200,000) requests per
//     run, and at most Options.MaxWork (400,000) simulated requests per
//     point. Both count leaves: a fan-out's request of width W counts W
//     times, so a width of 100 cannot make a point 100 times as costly.
//     The page asks for 2 runs of 100,000, and lowers the requests of a
//     fan-out to fit (2 runs of 5,000 at width 40); the API does the same
//     for a query that gives no requests. On a shared 2-core
//     machine the server answers a new point in 50 to 150 ms (a calibration
//     run when needed, the baseline and the hedged run), a point in the
//     collapse regime in 0.4 to 2 s (an unstable queue takes longer to
//     drain, and large runs then go one at a time, see Memory), and a
//     repeated one from its cache in well under a millisecond.
//   - Memory: a stable run holds little (its latencies, 8 bytes a
//     request), but an unstable one, such as hedging without cancellation
//     at 95% utilisation, ends with nearly every request in flight and
//     holds up to about 800 bytes per simulated request (measured: at most
//     680; a fan-out's leaf counts as a request here too, measured at 720).
//     Each request's simulations are held within Options.MaxMemory
//     (160 MiB) by that worst case: the runs of a point go in parallel only
//     as far as it allows (two runs of 100,000 at once, one of 200,000 at a
//     time), and a request whose single run would exceed it gets 413,
//     naming the limit and the most requests that fit. When the last
//     simulation finishes and the process holds more than 64 MiB, the
//     server collects and returns the free memory to the operating system
//     at once (debug.FreeOSMemory) instead of keeping it for the runtime's
//     gradual scavenger. "hedge lab" also sets the process's soft memory
//     limit to Server.MemoryBudget (MaxConcurrent x MaxMemory plus the
//     cache) plus 64 MiB, and GOGC to 50, so that the collector does not
//     let the heap grow to twice what the simulations hold (the
//     simulator's arrays hold no pointers, so collecting is cheap).
//   - Time: each request's simulations, and each advise analysis, run
//     under Options.Timeout (10 s). The simulator checks its context
//     every 4,096 events (Simulator.RunContext) and advise in each of its
//     loops, so the work stops within about a millisecond of the limit,
//     gives its slot back, and the request gets 503.
//   - Concurrency: a semaphore admits Options.MaxConcurrent (2) simulating
//     requests; the next waits up to Options.QueueWait (0.5 s) and then
//     gets 503 with Retry-After. The drill and the study need no slot.
//   - Validation: every parameter is checked against its range before any
//     work starts; each bad one is named in a 400 (see Queries).
//
// Results are cached by their canonical parameters: every field of the
// simulation that runs, and for a calibrated delay the calibration and
// the percentile, so that a parameter of another strategy does not miss
// the cache (an LRU of at most 512 entries and 8 MiB, also holding the
// baseline and calibration summaries, which a change of strategy reuses;
// an entry holds a few kilobytes).
//
// # The CCDF
//
// Every run is made with sim.Config.Tail, so it reports its exact
// nearest-rank latency at each of sim.TailLevels (from the median down to
// one request in 10,000); the CCDF is drawn through the means of those
// across runs, with each run's curve shown faintly, and leaves out levels
// that fewer than 10 measured requests exceed. ExploreResponse.CCDFSource
// says "tail".
//
// # Verdicts and warnings
//
// The verdict compares the headline percentile (p99.9 in the stalling
// worlds, p99 otherwise, as in the study): better below a ratio of 0.95,
// worse above 1.05, collapse above 2. Warnings come from the measured
// numbers only: collapse (ratio above 2, with the hedged fraction when it is
// near 100%), many hedged (half the requests or more), saturated
// (utilisation at or above 97%). Heads-ups are rules on the settings alone,
// shown before anything is measured: cancellation off above 60%
// utilisation, a zero delay, a percentile below p90, a budget of 50% or
// more, tied without cancellation, stalling worlds near capacity.
//
// # Study data
//
// The Study view reads a copy of docs/study/results.json embedded at build
// time (study.json; "go generate ./lab" refreshes it and a test fails when
// the two differ). "hedge lab --study path" serves another results.json
// instead, for example one just written by "hedge study --quick". Each
// line is a strategy's rows; the library default's (strategy "default")
// is drawn when the results have it, and offered but disabled when they
// come from a study that did not run it.
//
// # What this package is not
//
// It is not a hosted service: it binds to 127.0.0.1 by default, has no
// authentication and keeps no state beyond its cache. It does not run the
// live engine (hedge.Do) against real servers; that is "hedge bench".
package lab
