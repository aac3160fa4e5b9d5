package hedgegrpc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/internal/decide"
)

// reportOf reads the ORCA report in a trailer, or nil if it has none.
func reportOf(t *testing.T, trailer metadata.MD) *v3orcapb.OrcaLoadReport {
	t.Helper()
	vs := trailer.Get(hedgegrpc.LoadReportKey)
	switch len(vs) {
	case 0:
		return nil
	case 1:
	default:
		t.Fatalf("%d load reports in the trailer, want one", len(vs))
	}
	r := new(v3orcapb.OrcaLoadReport)
	if err := proto.Unmarshal([]byte(vs[0]), r); err != nil {
		t.Fatalf("load report: %v", err)
	}
	return r
}

// loadOf is the hedge.Load in a report's hedge_* metrics.
func loadOf(r *v3orcapb.OrcaLoadReport) hedge.Load {
	m := r.GetNamedMetrics()
	return hedge.Load{
		Running: int(m[hedgegrpc.RunningMetric]),
		Queued:  int(m[hedgegrpc.QueuedMetric]),
		Workers: int(m[hedgegrpc.WorkersMetric]),
		Done:    int64(m[hedgegrpc.DoneMetric]),
	}
}

func TestLoadReportInterceptorWorkers(t *testing.T) {
	for _, w := range []int{0, -1, -100} {
		ic, err := hedgegrpc.LoadReportInterceptor(w)
		if !errors.Is(err, hedgegrpc.ErrInvalidWorkers) || ic != nil {
			t.Errorf("LoadReportInterceptor(%d) = %v, %v; want ErrInvalidWorkers", w, ic != nil, err)
		}
	}
	if ic, err := hedgegrpc.LoadReportInterceptor(1); err != nil || ic == nil {
		t.Errorf("LoadReportInterceptor(1): %v", err)
	}
}

// mustLoadReporter is LoadReportInterceptor(workers), or the test fails.
func mustLoadReporter(t testing.TB, workers int) grpc.UnaryServerInterceptor {
	t.Helper()
	lr, err := hedgegrpc.LoadReportInterceptor(workers)
	if err != nil {
		t.Fatal(err)
	}
	return lr
}

// reporting returns the options of a server that runs LoadReportInterceptor(workers).
func reporting(t testing.TB, workers int) []grpc.ServerOption {
	return []grpc.ServerOption{orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(mustLoadReporter(t, workers))}
}

// holdKey marks a call that the backend of holding holds.
const holdKey = "hold"

// holding answers at once, except calls with holdKey metadata, which
// signal on started and wait for release.
func holding(started chan<- struct{}, release <-chan struct{}) handler {
	return func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(holdKey)) > 0 {
			started <- struct{}{}
			<-release
		}
		return b.reply(attempt), nil
	}
}

// LoadReportInterceptor reports the other calls in the handlers, those
// beyond the workers as queued, and the calls answered before.
func TestLoadReportInterceptorReports(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	b := startBackends(t, 1, holding(started, release), reporting(t, 1)...)[0]
	client := testgrpc.NewTestServiceClient(dial(t, b.addr))
	ctx := context.Background()
	call := func() (*v3orcapb.OrcaLoadReport, error) {
		var trailer metadata.MD
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
		return reportOf(t, trailer), err
	}

	r, err := call()
	if err != nil || r == nil {
		t.Fatalf("first call: report %v, %v", r, err)
	}
	if got, want := loadOf(r), (hedge.Load{Workers: 1}); got != want {
		t.Errorf("idle: %+v, want %+v", got, want)
	}

	held := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := client.UnaryCall(metadata.AppendToOutgoingContext(ctx, holdKey, "1"), &testgrpc.SimpleRequest{})
			held <- err
		}()
		<-started
	}
	r, err = call()
	if err != nil || r == nil {
		t.Fatalf("call beside two held: report %v, %v", r, err)
	}
	if got, want := loadOf(r), (hedge.Load{Running: 1, Queued: 1, Workers: 1, Done: 1}); got != want {
		t.Errorf("two others on one worker: %+v, want %+v", got, want)
	}
	if u := r.GetApplicationUtilization(); u != 2 {
		t.Errorf("application utilization %v, want 2", u)
	}
	close(release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
	r, _ = call()
	if got, want := loadOf(r), (hedge.Load{Workers: 1, Done: 4}); got != want {
		t.Errorf("after: %+v, want %+v", got, want)
	}
}

