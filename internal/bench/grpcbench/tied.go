package grpcbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/orca"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/spare"
	"github.com/tailcut/hedge/spare/sparegrpc"
	"github.com/tailcut/hedge/tied"
	"github.com/tailcut/hedge/tied/tiedgrpc"
)

// TiedBackend is the gRPC bench.TiedBackend: grpc-go servers on loopback
// behind tiedgrpc's interceptor, whose UnaryCall holds its worker for the
// request's ResponseSize, read as microseconds (returning early if the
// call is cancelled), and waits out the replica's stalls before and
// after. Claims between the servers reach the tiedgrpc claim service,
// not the stalled handler.
type TiedBackend struct {
	addrs    []string
	servers  []*grpc.Server
	tieds    []*tied.Server
	limiters []*spare.Limiter // with bench.TiedBackendOptions.Spare
	gates    []*bench.Gate
	received atomic.Int64
	wg       sync.WaitGroup
	once     sync.Once
	err      error
}

// workService is one replica's TestService for the tied comparison.
type workService struct {
	testgrpc.UnimplementedTestServiceServer
	gate *bench.Gate
}

func (s *workService) UnaryCall(ctx context.Context, in *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.gate.Wait(ctx)
	bench.Work(ctx, s.gate.Scale(time.Duration(in.GetResponseSize())*time.Microsecond))
	s.gate.Wait(ctx)
	return &testgrpc.SimpleResponse{}, nil
}

// StartTied starts the replicas of o on free loopback ports.
func StartTied(o bench.TiedBackendOptions) (bench.TiedBackend, error) {
	b := &TiedBackend{}
	var lns []net.Listener
	for range o.Replicas {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("grpcbench: tied replica: %w", err)
		}
		lns = append(lns, l)
		b.addrs = append(b.addrs, l.Addr().String())
	}
	for i, l := range lns {
		var peers []string
		for j, a := range b.addrs {
			if j != i {
				peers = append(peers, a)
			}
		}
		ts, err := tied.NewServer(tied.Config{Workers: o.TiedWorkers(), MaxQueue: o.MaxQueue, Secret: o.Secret, Peers: peers, Sender: tiedgrpc.NewSender()})
		var lim *spare.Limiter
		if err == nil {
			lim, err = o.NewLimiter()
		}
		if err != nil {
			for _, l := range lns[i:] {
				l.Close()
			}
			_ = b.Close()
			return nil, err
		}
		count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !tiedgrpc.IsClaimMethod(info.FullMethod) { // claims (under either method name) are not requests
				b.received.Add(1)
			}
			return h(ctx, req)
		}
		g := &bench.Gate{}
		chain := []grpc.UnaryServerInterceptor{count}
		if lim != nil {
			b.limiters = append(b.limiters, lim)
			chain = append(chain, sparegrpc.UnaryServerInterceptor(lim))
		}
		chain = append(chain, tiedgrpc.UnaryServerInterceptor(ts))
		// The ORCA recorder lets the servers' load reports reach the
		// clients (tied clients skip spares the reports say cannot help).
		srv := grpc.NewServer(orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(chain...))
		testgrpc.RegisterTestServiceServer(srv, &workService{gate: g})
		tiedgrpc.Register(srv, ts)
		b.tieds = append(b.tieds, ts)
		b.gates = append(b.gates, g)
		b.servers = append(b.servers, srv)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			_ = srv.Serve(l)
		}()
	}
	return b, nil
}

// Name returns "grpc".
func (b *TiedBackend) Name() string { return "grpc" }

// Servers returns the replicas' tied.Servers.
func (b *TiedBackend) Servers() []*tied.Server { return b.tieds }

// Limiters returns the replicas' spare.Limiters, with
// bench.TiedBackendOptions.Spare.
func (b *TiedBackend) Limiters() []*spare.Limiter { return b.limiters }

// Received counts the calls that reached the replicas.
func (b *TiedBackend) Received() int64 { return b.received.Load() }

// Stall stalls replica i for d.
func (b *TiedBackend) Stall(ctx context.Context, i int, d time.Duration) error {
	return b.gates[i].Stall(ctx, d)
}

// NewCaller returns a caller for config "none", bench.DefaultStrategy,
// bench.SpareConfig, "tied" or bench.TiedSymmetricConfig, with one
// ClientConn per replica.
func (b *TiedBackend) NewCaller(config string, gap time.Duration) (func(context.Context, int, time.Duration) error, func(), error) {
	hc, form, err := bench.TiedClientConfig(config, len(b.addrs))
	if err != nil {
		return nil, nil, err
	}
	h, err := hedge.New(hc)
	if err != nil {
		return nil, nil, err
	}
	var conns []*grpc.ClientConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, a := range b.addrs {
		c, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	opts := []hedgegrpc.Option{hedgegrpc.WithReplicas(conns...)}
	if form != nil {
		opts = append(opts, hedgegrpc.WithTied(hedgegrpc.TiedConfig{Gap: gap, Form: *form}))
	}
	ic, err := hedgegrpc.New(h, opts...)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	call := func(ctx context.Context, i int, size time.Duration) error {
		in := &testgrpc.SimpleRequest{ResponseSize: int32(size.Microseconds())}
		return ic.Unary(ctx, Method, in, new(testgrpc.SimpleResponse), conns[0], invoke)
	}
	return call, closeAll, nil
}

// invoke is the grpc.UnaryInvoker of a call on cc.
func invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	return cc.Invoke(ctx, method, req, reply, opts...)
}

// Close stops the servers and their tied.Servers.
func (b *TiedBackend) Close() error {
	b.once.Do(func() {
		for _, g := range b.gates {
			g.Close()
		}
		for _, s := range b.servers {
			s.Stop()
		}
		b.wg.Wait()
		var errs []error
		for _, t := range b.tieds {
			errs = append(errs, t.Close())
		}
		b.err = errors.Join(errs...)
	})
	return b.err
}
