package sparegrpc_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/spare"
	"github.com/tailcut/hedge/spare/sparegrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const echoMethod = "/test.Echo/Echo"

type echo interface{}

func echoDesc(handle func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*echo)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Echo",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) { return handle(ctx, req.(*wrapperspb.StringValue)) }
				return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: echoMethod}, h)
			},
		}},
	}
}

// serve starts a gRPC server of the echo service behind l and returns a
// connection to it and a function that stops both.
func serve(t *testing.T, l *spare.Limiter, handle func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) (*grpc.ClientConn, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(sparegrpc.UnaryServerInterceptor(l)))
	srv.RegisterService(echoDesc(handle), nil)
	go srv.Serve(lis)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return cc, func() { cc.Close(); srv.Stop() }
}

func call(ctx context.Context, cc *grpc.ClientConn, in string, attempt string) (string, error) {
	if attempt != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, hedgegrpc.PreviousAttemptsKey, attempt)
	}
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, echoMethod, wrapperspb.String(in), out)
	return out.GetValue(), err
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
	cc, stop := serve(t, l, func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		if in.GetValue() != "copy" {
			return wrapperspb.String("primary"), nil
		}
		if copyRuns.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return wrapperspb.String("whole"), nil
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
	cc, stop := serve(t, l, func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		if in.GetValue() == "hold" {
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
	if _, err := call(context.Background(), cc, "other", ""); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a call with no worker and no queue: %v, want ResourceExhausted", err)
	}
	close(hold)
	<-done
}