// gRPC sends a report only when the server has the ORCA option and the
// recording interceptor runs after the option's own: not from
// grpc.UnaryInterceptor, which runs first.
func TestLoadReportNeedsTheORCAOptionFirst(t *testing.T) {
	for _, c := range []struct {
		name string
		opts func(lr grpc.UnaryServerInterceptor) []grpc.ServerOption
		want bool
	}{
		{"option then chained", func(lr grpc.UnaryServerInterceptor) []grpc.ServerOption {
			return []grpc.ServerOption{orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(lr)}
		}, true},
		{"no option", func(lr grpc.UnaryServerInterceptor) []grpc.ServerOption {
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(lr)}
		}, false},
		{"option, UnaryInterceptor", func(lr grpc.UnaryServerInterceptor) []grpc.ServerOption {
			return []grpc.ServerOption{orca.CallMetricsServerOption(nil), grpc.UnaryInterceptor(lr)}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := startBackends(t, 1, nil, c.opts(mustLoadReporter(t, 2))...)[0]
			var trailer metadata.MD
			if _, err := testgrpc.NewTestServiceClient(dial(t, b.addr)).UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer)); err != nil {
				t.Fatal(err)
			}
			if got := reportOf(t, trailer) != nil; got != c.want {
				t.Errorf("report sent: %v, want %v", got, c.want)
			}
		})
	}
}

// failPrimaries fails every primary with Unavailable, after its server
// has recorded its report, and answers every hedge copy.
func failPrimaries(_ context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
	if attempt == "" {
		return nil, status.Error(codes.Unavailable, "primary refused")
	}
	return b.reply(attempt), nil
}

// reportsHedger hedges at once after a primary's Unavailable, and
// otherwise only after an hour, so that no copy depends on a timer; the
// hour is also how long a report stays fresh.
func reportsHedger(t testing.TB) *hedge.Hedger {
	return mustHedger(t, hedge.Config{
		Delay:     hedge.Fixed(time.Hour),
		Replicas:  2,
		NoBudget:  true,
		Retryable: hedgegrpc.NonFatal(codes.Unavailable),
	})
}

// With WithReplicas the Interceptor reads every copy's report, and a
// hedge decision reads the load of the copy's replica from its fresh
// report. Calls run one after another, each primary failing with
// Unavailable, so the copy is decided at once (no timer): the first
// call's copy goes to a replica that has not answered yet (own view),
// the second's to one whose report from the first call is fresh.
func TestHedgeDecisionReadsFreshReports(t *testing.T) {
	for _, c := range []struct {
		name                   string
		opts                   []grpc.ServerOption
		reports, byRep, byView int64
	}{
		{"reporting servers", reporting(t, 4), 4, 1, 1},
		{"silent servers", nil, 0, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := reportsHedger(t)
			cl := connect(t, startBackends(t, 2, failPrimaries, c.opts...), withHedger(h, true))
			for i := range 2 {
				resp, err := cl.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				if err != nil || resp.GetHostname() != "attempt=1" {
					t.Fatalf("call %d: %v, %v; want the hedge's answer", i, resp, err)
				}
			}
			if got := cl.ic.Stats(); got != (hedgegrpc.Stats{LoadReports: c.reports}) {
				t.Errorf("Interceptor stats %+v, want %d reports", got, c.reports)
			}
			s := h.OpStats(unaryCall)
			if s.LoadByReport != c.byRep || s.LoadByOwnView != c.byView {
				t.Errorf("LoadByReport %d, LoadByOwnView %d; want %d, %d", s.LoadByReport, s.LoadByOwnView, c.byRep, c.byView)
			}
		})
	}
}

// Reports from calls without hedges are read too, and freshen the load a
// later hedge decision reads; no hedge decision, no LoadBy count.
func TestReportsWithoutHedges(t *testing.T) {
	h := reportsHedger(t)
	cl := connect(t, startBackends(t, 2, nil, reporting(t, 4)...), withHedger(h, true))
	for range 3 {
		if _, err := cl.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := cl.ic.Stats(); got != (hedgegrpc.Stats{LoadReports: 3}) {
		t.Errorf("%+v, want 3 reports", got)
	}
	if s := h.OpStats(unaryCall); s.LoadByReport != 0 || s.LoadByOwnView != 0 || s.Hedges != 0 {
		t.Errorf("%+v, want no hedge decision", s)
	}
}

// Without WithReplicas the Interceptor does not read reports: a copy's
// replica names no backend.
func TestNoReportsWithoutReplicas(t *testing.T) {
	h := reportsHedger(t)
	cl := connect(t, startBackends(t, 1, failPrimaries, reporting(t, 4)...), withHedger(h, false))
	if _, err := cl.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := cl.ic.Stats(); got != (hedgegrpc.Stats{}) {
		t.Errorf("%+v, want nothing read", got)
	}
}

// foreign is the interceptor of a server that reports only ORCA's own
// metrics: application and CPU utilization (where not 0) and a request
// cost, which makes gRPC send the report even when both are 0.
func foreign(app, cpu float64) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		r := orca.CallMetricsRecorderFromContext(ctx)
		if app > 0 {
			r.SetApplicationUtilization(app)
		}
		if cpu > 0 {
			r.SetCPUUtilization(cpu)
		}
		r.SetRequestCost("db", 1)
		return h(ctx, req)
	}
}

