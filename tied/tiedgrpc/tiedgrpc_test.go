package tiedgrpc_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/tied"
	"github.com/tailcut/hedge/tied/tiedgrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hang bounds every wait of these tests and every call they make
// (bounded): they synchronise on channels, and the bound only turns a
// bug, such as a claim never answered, into a failure instead of a hang.
// A test takes milliseconds, so the bound is generous on the busiest
// machine.
const hang = 10 * time.Second

// claimTimeout is the ClaimTimeout of these tests' servers: longer than
// hang, so that a claim never answered shows as a wait of the test
// running out, not as a copy started after its claim failed.
const claimTimeout = time.Minute

// Once a wait ran out (hung), the package's tests have failed; the later
// waits and calls give up after hungAfter instead of hang, so that a bug
// that hangs every test fails the suite in seconds, not at the test
// binary's timeout.
const hungAfter = time.Second

var hung atomic.Bool

// limit returns the bound of a wait or call that starts now: hang, or
// hungAfter once a wait ran out.
func limit() time.Duration {
	if hung.Load() {
		return hungAfter
	}
	return hang
}

// ranOut records that a wait ran out after d, and says so.
func ranOut(d time.Duration) string {
	hung.Store(true)
	return fmt.Sprintf("nothing in %v: a claim or call that never ends? (later waits give up after %v)", d, hungAfter)
}

// bounded returns a context for a test's calls that ends limit() after
// the call, or when the test ends, so that a call a failed test left
// behind does not outlive it.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), limit())
	t.Cleanup(cancel)
	return ctx
}

// await waits for a value on ch, at most limit(), and returns it.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	d := limit()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("waiting for the %s: %s", what, ranOut(d))
	}
	panic("unreachable")
}

// within runs stop, which closes what (a test's servers), and waits for
// it at most limit(): a server that never stops (a claim that
// deadlocked) fails the test instead of hanging it, and is left behind.
func within(t *testing.T, what string, stop func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop()
	}()
	d := limit()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("closing %s: %s", what, ranOut(d))
	}
}

var secret = []byte("a secret the test servers share, 32 bytes or more")

const echoMethod = "/test.Echo/Echo"

// echo is the test service: handle decides per call.
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

// server is one gRPC server of a test service.
type server struct {
	ts      *tied.Server
	addr    string
	dropped chan struct{} // closed when it first answers a copy "dropped"

	mu      sync.Mutex
	methods []string // the full method of every call it answered, in order
}

// answered returns the full methods of the calls s answered.
func (s *server) answered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.methods)
}

// startServers starts n gRPC servers behind tiedgrpc's interceptor with
// cfg (Secret, Peers, Sender filled in) and handle(i).
func startServers(t *testing.T, n int, cfg tied.Config, handle func(i int) func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) []*server {
	t.Helper()
	lns := make([]net.Listener, n)
	out := make([]*server, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		out[i] = &server{addr: ln.Addr().String(), dropped: make(chan struct{})}
	}
	var srvs []*grpc.Server
	for i, s := range out {
		c := cfg
		c.Secret, c.Sender, c.ClaimTimeout = secret, tiedgrpc.NewSender(), claimTimeout
		c.Peers = nil
		for j, o := range out {
			if j != i {
				c.Peers = append(c.Peers, o.addr)
			}
		}
		ts, err := tied.NewServer(c)
		if err != nil {
			t.Fatal(err)
		}
		s.ts = ts
		var once sync.Once
		observe := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			s.mu.Lock()
			s.methods = append(s.methods, info.FullMethod)
			s.mu.Unlock()
			if status.Code(err) == codes.Aborted {
				once.Do(func() { close(s.dropped) })
			}
			return resp, err
		}
		g := grpc.NewServer(append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(observe)}, tiedgrpc.ServerOptions(ts)...)...)
		g.RegisterService(echoDesc(handle(i)), nil)
		tiedgrpc.Register(g, ts)
		srvs = append(srvs, g)
		go g.Serve(lns[i])
	}
	t.Cleanup(func() {
		within(t, "the test's servers", func() {
			for i, g := range srvs {
				g.Stop()
				out[i].ts.Close()
			}
		})
	})
	return out
}

