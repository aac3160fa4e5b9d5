package hedgegrpc_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge/hedgegrpc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// handler decides how a backend answers one UnaryCall; attempt is the
// grpc-previous-rpc-attempts value the call carried ("" for none).
type handler func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error)

// arrival is what a backend saw of one call.
type arrival struct {
	attempt     string // grpc-previous-rpc-attempts values, joined by ","; "" if absent
	hedge       string // hedge-attempt values (AttemptKey), likewise
	hasDeadline bool
}

// backend is a real TestService on a loopback listener, with counters and
// stall injection through its handler.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	id     string
	addr   string
	handle handler // set before the first call; nil answers at once

	unary   atomic.Int64
	empty   atomic.Int64
	streams atomic.Int64

	mu       sync.Mutex
	arrivals []arrival
}

func (b *backend) see(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	a := strings.Join(md.Get(hedgegrpc.PreviousAttemptsKey), ",")
	hg := strings.Join(md.Get(hedgegrpc.AttemptKey), ",")
	_, dl := ctx.Deadline()
	b.mu.Lock()
	b.arrivals = append(b.arrivals, arrival{attempt: a, hedge: hg, hasDeadline: dl})
	b.mu.Unlock()
	return a
}

// seen returns the attempts seen so far.
func (b *backend) seen() []arrival {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]arrival(nil), b.arrivals...)
}

// reply is the backend's answer to a copy.
func (b *backend) reply(attempt string) *testgrpc.SimpleResponse {
	return &testgrpc.SimpleResponse{
		ServerId: b.id,
		Hostname: "attempt=" + attempt,
		Payload:  &testgrpc.Payload{Body: []byte(b.id + "/" + attempt)},
	}
}

func (b *backend) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	attempt := b.see(ctx)
	b.unary.Add(1)
	md := metadata.Pairs("server", b.id, "attempt", attempt)
	_ = grpc.SetHeader(ctx, md)
	_ = grpc.SetTrailer(ctx, md)
	if b.handle != nil {
		return b.handle(ctx, b, attempt)
	}
	return b.reply(attempt), nil
}

func (b *backend) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	b.see(ctx)
	b.empty.Add(1)
	return &testgrpc.Empty{}, nil
}

func (b *backend) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	b.see(stream.Context())
	b.streams.Add(1)
	for range req.GetResponseParameters() {
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(b.id)}}); err != nil {
			return err
		}
	}
	return nil
}

func (b *backend) FullDuplexCall(stream grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	b.see(stream.Context())
	b.streams.Add(1)
	for {
		if _, err := stream.Recv(); err != nil {
			return nil
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(b.id)}}); err != nil {
			return err
		}
	}
}

// startBackends serves n TestServices on 127.0.0.1:0, all with handle,
// on servers made with opts. They stop when the test ends.
func startBackends(t testing.TB, n int, handle handler, opts ...grpc.ServerOption) []*backend {
	t.Helper()
	bs := make([]*backend, n)
	for i := range bs {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b := &backend{id: "b" + string(rune('0'+i)), addr: lis.Addr().String(), handle: handle}
		srv := grpc.NewServer(opts...)
		testgrpc.RegisterTestServiceServer(srv, b)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		bs[i] = b
	}
	return bs
}

// dial connects to addr; the conn is closed when the test ends (before the
// servers stop).
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// cluster is n backends, one conn to each, and an Interceptor installed on
// every conn, followed by a counter of copies in flight and any inner
// interceptors.
type cluster struct {
	backends []*backend
	conns    []*grpc.ClientConn
	ic       *hedgegrpc.Interceptor
	inFlight atomic.Int64 // copies whose invoker has not returned
	sent     atomic.Int64 // copies sent
}

// newCluster builds the cluster; build makes the Interceptor once the
// conns exist (it may pass them to WithReplicas). This is the wiring of
// ExampleWithReplicas: the conns are dialed with a closure over the
// Interceptor, which is made from the conns.
func newCluster(t testing.TB, n int, handle handler, build func(conns []*grpc.ClientConn) (*hedgegrpc.Interceptor, error), inner ...grpc.UnaryClientInterceptor) *cluster {
	t.Helper()
	return connect(t, startBackends(t, n, handle), build, inner...)
}

// connect is newCluster on backends already started.
func connect(t testing.TB, backends []*backend, build func(conns []*grpc.ClientConn) (*hedgegrpc.Interceptor, error), inner ...grpc.UnaryClientInterceptor) *cluster {
	t.Helper()
	c := &cluster{backends: backends}
	chain := append([]grpc.UnaryClientInterceptor{
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return c.ic.Unary(ctx, method, req, reply, cc, invoker, opts...)
		},
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.sent.Add(1)
			c.inFlight.Add(1)
			defer c.inFlight.Add(-1)
			return invoker(ctx, method, req, reply, cc, opts...)
		},
	}, inner...)
	for _, b := range c.backends {
		c.conns = append(c.conns, dial(t, b.addr, grpc.WithChainUnaryInterceptor(chain...)))
	}
	ic, err := build(c.conns)
	if err != nil {
		t.Fatal(err)
	}
	c.ic = ic
	return c
}

// client is a TestService client on the first conn.
func (c *cluster) client() testgrpc.TestServiceClient {
	return testgrpc.NewTestServiceClient(c.conns[0])
}

// byAttempt returns the backend that saw each attempt value, and fails the
// test if one was seen twice.
func (c *cluster) byAttempt(t testing.TB) map[string]*backend {
	t.Helper()
	m := map[string]*backend{}
	for _, b := range c.backends {
		for _, a := range b.seen() {
			if m[a.attempt] != nil {
				t.Errorf("attempt %q seen twice (%s and %s)", a.attempt, m[a.attempt].id, b.id)
			}
			m[a.attempt] = b
		}
	}
	return m
}

func (c *cluster) unaryCalls() int64 {
	var n int64
	for _, b := range c.backends {
		n += b.unary.Load()
	}
	return n
}

// stall blocks until ctx ends, as a backend that never answers.
func stall(ctx context.Context) error {
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

// attemptOf returns the grpc-previous-rpc-attempts value of an outgoing
// context ("" for the primary).
func attemptOf(ctx context.Context) string {
	md, _ := metadata.FromOutgoingContext(ctx)
	return strings.Join(md.Get(hedgegrpc.PreviousAttemptsKey), ",")
}