// A server that is not the toolkit's reports a utilization u, read as
// round(100u) requests on 100 workers (application utilization, else CPU);
// a report without utilization is ignored. As in
// TestHedgeDecisionReadsFreshReports, the second call's copy reads the
// first call's report.
func TestUtilizationReports(t *testing.T) {
	for _, c := range []struct {
		name     string
		app, cpu float64
		stats    hedgegrpc.Stats
		byRep    int64
	}{
		{"application below 1", 0.5, 3, hedgegrpc.Stats{LoadReports: 4, UtilizationReports: 4}, 1},
		{"application above 1", 2, 0, hedgegrpc.Stats{LoadReports: 4, UtilizationReports: 4}, 1},
		{"cpu", 0, 0.3, hedgegrpc.Stats{LoadReports: 4, UtilizationReports: 4}, 1},
		{"none", 0, 0, hedgegrpc.Stats{EmptyLoadReports: 4}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := reportsHedger(t)
			opts := []grpc.ServerOption{orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(foreign(c.app, c.cpu))}
			cl := connect(t, startBackends(t, 2, failPrimaries, opts...), withHedger(h, true))
			for i := range 2 {
				if _, err := cl.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if got := cl.ic.Stats(); got != c.stats {
				t.Errorf("Interceptor stats %+v, want %+v", got, c.stats)
			}
			if s := h.OpStats(unaryCall); s.LoadByReport != c.byRep {
				t.Errorf("LoadByReport %d, want %d", s.LoadByReport, c.byRep)
			}
		})
	}
}

// switchDelay is a delay the test sets between calls: every operation
// class reads it at the start of each request (decide.DelayOf).
type switchDelay struct{ d atomic.Int64 }

func (s *switchDelay) Delay(time.Duration) time.Duration    { return time.Duration(s.d.Load()) }
func (s *switchDelay) Observe(time.Duration, time.Duration) {}
func (s *switchDelay) set(d time.Duration)                  { s.d.Store(int64(d)) }

// record is a server interceptor that reports l with every answer.
func record(l hedge.Load) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		hedgegrpc.RecordLoad(ctx, l)
		return resp, err
	}
}

