package sparegrpc_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/spare"
	"github.com/tailcut/hedge/spare/sparegrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service answers UnaryCall through handle, which reads the request's
// payload and returns the answer's username.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	handle func(ctx context.Context, in string) (string, error)
}

func (s service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	out, err := s.handle(ctx, string(req.GetPayload().GetBody()))
	if err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{Username: out}, nil
}

// serve starts the test service behind l and returns a client of it and
// a function that stops both.
func serve(t *testing.T, l *spare.Limiter, handle func(ctx context.Context, in string) (string, error)) (testgrpc.TestServiceClient, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sparegrpc.ServerOptions(l)...)
	testgrpc.RegisterTestServiceServer(srv, service{handle: handle})
	go srv.Serve(lis)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return testgrpc.NewTestServiceClient(cc), func() { cc.Close(); srv.Stop() }
}

// call sends in; attempt, if not empty, marks it as that hedge copy.
func call(ctx context.Context, c testgrpc.TestServiceClient, in string, attempt string, opts ...grpc.CallOption) (string, error) {
	if attempt != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, hedgegrpc.AttemptKey, attempt)
	}
	out, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(in)}}, opts...)
	return out.GetUsername(), err
}

// reported returns the load in a trailer's ORCA report, and its
// application utilization; the test fails if there is none.
func reported(t *testing.T, trailer metadata.MD) (hedge.Load, float64) {
	t.Helper()
	vs := trailer.Get(hedgegrpc.LoadReportKey)
	if len(vs) != 1 {
		t.Fatalf("trailer %v: want one load report", trailer)
	}
	r := new(v3orcapb.OrcaLoadReport)
	if err := proto.Unmarshal([]byte(vs[0]), r); err != nil {
		t.Fatal(err)
	}
	m := r.GetNamedMetrics()
	return hedge.Load{
		Running: int(m[hedgegrpc.RunningMetric]),
		Queued:  int(m[hedgegrpc.QueuedMetric]),
		Workers: int(m[hedgegrpc.WorkersMetric]),
		Done:    int64(m[hedgegrpc.DoneMetric]),
	}, r.GetApplicationUtilization()
}

// Every answer reports the Limiter's load, less the call answered: the
// calls holding a worker and waiting, the workers, and the workers
// released before.
func TestLoadReports(t *testing.T) {
	l, err := spare.New(spare.Config{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	started, hold := make(chan struct{}), make(chan struct{})
	cc, stop := serve(t, l, func(ctx context.Context, in string) (string, error) {
		if in == "hold" {
			close(started)
			<-hold
		}
		return in, nil
	})
	defer stop()
	ctx := context.Background()
	var held metadata.MD
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, cc, "hold", "", grpc.Trailer(&held))
		done <- err
	}()
	<-started

	var trailer metadata.MD
	if _, err := call(ctx, cc, "x", "", grpc.Trailer(&trailer)); err != nil {
		t.Fatal(err)
	}
	if got, u := reported(t, trailer); got != (hedge.Load{Running: 1, Workers: 2}) || u != 0.5 {
		t.Errorf("beside a held call: %+v, utilization %v; want 1 of 2 running, 0.5", got, u)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, u := reported(t, held); got != (hedge.Load{Workers: 2, Done: 1}) || u != 0 {
		t.Errorf("the held call: %+v, utilization %v; want idle, 1 done", got, u)
	}

	// A stream reports when it ends, here with the test service's
	// Unimplemented.
	s, err := cc.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("stream: %v, want Unimplemented", err)
	}
	if got, _ := reported(t, s.Trailer()); got != (hedge.Load{Workers: 2, Done: 2}) {
		t.Errorf("stream: %+v, want idle, 2 done", got)
	}
}

// A unary copy that holds the only worker is preempted by a primary and
// answered from its second run.
func TestUnaryCopyIsPreemptedAndReplayed(t *testing.T) {
	l, err := spare.New(spare.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var copyRuns atomic.Int32
	cc, stop := serve(t, l, func(ctx context.Context, in string) (string, error) {
		if in != "copy" {
			return "primary", nil
		}
		if copyRuns.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return "", status.FromContextError(ctx.Err()).Err()
		}
		return "whole", nil
	})
	defer stop()
	type result struct {
		out string
		err error
	}
	copyDone := make(chan result, 1)
	go func() {
		out, err := call(context.Background(), cc, "copy", "1")
		copyDone <- result{out, err}
	}()
	<-started
	if out, err := call(context.Background(), cc, "p", ""); err != nil || out != "primary" {
		t.Fatalf("primary: %q, %v", out, err)
	}
	r := <-copyDone
	if r.err != nil || r.out != "whole" {
		t.Fatalf("copy: %q, %v: want \"whole\" from its second run", r.out, r.err)
	}
	if s := l.Stats(); s.Preempted != 1 || s.Reruns != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestFullQueueIsResourceExhausted(t *testing.T) {
	l, err := spare.New(spare.Config{Workers: 1, MaxQueue: -1})
	if err != nil {
		t.Fatal(err)
	}
	started, hold := make(chan struct{}), make(chan struct{})
	cc, stop := serve(t, l, func(ctx context.Context, in string) (string, error) {
		if in == "hold" {
			close(started)
			<-hold
		}
		return in, nil
	})
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(context.Background(), cc, "hold", "")
	}()
	<-started
	var trailer metadata.MD
	if _, err := call(context.Background(), cc, "other", "", grpc.Trailer(&trailer)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a call with no worker and no queue: %v, want ResourceExhausted", err)
	}
	if got, _ := reported(t, trailer); got != (hedge.Load{Running: 1, Workers: 1}) {
		t.Errorf("the refusal reported %+v, want the one worker busy", got)
	}
	close(hold)
	<-done
}
