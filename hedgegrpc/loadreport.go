package hedgegrpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/wire"
	"github.com/tailcut/hedge/internal/wire/orcawire"
)

// LoadReportKey is the trailer key of gRPC's per-call load reports (ORCA,
// gRFC A51): its value is a binary OrcaLoadReport
// (github.com/cncf/xds/go/xds/data/orca/v3), which a server built with
// orca.CallMetricsServerOption sends with every answer for which a
// handler or interceptor recorded a metric (RecordLoad does). See the
// package doc, "Load reports".
const LoadReportKey = wire.LoadReportKey

// The named metrics (OrcaLoadReport.named_metrics) of the toolkit's load
// reports: the fields of hedge.Load, each a whole number. RecordLoad
// writes them; the Interceptor reads them back exactly.
const (
	RunningMetric = wire.RunningMetric // hedge.Load.Running
	QueuedMetric  = wire.QueuedMetric  // hedge.Load.Queued
	WorkersMetric = wire.WorkersMetric // hedge.Load.Workers
	DoneMetric    = wire.DoneMetric    // hedge.Load.Done
)

// UtilizationWorkers is the Workers of the load the Interceptor reads
// from the report of a server that sends no hedge_* metrics, only a
// utilization u (application_utilization, else cpu_utilization): that of
// round(100u) requests on 100 workers, so that a utilization below 1
// reads as spare capacity and one above 1 as requests queued (u is capped
// at 100), as package loadreport reads HTTP reports (see the package doc,
// "Load reports").
const UtilizationWorkers = wire.LoadUtilizationWorkers

// ErrInvalidWorkers is wrapped by the error of LoadReportInterceptor for
// a workers count below 1. Match it with errors.Is.
var ErrInvalidWorkers = errors.New("hedgegrpc: invalid workers count")

// The bounds of what a report says. A Running, Queued or Workers above
// loadreport.MaxCount (about a billion) reads as loadreport.MaxCount, as
// package loadreport reads HTTP reports: such a count says only that the
// server is as busy as can be. A Done above maxDone, the largest whole
// number a float64 holds exactly, is malformed. A utilization is capped
// at maxUtilization (a hundred times more work than workers), as package
// loadreport caps it.
const (
	maxDone        = 1 << 53
	maxUtilization = 100
)

// RecordLoad records l as the ORCA per-call load report of the gRPC call
// of ctx, a server-side context: the named metrics RunningMetric,
// QueuedMetric, WorkersMetric and DoneMetric, and (when l.Workers > 0)
// application_utilization (Running+Queued)/Workers, which it overwrites if
// the handler set it. gRPC sends the report in the call's trailer
// (LoadReportKey), whatever the call's status.
//
// It needs the recorder that orca.CallMetricsServerOption(nil) puts in the
// context of every call, and returns false, recording nothing, when ctx
// has none: the server lacks the option, or the interceptor calling
// RecordLoad runs before the option's own (grpc.UnaryInterceptor always
// runs first; install it with grpc.ChainUnaryInterceptor after the
// option). Call it after the handler, with the load of the other calls:
// sparegrpc, tiedgrpc and LoadReportInterceptor do. Counts must not be
// negative: the Interceptor ignores such a report.
func RecordLoad(ctx context.Context, l hedge.Load) bool { return orcawire.RecordLoad(ctx, l) }

// LoadReportInterceptor returns a unary server interceptor that reports
// the server's load with every answer (RecordLoad), for a gRPC server
// without a queue of the toolkit's (spare/sparegrpc and tied/tiedgrpc
// report their own). It counts the unary calls in its handlers and those
// answered, with atomics, and reports, of the calls other than the one
// answered: Running = min(others, workers), Queued = max(0, others -
// workers), Workers = workers and Done = the calls answered before.
// workers is how many calls the server runs at once (its handlers'
// concurrency, not a limit the interceptor enforces): a workers below 1
// is an error wrapping ErrInvalidWorkers.
//
// The server needs orca.CallMetricsServerOption(nil) before it:
//
//	lr, err := hedgegrpc.LoadReportInterceptor(16)
//	srv := grpc.NewServer(orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(lr))
//
// Streams are neither counted nor reported.
func LoadReportInterceptor(workers int) (grpc.UnaryServerInterceptor, error) {
	if workers < 1 {
		return nil, fmt.Errorf("%w: LoadReportInterceptor(%d): pass how many calls the server runs at once, at least 1", ErrInvalidWorkers, workers)
	}
	c := &loadCounter{workers: workers}
	return c.unary, nil
}

// loadCounter is LoadReportInterceptor's state.
type loadCounter struct {
	workers  int
	inFlight atomic.Int64 // calls in their handler, the answered one included
	done     atomic.Int64 // calls answered
}

func (c *loadCounter) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c.inFlight.Add(1)
	defer func() {
		c.done.Add(1) // before leaving: a reader never misses the call in both
		c.inFlight.Add(-1)
	}()
	resp, err := handler(ctx, req)
	others := int(max(c.inFlight.Load()-1, 0))
	RecordLoad(ctx, hedge.Load{
		Running: min(others, c.workers),
		Queued:  max(0, others-c.workers),
		Workers: c.workers,
		Done:    c.done.Load(),
	})
	return resp, err
}