// The spare-capacity rule reads a copy's replica's load from its fresh
// report: a copy goes to a replica that reports a free worker, and not to
// one that reports none, in the toolkit's metrics or as a utilization
// above 1. A first call, with an hour's delay (so that a report counts
// for an hour), fails its primary so that both replicas answer and
// report; the second, with a zero delay, decides its hedge as it starts,
// no timer involved, on the report of the replica its primary is not on.
func TestReportsDecideCopies(t *testing.T) {
	for _, c := range []struct {
		name   string
		server grpc.UnaryServerInterceptor
		hedged bool
	}{
		{"free worker", record(hedge.Load{Running: 2, Workers: 4}), true},
		{"no free worker", record(hedge.Load{Running: 4, Queued: 1, Workers: 4}), false},
		{"queue beyond int32", record(hedge.Load{Running: 4, Queued: 1 << 40, Workers: 4}), false},
		{"utilization below 1", foreign(0.5, 0), true},
		{"utilization above 1", foreign(2, 0), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fail := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
				if md, _ := metadata.FromIncomingContext(ctx); attempt == "" && len(md.Get("fail")) > 0 {
					return nil, status.Error(codes.Unavailable, "refused")
				}
				return b.reply(attempt), nil
			}
			delay := new(switchDelay)
			delay.set(time.Hour)
			h := mustHedger(t, hedge.Config{
				Delay:     decide.DelayOf(delay).(hedge.Delay),
				Replicas:  2,
				NoBudget:  true,
				Retryable: hedgegrpc.NonFatal(codes.Unavailable),
			})
			cl := connect(t, startBackends(t, 2, fail, orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(c.server)), withHedger(h, true))
			ctx := context.Background()
			if _, err := cl.client().UnaryCall(metadata.AppendToOutgoingContext(ctx, "fail", "1"), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatalf("first call: %v", err)
			}
			delay.set(0)
			if _, err := cl.client().UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
				t.Fatalf("second call: %v", err)
			}
			s := h.OpStats(unaryCall)
			if s.LoadByReport != 1 || s.LoadByOwnView != 1 {
				t.Errorf("LoadByReport %d, LoadByOwnView %d; want the first call's copy decided by the own view, the second's by a report", s.LoadByReport, s.LoadByOwnView)
			}
			if want := 1 + int64(btoi(c.hedged)); s.Hedges != want {
				t.Errorf("%d hedges, want %d: the first call's copy, and the second's if hedged", s.Hedges, want)
			}
			if got := cl.sent.Load(); got != 3+int64(btoi(c.hedged)) {
				t.Errorf("%d copies sent, want %d (hedged: %v)", got, 3+btoi(c.hedged), c.hedged)
			}
			if (s.Refused[hedge.RefusedBusy] == 1) == c.hedged {
				t.Errorf("RefusedBusy %d, want the copy refused: %v", s.Refused[hedge.RefusedBusy], !c.hedged)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A malformed report is counted and ignored; the call succeeds.
func TestBadLoadReports(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(ctx context.Context)
	}{
		{"not a report", func(ctx context.Context) {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(hedgegrpc.LoadReportKey, "\xff\xff\xff"))
		}},
		{"two reports", func(ctx context.Context) {
			b, _ := proto.Marshal(&v3orcapb.OrcaLoadReport{ApplicationUtilization: 0.5})
			_ = grpc.SetTrailer(ctx, metadata.Pairs(hedgegrpc.LoadReportKey, string(b), hedgegrpc.LoadReportKey, string(b)))
		}},
		{"negative count", func(ctx context.Context) {
			orca.CallMetricsRecorderFromContext(ctx).SetNamedMetric(hedgegrpc.RunningMetric, -1)
		}},
		{"fractional count", func(ctx context.Context) {
			orca.CallMetricsRecorderFromContext(ctx).SetNamedMetric(hedgegrpc.WorkersMetric, 2.5)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := reportsHedger(t)
			set := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				c.set(ctx)
				return h(ctx, req)
			}
			cl := connect(t, startBackends(t, 2, nil, orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(set)), withHedger(h, true))
			if _, err := cl.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
			if got := cl.ic.Stats(); got != (hedgegrpc.Stats{BadLoadReports: 1}) {
				t.Errorf("%+v, want one bad report", got)
			}
		})
	}
}

// A report reaches every Hedger of an Interceptor made from a service
// config: the load is the server's, whichever method answered. EmptyCall's
// copies (its primaries fail in the client) leave both replicas' reports
// with UnaryCall's Hedger, whose first hedge decision reads one.
func TestReportsReachEveryMethodsHedger(t *testing.T) {
	sc, err := hedgegrpc.ParseServiceConfig(`{"methodConfig": [
		{"name": [{"service": "grpc.testing.TestService", "method": "UnaryCall"}],
		 "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "3600s", "nonFatalStatusCodes": ["UNAVAILABLE"]}},
		{"name": [{"service": "grpc.testing.TestService", "method": "EmptyCall"}],
		 "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "3600s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	const emptyCall = "/grpc.testing.TestService/EmptyCall"
	// failEmptyPrimaries fails EmptyCall's primaries once answered, so
	// that their trailers carry their servers' reports.
	failEmptyPrimaries := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method == emptyCall && attemptOf(ctx) == "" && err == nil {
			return status.Error(codes.Unavailable, "primary refused")
		}
		return err
	}
	cl := connect(t, startBackends(t, 2, failPrimaries, reporting(t, 4)...), func(conns []*grpc.ClientConn) (*hedgegrpc.Interceptor, error) {
		return hedgegrpc.NewFromServiceConfig(sc, hedge.Config{NoBudget: true}, hedgegrpc.WithReplicas(conns...))
	}, failEmptyPrimaries)
	if _, err := cl.client().EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if s := cl.ic.Hedger(unaryCall).OpStats(unaryCall); s.LoadByReport != 1 {
		t.Errorf("UnaryCall: LoadByReport %d, want 1 from EmptyCall's reports", s.LoadByReport)
	}
	if got := cl.ic.Stats(); got != (hedgegrpc.Stats{LoadReports: 4}) {
		t.Errorf("%+v, want 4 reports", got)
	}
}
