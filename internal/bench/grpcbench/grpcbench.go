// Package grpcbench is the gRPC backend of hedge bench: in-process grpc-go
// servers, each on its own loopback port, serving grpc.testing.TestService
// (from google.golang.org/grpc/interop/grpc_testing, so no protoc is
// needed), stalled with a bench.Gate that blocks every UnaryCall of the
// replica, and read through a hedgegrpc.Interceptor with one ClientConn
// per replica.
//
// It is its own package so that the core of package bench, which the peer
// comparison module imports, does not pull in grpc-go.
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/internal/bench"
)

// Method is the full name of the method the workload calls.
const Method = "/grpc.testing.TestService/UnaryCall"

// Options configures Start.
type Options struct {
	// Replicas is the number of servers. Zero means 3.
	Replicas int
}

// Backend is a set of running in-process gRPC servers.
type Backend struct {
	addrs   []string
	servers []*grpc.Server
	gates   []*bench.Gate
	served  []atomic.Int64
	wg      sync.WaitGroup
	once    sync.Once
}

// service is one replica's TestService: UnaryCall answers with
// bench.ValueSize bytes once no stall is on.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	gate   *bench.Gate
	served *atomic.Int64
	value  []byte
}

func (s *service) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.served.Add(1)
	s.gate.Wait(ctx)
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: s.value}}, nil
}

// Start starts the servers on free loopback ports.
func Start(o Options) (*Backend, error) {
	n := o.Replicas
	if n == 0 {
		n = 3
	}
	if n < 2 || n > 64 {
		return nil, fmt.Errorf("grpcbench: %d replicas: use 2 to 64", n)
	}
	b := &Backend{served: make([]atomic.Int64, n)}
	value := make([]byte, bench.ValueSize)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("grpcbench: replica %d: %w", i, err)
		}
		g := &bench.Gate{}
		s := grpc.NewServer(grpc.WaitForHandlers(true))
		testgrpc.RegisterTestServiceServer(s, &service{gate: g, served: &b.served[i], value: value})
		b.gates = append(b.gates, g)
		b.servers = append(b.servers, s)
		b.addrs = append(b.addrs, l.Addr().String())
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			_ = s.Serve(l)
		}()
	}
	return b, nil
}

// Name returns "grpc".
func (b *Backend) Name() string { return "grpc" }

// Replicas returns the number of servers.
func (b *Backend) Replicas() int { return len(b.addrs) }

// Addrs returns the servers' addresses.
func (b *Backend) Addrs() []string { return append([]string(nil), b.addrs...) }

// Served returns how many calls each server has received.
func (b *Backend) Served() []int64 {
	out := make([]int64, len(b.served))
	for i := range b.served {
		out[i] = b.served[i].Load()
	}
	return out
}

// Stall blocks every UnaryCall of server i for d.
func (b *Backend) Stall(ctx context.Context, i int, d time.Duration) error {
	return b.gates[i].Stall(ctx, d)
}

// Close ends stalls and stops the servers, waiting for their handlers.
func (b *Backend) Close() error {
	b.once.Do(func() {
		for _, g := range b.gates {
			g.Close()
		}
		for _, s := range b.servers {
			s.Stop()
		}
		b.wg.Wait()
	})
	return nil
}

// NewClient returns a client that calls UnaryCall through a
// hedgegrpc.Interceptor over one ClientConn per server, hedging as cfg
// says; UNAVAILABLE is the one status that sends the next copy at once.
func (b *Backend) NewClient(cfg hedge.Config) (bench.Client, error) {
	if cfg.Retryable == nil {
		cfg.Retryable = hedgegrpc.NonFatal(codes.Unavailable)
	}
	h, err := hedge.New(cfg)
	if err != nil {
		return nil, err
	}
	var ic *hedgegrpc.Interceptor // set before the first call
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return ic.Unary(ctx, method, req, reply, cc, invoker, opts...)
	}
	conns := make([]*grpc.ClientConn, len(b.addrs))
	closeAll := func() error {
		var errs []error
		for _, c := range conns {
			if c != nil {
				errs = append(errs, c.Close())
			}
		}
		return errors.Join(errs...)
	}
	for i, addr := range b.addrs {
		conns[i], err = grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUnaryInterceptor(unary))
		if err != nil {
			_ = closeAll()
			return nil, err
		}
	}
	if ic, err = hedgegrpc.New(h, hedgegrpc.WithReplicas(conns...)); err != nil {
		_ = closeAll()
		return nil, err
	}
	client := testgrpc.NewTestServiceClient(conns[0])
	req := &testgrpc.SimpleRequest{}
	return bench.ClientFuncs{
		DoFunc: func(ctx context.Context, _ int) error {
			_, err := client.UnaryCall(ctx, req)
			return err
		},
		StatsFunc: func() bench.ClientStats {
			return bench.HedgerStats(h.OpStats(Method))
		},
		CloseFunc: closeAll,
	}, nil
}

// NewLeafReader calls the method once on one replica, over a plain
// connection per replica, for the fan-out call (bench.LeafReader), which
// hedges the leaves itself. The workload's calls read no key.
func (b *Backend) NewLeafReader() (func(ctx context.Context, r, k int) error, func(), error) {
	return LeafReader(b.addrs)
}

// LeafReader calls the TestService's UnaryCall once on addrs[r], over a
// plain connection per address, for a fan-out call that hedges the
// leaves itself. The calls read no key. The returned func closes the
// connections.
func LeafReader(addrs []string) (func(ctx context.Context, r, k int) error, func(), error) {
	conns := make([]*grpc.ClientConn, len(addrs))
	clients := make([]testgrpc.TestServiceClient, len(addrs))
	release := func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}
	for i, addr := range addrs {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			release()
			return nil, nil, err
		}
		conns[i], clients[i] = c, testgrpc.NewTestServiceClient(c)
	}
	req := &testgrpc.SimpleRequest{}
	read := func(ctx context.Context, r, _ int) error {
		_, err := clients[r].UnaryCall(ctx, req)
		return err
	}
	return read, release, nil
}
