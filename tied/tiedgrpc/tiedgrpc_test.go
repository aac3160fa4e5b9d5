package tiedgrpc_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/tied"
	"github.com/tailcut/hedge/tied/tiedgrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hang bounds the waits of these tests, which synchronise on channels.
const hang = 2 * time.Minute

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
		c.Secret, c.Sender, c.ClaimTimeout = secret, tiedgrpc.NewSender(), hang
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
			if status.Code(err) == codes.Aborted {
				once.Do(func() { close(s.dropped) })
			}
			return resp, err
		}
		g := grpc.NewServer(grpc.ChainUnaryInterceptor(observe, tiedgrpc.UnaryServerInterceptor(ts)))
		g.RegisterService(echoDesc(handle(i)), nil)
		tiedgrpc.Register(g, ts)
		srvs = append(srvs, g)
		go g.Serve(lns[i])
	}
	t.Cleanup(func() {
		for i, g := range srvs {
			g.Stop()
			out[i].ts.Close()
		}
	})
	return out
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Two real gRPC servers with one worker each, A busy: the tied call's
// copy on the idle B claims the tie, which drops the copy queued at A
// without running; the call returns B's answer.
func TestTiedCallEndToEnd(t *testing.T) {
	blockA := make(chan struct{})
	startedA := make(chan struct{})
	var ranTiedOnA atomic.Bool
	var servers []*server
	handle := func(i int) func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		return func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
			switch {
			case in.GetValue() == "busy":
				close(startedA)
				<-blockA
			case i == 0:
				ranTiedOnA.Store(true)
			default:
				select { // answer once A dropped the sibling
				case <-servers[0].dropped:
				case <-time.After(hang):
				}
			}
			return wrapperspb.String(string(rune('A' + i))), nil
		}
	}
	servers = startServers(t, 2, tied.Config{Workers: 1}, handle)
	ccA, ccB := dial(t, servers[0].addr), dial(t, servers[1].addr)

	busy := make(chan error, 1)
	go func() {
		busy <- ccA.Invoke(context.Background(), echoMethod, wrapperspb.String("busy"), new(wrapperspb.StringValue))
	}()
	<-startedA

	h, err := hedge.New(hedge.Config{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	ic, err := hedgegrpc.New(h, hedgegrpc.WithReplicas(ccA, ccB), hedgegrpc.WithTied(hedgegrpc.TiedConfig{Gap: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, servers[0].addr, grpc.WithUnaryInterceptor(ic.Unary))
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	out := new(wrapperspb.StringValue)
	if err := client.Invoke(ctx, echoMethod, wrapperspb.String("work"), out); err != nil {
		t.Fatal(err)
	}
	if out.GetValue() != "B" {
		t.Fatalf("answer %q, want B", out.GetValue())
	}
	close(blockA)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if ranTiedOnA.Load() {
		t.Error("the copy on the busy server ran")
	}
	servers[1].ts.Close()
	if s := servers[0].ts.Stats(); s.Dropped != 1 || s.TiedStarted != 0 {
		t.Errorf("A: %+v, want its copy dropped", s)
	}
	if s := servers[1].ts.Stats(); s.TiedStarted != 1 || s.ClaimsWon != 1 {
		t.Errorf("B: %+v, want 1 tied start, 1 claim won", s)
	}
}

// A full queue answers ResourceExhausted; a forged claim is refused with
// PermissionDenied; a dropped copy is Aborted with the tied-dropped
// trailer.
func TestRefusals(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	servers := startServers(t, 2, tied.Config{Workers: 1, MaxQueue: -1}, func(i int) func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		return func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
			if in.GetValue() == "busy" {
				started <- struct{}{}
				<-block
			}
			return in, nil
		}
	})
	cc := dial(t, servers[0].addr)
	ctx := context.Background()
	busy := make(chan error, 1)
	go func() { busy <- cc.Invoke(ctx, echoMethod, wrapperspb.String("busy"), new(wrapperspb.StringValue)) }()
	<-started
	err := cc.Invoke(ctx, echoMethod, wrapperspb.String("x"), new(wrapperspb.StringValue))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("over the bound: %v, want ResourceExhausted", err)
	}
	close(block)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}

	forged := tied.Claim{ID: tied.NewID(), Sent: time.Now()}.Sign([]byte("not the servers' secret, but 32 bytes long"))
	err = cc.Invoke(ctx, tiedgrpc.CancelMethod, wrapperspb.String(forged), new(wrapperspb.StringValue))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("forged claim: %v, want PermissionDenied", err)
	}

	// An early claim, then the copy: dropped on arrival.
	id := tied.NewID()
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, tiedgrpc.CancelMethod, wrapperspb.String(tied.Claim{ID: id, Ticket: 1, Sent: time.Now()}.Sign(secret)), out); err != nil || out.GetValue() != "go" {
		t.Fatalf("valid claim: %v %q", err, out.GetValue())
	}
	var trailer metadata.MD
	tctx := metadata.AppendToOutgoingContext(ctx, tied.IDKey, id, tied.SiblingKey, servers[1].addr)
	err = cc.Invoke(tctx, echoMethod, wrapperspb.String("copy"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
	if !tiedgrpc.IsDropped(err, trailer) {
		t.Errorf("copy after its sibling's claim: %v %v, want Aborted with %s", err, trailer, tied.DroppedKey)
	}
	s := servers[0].ts.Stats()
	if s.Refused != 1 || s.ClaimsRejected != 1 || s.Dropped != 1 || s.ClaimsEarly != 1 {
		t.Errorf("%+v", s)
	}
}
