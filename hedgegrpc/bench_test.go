package hedgegrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"google.golang.org/protobuf/proto"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

// BenchmarkUnary measures a unary call over loopback: plain, and with the
// Interceptor installed but no hedge firing (the delay is an hour), so the
// difference is the cost of the interceptor on every call: hedge.Do, a reply
// of the copy's own and the copy into the caller's reply.
//
//	go test ./hedgegrpc -run '^$' -bench . -benchmem -count 5
func BenchmarkUnary(b *testing.B) {
	idle := func(b *testing.B, replicas int) *hedge.Hedger {
		h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: replicas})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	for _, bc := range []struct {
		name string
		conn func(b *testing.B) *grpc.ClientConn
	}{
		{"plain", func(b *testing.B) *grpc.ClientConn {
			return dial(b, startBackends(b, 1, nil)[0].addr)
		}},
		{"interceptor-idle", func(b *testing.B) *grpc.ClientConn {
			ic, err := hedgegrpc.New(idle(b, 0))
			if err != nil {
				b.Fatal(err)
			}
			return dial(b, startBackends(b, 1, nil)[0].addr, grpc.WithUnaryInterceptor(ic.Unary))
		}},
		{"interceptor-idle-2-replicas", func(b *testing.B) *grpc.ClientConn {
			return replicaConn(b, idle(b, 2))
		}},
		{"interceptor-idle-2-replicas-load-reports", func(b *testing.B) *grpc.ClientConn {
			// As above, the servers reporting their load
			// (LoadReportInterceptor) and the Interceptor reading it.
			return replicaConn(b, idle(b, 2), reporting(b, 16)...)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			client := testgrpc.NewTestServiceClient(bc.conn(b))
			ctx := context.Background()
			req := &testgrpc.SimpleRequest{ResponseSize: 16}
			if _, err := client.UnaryCall(ctx, req); err != nil { // connect
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// replicaConn starts two backends with opts, dials one conn to each with
// an Interceptor over h and WithReplicas, and returns the first conn.
// The primary goes on either conn: half the calls take the other conn's
// Invoke.
func replicaConn(b *testing.B, h *hedge.Hedger, opts ...grpc.ServerOption) *grpc.ClientConn {
	var ic *hedgegrpc.Interceptor
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return ic.Unary(ctx, method, req, reply, cc, invoker, opts...)
	}
	var conns []*grpc.ClientConn
	for _, be := range startBackends(b, 2, nil, opts...) {
		conns = append(conns, dial(b, be.addr, grpc.WithUnaryInterceptor(unary)))
	}
	var err error
	if ic, err = hedgegrpc.New(h, hedgegrpc.WithReplicas(conns...)); err != nil {
		b.Fatal(err)
	}
	for _, cc := range conns[1:] { // connect
		if _, err := testgrpc.NewTestServiceClient(cc).EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
			b.Fatal(err)
		}
	}
	return conns[0]
}

// BenchmarkInterceptorOverhead isolates the interceptor's own cost from
// the network's: the invoker only unmarshals a fixed response, as gRPC
// would, so "direct" minus "interceptor-idle" is what the interceptor adds
// to every call when no hedge fires, without loopback noise.
func BenchmarkInterceptorOverhead(b *testing.B) {
	wire, err := proto.Marshal(&testgrpc.SimpleResponse{
		ServerId: "b0", Hostname: "attempt=",
		Payload: &testgrpc.Payload{Body: make([]byte, 16)},
	})
	if err != nil {
		b.Fatal(err)
	}
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return proto.Unmarshal(wire, reply.(proto.Message))
	}
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	ic, err := hedgegrpc.New(h)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := &testgrpc.SimpleRequest{}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := invoker(ctx, unaryCall, req, new(testgrpc.SimpleResponse), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("interceptor-idle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ic.Unary(ctx, unaryCall, req, new(testgrpc.SimpleResponse), nil, invoker); err != nil {
				b.Fatal(err)
			}
		}
	})
}