// dial returns a connection to addr. A call on it that runs out of time
// (bounded) counts as a wait that ran out.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	timedOut := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoke(ctx, method, req, reply, cc, opts...)
		if status.Code(err) == codes.DeadlineExceeded {
			hung.Store(true)
		}
		return err
	}
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithChainUnaryInterceptor(timedOut)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Two real gRPC servers with one worker each, A busy: the tied call's
// copy on the idle B claims the tie, which drops the copy queued at A
// without running (in the spare form, unless B has the primary, which
// runs, and A refuses the spare); the call returns B's answer.
func TestTiedCallEndToEnd(t *testing.T) {
	for _, form := range []tied.Form{tied.FormSymmetric, tied.FormSpare} {
		t.Run(form.String(), func(t *testing.T) { testTiedCallEndToEnd(t, form) })
	}
}

func testTiedCallEndToEnd(t *testing.T, form tied.Form) {
	blockA := make(chan struct{})
	startedA := make(chan struct{})
	var ranTiedOnA atomic.Bool
	var servers []*server
	handle := func(i int) func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		return func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
			switch {
			case in.GetValue() == "busy":
				close(startedA)
				select {
				case <-blockA:
				case <-ctx.Done():
				}
			case i == 0:
				ranTiedOnA.Store(true)
			default:
				select { // answer once A dropped the sibling
				case <-servers[0].dropped:
				case <-ctx.Done():
				}
			}
			return wrapperspb.String(string(rune('A' + i))), nil
		}
	}
	servers = startServers(t, 2, tied.Config{Workers: 1}, handle)
	ccA, ccB := dial(t, servers[0].addr), dial(t, servers[1].addr)

	ctx := bounded(t)
	busy := make(chan error, 1)
	go func() {
		busy <- ccA.Invoke(ctx, echoMethod, wrapperspb.String("busy"), new(wrapperspb.StringValue))
	}()
	await(t, startedA, "start of the busy call")

	h, err := hedge.New(hedge.Config{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	ic, err := hedgegrpc.New(h, hedgegrpc.WithReplicas(ccA, ccB), hedgegrpc.WithTied(hedgegrpc.TiedConfig{Gap: time.Millisecond, Form: form}))
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, servers[0].addr, grpc.WithUnaryInterceptor(ic.Unary))
	out := new(wrapperspb.StringValue)
	if err := client.Invoke(ctx, echoMethod, wrapperspb.String("work"), out); err != nil {
		t.Fatal(err)
	}
	if out.GetValue() != "B" {
		t.Fatalf("answer %q, want B", out.GetValue())
	}
	close(blockA)
	if err := await(t, busy, "answer to the busy call"); err != nil {
		t.Fatal(err)
	}
	if ranTiedOnA.Load() {
		t.Error("the copy on the busy server ran")
	}
	servers[1].ts.Close()
	sa := servers[0].ts.Stats()
	if sa.Dropped+sa.NoSpare != 1 || sa.TiedStarted != 0 || form == tied.FormSymmetric && sa.NoSpare != 0 {
		t.Errorf("A: %+v, want its copy dropped (or, spare form, refused)", sa)
	}
	if s := servers[1].ts.Stats(); s.TiedStarted != 1 || s.ClaimsWon != 1-sa.NoSpare {
		t.Errorf("B: %+v, want 1 tied start, %d claim won", s, 1-sa.NoSpare)
	}
}

// blocking returns the handlers of a test service that answers each call
// its input, except that a call "busy" first signals on started and
// waits for block.
func blocking(started chan<- struct{}, block <-chan struct{}) func(int) func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return func(int) func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		return func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
			if in.GetValue() == "busy" {
				started <- struct{}{}
				select {
				case <-block:
				case <-ctx.Done():
				}
			}
			return in, nil
		}
	}
}

// occupy makes a call "busy" on cc, which blocking's service holds until
// block is closed, and returns once it has started; the call's error
// comes on the channel returned.
func occupy(t *testing.T, cc *grpc.ClientConn, started <-chan struct{}) <-chan error {
	t.Helper()
	ctx := bounded(t)
	busy := make(chan error, 1)
	go func() {
		busy <- cc.Invoke(ctx, echoMethod, wrapperspb.String("busy"), new(wrapperspb.StringValue))
	}()
	await(t, started, "start of the busy call")
	return busy
}

