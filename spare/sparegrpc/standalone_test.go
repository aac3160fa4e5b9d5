package sparegrpc_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/spare"
	"github.com/tailcut/hedge/spare/sparegrpc"
)

// waitFor returns once cond holds. It is synchronisation, not a timing
// check: the test's own deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if t.Context().Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// busyServer is a real gRPC server behind a Limiter whose one worker a
// primary holds, with another primary queued behind it: a replica at
// saturation, as the survivor of a replica that died is. Before the
// Limiter, fail (if set) may fail a call with UNAVAILABLE.
type busyServer struct {
	l    *spare.Limiter
	addr string
	srv  *grpc.Server
	cc   *grpc.ClientConn // a plain conn, for the held primaries
	hold chan struct{}
	wg   sync.WaitGroup
}

func newBusyServer(t *testing.T, fail func(ctx context.Context, in string) bool) *busyServer {
	t.Helper()
	l, err := spare.New(spare.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := &busyServer{l: l, hold: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	outer := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		in := string(req.(*testgrpc.SimpleRequest).GetPayload().GetBody())
		if fail != nil && fail(ctx, in) {
			return nil, status.Error(codes.Unavailable, "down for a moment")
		}
		return handler(ctx, req)
	}
	started := make(chan struct{})
	b.srv = grpc.NewServer(orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(outer, sparegrpc.UnaryServerInterceptor(l)))
	testgrpc.RegisterTestServiceServer(b.srv, service{handle: func(ctx context.Context, in string) (string, error) {
		if in == "hold" {
			close(started)
			<-b.hold
		}
		return in, nil
	}})
	go b.srv.Serve(lis)
	b.cc = dial(t, b.addr)
	c := testgrpc.NewTestServiceClient(b.cc)
	b.wg.Add(2)
	go func() { defer b.wg.Done(); call(context.Background(), c, "hold", "") }()
	<-started
	go func() { defer b.wg.Done(); call(context.Background(), c, "queued", "") }()
	waitFor(t, "the queued primary", func() bool { return l.Stats().QueuedPrimaries == 1 })
	return b
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// release lets the held primary go.
func (b *busyServer) release() { close(b.hold) }

// stop waits for both primaries and stops the server.
func (b *busyServer) stop() {
	b.wg.Wait()
	b.cc.Close()
	b.srv.Stop()
}

// queued sums the calls queued at servers, by kind.
func queued(servers ...*busyServer) (primaries, copies int) {
	for _, b := range servers {
		s := b.l.Stats()
		primaries += s.QueuedPrimaries
		copies += s.QueuedCopies
	}
	return primaries, copies
}

// retried reports whether a call carries grpc-previous-rpc-attempts.
func retried(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(hedgegrpc.PreviousAttemptsKey)) > 0
}

// TestGRPCRetryRunsAsPrimary: grpc-go's own retry of a call that failed
// UNAVAILABLE carries grpc-previous-rpc-attempts, but it is the call's
// only copy. At a saturated server it must queue as a primary, not behind
// every primary as a hedge copy, where it would wait as long as
// primaries keep coming.
func TestGRPCRetryRunsAsPrimary(t *testing.T) {
	b := newBusyServer(t, func(ctx context.Context, in string) bool { return in == "x" && !retried(ctx) })
	const retryPolicy = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
			"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	cc := dial(t, b.addr, grpc.WithDefaultServiceConfig(retryPolicy))
	defer cc.Close()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := call(context.Background(), testgrpc.NewTestServiceClient(cc), "x", "")
		done <- result{out, err}
	}()
	waitFor(t, "the retry to queue", func() bool { p, c := queued(b); return p+c == 2 })
	if p, c := queued(b); c != 0 {
		t.Errorf("queued: %d primaries, %d copies: grpc-go's retry queued as a hedge copy, behind every primary", p, c)
	}
	b.release()
	if r := <-done; r.err != nil || r.out != "x" {
		t.Errorf("the call got %q, %v; want \"x\"", r.out, r.err)
	}
	b.stop()
}

// TestCopyAfterUnavailableRunsAsPrimary: hedgegrpc's copy sent at once
// after the only running copy failed UNAVAILABLE is the call's only copy,
// and must queue at a saturated server as a primary.
func TestCopyAfterUnavailableRunsAsPrimary(t *testing.T) {
	var first atomic.Bool
	first.Store(true)
	fail := func(_ context.Context, in string) bool { return in == "x" && first.CompareAndSwap(true, false) }
	a, b := newBusyServer(t, fail), newBusyServer(t, fail)
	h, err := hedge.New(hedge.Config{Replicas: 2, Delay: hedge.Fixed(time.Hour), NoBudget: true, MaxAttempts: 2, PayoffWinRate: -1,
		MaxReplicaLoad: hedge.AnyReplicaLoad, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := dial(t, a.addr), dial(t, b.addr)
	defer ca.Close()
	defer cb.Close()
	ic, err := hedgegrpc.New(h, hedgegrpc.WithReplicas(ca, cb))
	if err != nil {
		t.Fatal(err)
	}
	cc := dial(t, a.addr, grpc.WithUnaryInterceptor(ic.Unary))
	defer cc.Close()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := call(context.Background(), testgrpc.NewTestServiceClient(cc), "x", "")
		done <- result{out, err}
	}()
	waitFor(t, "the second copy to queue", func() bool { p, c := queued(a, b); return p+c == 3 })
	if p, c := queued(a, b); c != 0 {
		t.Errorf("queued: %d primaries, %d copies: the call's only copy queued as a hedge copy, behind every primary", p, c)
	}
	a.release()
	b.release()
	if r := <-done; r.err != nil || r.out != "x" {
		t.Errorf("the call got %q, %v; want \"x\"", r.out, r.err)
	}
	a.stop()
	b.stop()
}
