// Package loadreport carries a server's account of its own load to its
// clients over HTTP: with every answer, in the Endpoint-Load-Metrics
// response header, in the TEXT form of ORCA (Open Request Cost
// Aggregation) that Envoy and other proxies read.
//
// # Why reports
//
// A client alone sees only its own requests in flight on each replica.
// They are the replica's load only when that client sends most of the
// replica's traffic: with many clients, or in a fan-out whose leaves fill
// every replica, a replica that looks idle to one client may be running
// and queueing other clients' work, and a hedge copy sent there waits
// behind it and delays it. The server knows. So the toolkit's server
// middleware (Handler here, spare.Handler and tied.Server.Handler) says,
// on every answer, how busy it was, and the client's transport
// (hedgehttp.Transport) passes what it reads to hedge.Hedger.ReportLoad,
// whose rules then read the replica's load from the report instead of
// from the client's own view (see hedge.Load).
//
// # The wire format
//
// A report is one header:
//
//	Endpoint-Load-Metrics: TEXT application_utilization=0.750, named_metrics.hedge_running=3, named_metrics.hedge_queued=0, named_metrics.hedge_workers=4, named_metrics.hedge_done=12345
//
// that is "TEXT " and comma-separated key=value pairs, the values numbers.
// The four named metrics are the fields of hedge.Load:
//
//   - hedge_running: the requests the server was running when it
//     answered, not counting the one answered;
//   - hedge_queued: the requests waiting there for a worker;
//   - hedge_workers: the requests it runs at once (0 when unknown);
//   - hedge_done: the requests it had answered since it started, a
//     counter that only grows (0 when it does not count them), which lets
//     the client tell a request that waited in the queue from one that
//     reached a worker.
//
// application_utilization, (running+queued)/workers, is there for generic
// ORCA readers, such as Envoy's load balancers, which know nothing of the
// named metrics: to them a server reports a utilization like any other.
//
// Parse reads the TEXT form with any other ORCA keys present, and ignores
// those it does not use. It reads a hedge_running, hedge_queued or
// hedge_workers above MaxCount (about a billion) as MaxCount: such a
// count says only that the server is as busy as can be, and capped it
// adds to others without overflow. It reads the report of any ORCA server too: when
// the hedge_* metrics are absent, application_utilization (or, failing
// that, cpu_utilization) u is read as a server of 100 workers with
// round(100*u) requests present, at most 100 of them running and the rest
// queued (u is capped at 100), and Done 0. So a utilization below 1 reads
// as spare capacity and one of 1 or more as none. Such a utilization
// counts the request answered, which a hedge_* report leaves out, and so
// reads one percent busier than it was. The JSON and binary forms of ORCA
// are not read: a report in them is malformed (ErrMalformed).
//
// # Staleness
//
// A report is as old as the last answer from its server: a server that
// stalls sends no more, and its last report says it was idle. The header
// carries no timestamp and this package keeps no state about it; the
// client judges freshness, by when each report arrived (the Hedger counts
// a report only for a hedge delay or so, then falls back to its own view,
// in which a stalled replica's requests pile up).
//
// # What it deliberately is not
//
// It does not measure CPU or memory, rate requests, or balance load: it
// counts requests. It reads no BIN or JSON reports and sends no
// out-of-band (streamed) reports: a report rides on an answer, costing a
// header and no request of its own. Servers with a queue of the toolkit's
// (spare.Limiter, tied.Server) report from it; Handler is for the others,
// and counts the requests in flight through it.
package loadreport