// Stats counts the load reports an Interceptor read from its copies'
// trailers. It reads them only with WithReplicas (see the package doc,
// "Load reports"); without, every count stays zero.
type Stats struct {
	// LoadReports counts the reports passed to the Hedgers'
	// ReportLoad: those with the hedge_* metrics, and those read from a
	// utilization.
	LoadReports int64
	// UtilizationReports counts those of LoadReports read from a
	// utilization, for want of hedge_* metrics: reports of servers that
	// do not run the toolkit's interceptors.
	UtilizationReports int64
	// EmptyLoadReports counts well-formed reports that carry no load:
	// neither hedge_* metrics nor a utilization above zero. They are
	// ignored.
	EmptyLoadReports int64
	// BadLoadReports counts malformed reports, ignored: a value that is
	// not an OrcaLoadReport, several values, a hedge_* metric that is not
	// a whole number in range (negative, fractional, NaN, infinite, or a
	// hedge_done above 2^53; a larger count of the others reads as
	// loadreport.MaxCount), or
	// a utilization that is negative, NaN or infinite. A malformed report
	// never fails the call.
	BadLoadReports int64
}

// loadStats are an Interceptor's counts of Stats.
type loadStats struct {
	reports, utilization, empty, bad atomic.Int64
}

// Stats returns the Interceptor's counts of load reports. The Hedgers'
// own stats (Hedger(method).OpStats) count how their hedge decisions
// read a replica's load: hedge.Stats.LoadByReport and LoadByOwnView.
func (ic *Interceptor) Stats() Stats {
	return Stats{
		LoadReports:        ic.loads.reports.Load(),
		UtilizationReports: ic.loads.utilization.Load(),
		EmptyLoadReports:   ic.loads.empty.Load(),
		BadLoadReports:     ic.loads.bad.Load(),
	}
}

// reportKind is what a copy's trailer said of the load.
type reportKind uint8

const (
	noReport    reportKind = iota // no LoadReportKey in the trailer
	namedReport                   // the hedge_* metrics
	utilReport                    // a utilization
	emptyReport                   // a well-formed report without load
	badReport                     // malformed
)

// readLoad reads the load report in the trailer of a copy that replica
// answered, counts it, and passes it to every Hedger of the Interceptor:
// the load is the server's, whichever method answered.
func (ic *Interceptor) readLoad(replica int, trailer metadata.MD) {
	l, kind := parseLoadReport(trailer[LoadReportKey])
	switch kind {
	case noReport:
		return
	case badReport:
		ic.loads.bad.Add(1)
		return
	case emptyReport:
		ic.loads.empty.Add(1)
		return
	case utilReport:
		ic.loads.utilization.Add(1)
	}
	ic.loads.reports.Add(1)
	for _, h := range ic.hedgers {
		h.ReportLoad(replica, l)
	}
	if ic.tied != nil {
		ic.tied.c.ReportLoad(replica, l)
	}
}

// parseLoadReport reads the values of a LoadReportKey trailer: none is no
// report, more than one a malformed one (as gRPC's own parser has it).
func parseLoadReport(vs []string) (hedge.Load, reportKind) {
	switch len(vs) {
	case 0:
		return hedge.Load{}, noReport
	case 1:
	default:
		return hedge.Load{}, badReport
	}
	var r v3orcapb.OrcaLoadReport
	if err := proto.Unmarshal([]byte(vs[0]), &r); err != nil {
		return hedge.Load{}, badReport
	}
	return loadOf(&r)
}

// loadOf maps an ORCA report to a Load: the hedge_* named metrics
// exactly, when any is present (a missing one reads as 0, and a Running,
// Queued or Workers above loadreport.MaxCount as loadreport.MaxCount);
// otherwise
// application_utilization, else cpu_utilization, u (capped at
// maxUtilization) as round(100u) requests on UtilizationWorkers workers,
// those beyond the workers queued.
func loadOf(r *v3orcapb.OrcaLoadReport) (hedge.Load, reportKind) {
	var l hedge.Load
	named, ok := false, true
	// read returns the metric's value, a whole number at most limit,
	// or 0 if absent. A larger one reads as limit when capped, and is
	// malformed otherwise.
	read := func(name string, limit float64, capped bool) int64 {
		v, present := r.GetNamedMetrics()[name]
		if !present {
			return 0
		}
		named = true
		if !(v >= 0) || math.IsInf(v, 1) || v != math.Trunc(v) || v > limit && !capped {
			ok = false
			return 0
		}
		return int64(min(v, limit))
	}
	l.Running = int(read(RunningMetric, wire.LoadMaxCount, true))
	l.Queued = int(read(QueuedMetric, wire.LoadMaxCount, true))
	l.Workers = int(read(WorkersMetric, wire.LoadMaxCount, true))
	l.Done = read(DoneMetric, maxDone, false)
	switch {
	case !ok:
		return hedge.Load{}, badReport
	case named:
		return l, namedReport
	}
	u := r.GetApplicationUtilization()
	if u == 0 {
		u = r.GetCpuUtilization()
	}
	switch {
	case !(u >= 0) || math.IsInf(u, 1):
		return hedge.Load{}, badReport
	case u == 0:
		return hedge.Load{}, emptyReport
	}
	n := int(math.Round(min(u, maxUtilization) * UtilizationWorkers))
	return hedge.Load{Running: min(n, UtilizationWorkers), Queued: max(0, n-UtilizationWorkers), Workers: UtilizationWorkers}, utilReport
}