// A full queue answers ResourceExhausted; a forged claim is refused with
// PermissionDenied; a dropped copy is Aborted with the tied-dropped
// trailer.
func TestRefusals(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	servers := startServers(t, 2, tied.Config{Workers: 1, MaxQueue: -1}, blocking(started, block))
	cc := dial(t, servers[0].addr)
	ctx := bounded(t)
	busy := occupy(t, cc, started)
	var refusal metadata.MD
	err := cc.Invoke(ctx, echoMethod, wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Trailer(&refusal))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("over the bound: %v, want ResourceExhausted", err)
	}
	if got, _ := reported(t, refusal); got != (hedge.Load{Running: 1, Workers: 1}) {
		t.Errorf("the refusal reported %+v, want the one worker busy", got)
	}
	close(block)
	if err := await(t, busy, "answer to the busy call"); err != nil {
		t.Fatal(err)
	}

	forged := tied.Claim{ID: tied.NewID(), Sent: time.Now()}.Sign([]byte("not the servers' secret, but 32 bytes long"))
	err = cc.Invoke(ctx, tiedgrpc.ClaimMethod, wrapperspb.String(forged), new(wrapperspb.StringValue))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("forged claim: %v, want PermissionDenied", err)
	}

	// An early claim, then the copy: dropped on arrival.
	id := tied.NewID()
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, tiedgrpc.ClaimMethod, wrapperspb.String(tied.Claim{ID: id, Ticket: 1, Sent: time.Now()}.Sign(secret)), out); err != nil || out.GetValue() != "go" {
		t.Fatalf("valid claim: %v %q", err, out.GetValue())
	}
	var trailer metadata.MD
	tctx := metadata.AppendToOutgoingContext(ctx, tied.IDKey, id, tied.SiblingKey, servers[1].addr)
	err = cc.Invoke(tctx, echoMethod, wrapperspb.String("copy"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
	if !tiedgrpc.IsDropped(err, trailer) {
		t.Errorf("copy after its sibling's claim: %v %v, want Aborted with %s", err, trailer, tied.DroppedKey)
	}
	if got, _ := reported(t, trailer); got != (hedge.Load{Workers: 1, Done: 1}) {
		t.Errorf("the dropped copy reported %+v, want idle, 1 done", got)
	}
	s := servers[0].ts.Stats()
	if s.Refused != 1 || s.ClaimsRejected != 1 || s.Dropped != 1 || s.ClaimsEarly != 1 {
		t.Errorf("%+v", s)
	}
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

// Every answer but a claim's reports the server's load, less the call
// answered.
func TestLoadReports(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	servers := startServers(t, 1, tied.Config{Workers: 2}, blocking(started, block))
	cc := dial(t, servers[0].addr)
	ctx := bounded(t)
	busy := occupy(t, cc, started)
	var trailer metadata.MD
	if err := cc.Invoke(ctx, echoMethod, wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Trailer(&trailer)); err != nil {
		t.Fatal(err)
	}
	if got, u := reported(t, trailer); got != (hedge.Load{Running: 1, Workers: 2}) || u != 0.5 {
		t.Errorf("beside a busy call: %+v, utilization %v; want 1 of 2 running, 0.5", got, u)
	}
	close(block)
	if err := await(t, busy, "answer to the busy call"); err != nil {
		t.Fatal(err)
	}
	trailer = nil
	msg := tied.Claim{ID: tied.NewID(), Ticket: 1, Sent: time.Now()}.Sign(secret)
	if err := cc.Invoke(ctx, tiedgrpc.ClaimMethod, wrapperspb.String(msg), new(wrapperspb.StringValue), grpc.Trailer(&trailer)); err != nil {
		t.Fatal(err)
	}
	if vs := trailer.Get(hedgegrpc.LoadReportKey); len(vs) != 0 {
		t.Errorf("a claim's answer carries a load report")
	}
}

// Register serves claims under ClaimMethod and under its earlier name
// CancelMethod, which the peers of earlier versions call; under either
// name a claim bypasses the queue: it is answered while the one worker is
// busy and there is no queue.
func TestClaimMethods(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	servers := startServers(t, 1, tied.Config{Workers: 1, MaxQueue: -1}, blocking(started, block))
	cc := dial(t, servers[0].addr)
	busy := occupy(t, cc, started)
	for _, m := range []string{tiedgrpc.ClaimMethod, tiedgrpc.CancelMethod} {
		msg := tied.Claim{ID: tied.NewID(), Ticket: 1, Sent: time.Now()}.Sign(secret)
		out := new(wrapperspb.StringValue)
		if err := cc.Invoke(bounded(t), m, wrapperspb.String(msg), out); err != nil || out.GetValue() != tied.VerdictGo.String() {
			t.Errorf("claim by %s: %q, %v; want go", m, out.GetValue(), err)
		}
	}
	close(block)
	if err := await(t, busy, "answer to the busy call"); err != nil {
		t.Fatal(err)
	}
	if s := servers[0].ts.Stats(); s.ClaimsReceived != 2 || s.ClaimsEarly != 2 || s.Refused != 0 {
		t.Errorf("%+v, want 2 claims received, none refused for the queue", s)
	}
}

// Sender calls ClaimMethod on the peer.
func TestSenderCallsClaimMethod(t *testing.T) {
	servers := startServers(t, 1, tied.Config{Workers: 1}, blocking(nil, nil))
	sender := tiedgrpc.NewSender()
	defer sender.CloseIdleConnections()
	msg := tied.Claim{ID: tied.NewID(), Ticket: 1, Sent: time.Now()}.Sign(secret)
	ctx := bounded(t)
	if answer, err := sender.SendClaim(ctx, servers[0].addr, msg); err != nil || answer != tied.VerdictGo.String() {
		t.Fatalf("SendClaim: %q, %v; want go", answer, err)
	}
	if got := servers[0].answered(); !slices.Equal(got, []string{tiedgrpc.ClaimMethod}) {
		t.Errorf("the peer answered %q, want one call of %s", got, tiedgrpc.ClaimMethod)
	}
}

// IsClaimMethod knows both names of the claim method, and no other
// method of the service or of the application.
func TestIsClaimMethod(t *testing.T) {
	for _, c := range []struct {
		method string
		want   bool
	}{
		{tiedgrpc.ClaimMethod, true},
		{tiedgrpc.CancelMethod, true},
		{"/tailcut.tied.v1.Tied/Claim", true},
		{"/tailcut.tied.v1.Tied/Cancel", true},
		{"/tailcut.tied.v1.Tied/Other", false},
		{echoMethod, false},
		{"", false},
	} {
		if got := tiedgrpc.IsClaimMethod(c.method); got != c.want {
			t.Errorf("IsClaimMethod(%q) = %v, want %v", c.method, got, c.want)
		}
	}
}

// A peer of an earlier version serves the claim service under
// CancelMethod only: Sender's claim to it at ClaimMethod is answered
// Unimplemented, so it is sent again at CancelMethod, and so is the next
// claim to that peer, at once.
func TestSenderFallsBackToCancelMethod(t *testing.T) {
	ts, err := tied.NewServer(tied.Config{Workers: 1, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var methods []string
	observe := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		methods = append(methods, info.FullMethod)
		mu.Unlock()
		return h(ctx, req)
	}
	old := grpc.NewServer(grpc.UnaryInterceptor(observe))
	old.RegisterService(&grpc.ServiceDesc{
		ServiceName: tiedgrpc.ServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Cancel",
			Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				call := func(ctx context.Context, req any) (any, error) {
					v, err := ts.ReceiveClaim(req.(*wrapperspb.StringValue).GetValue())
					if err != nil {
						return nil, status.Error(codes.PermissionDenied, "claim refused")
					}
					return wrapperspb.String(v.String()), nil
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: tiedgrpc.CancelMethod}, call)
			},
		}},
	}, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go old.Serve(ln)
	defer within(t, "the server", func() {
		old.Stop()
		ts.Close()
	})

	sender := tiedgrpc.NewSender()
	defer sender.CloseIdleConnections()
	ctx := bounded(t)
	for i := range 2 {
		msg := tied.Claim{ID: tied.NewID(), Ticket: 1, Sent: time.Now()}.Sign(secret)
		if answer, err := sender.SendClaim(ctx, ln.Addr().String(), msg); err != nil || answer != tied.VerdictGo.String() {
			t.Fatalf("claim %d: %q, %v; want go", i, answer, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{tiedgrpc.CancelMethod, tiedgrpc.CancelMethod}; !slices.Equal(methods, want) {
		t.Errorf("the peer answered %q, want %q", methods, want)
	}
	if s := ts.Stats(); s.ClaimsReceived != 2 {
		t.Errorf("%+v, want 2 claims received", s)
	}
}
