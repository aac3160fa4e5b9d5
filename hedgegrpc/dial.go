package hedgegrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/tailcut/hedge"
)

// Conns is the ClientConns that Dial made, one per backend, each with the
// Interceptor installed, so that each copy of a call goes to a different
// backend (see WithReplicas). Make calls on Conn, or on any of Conns.
// Close closes them all.
type Conns struct {
	conns []*grpc.ClientConn
	ic    *Interceptor
}

// Conn returns the conn to make calls on: the first. The Interceptor
// sends each copy of a unary call on the conn of the replica the Hedger
// picks for it, whichever conn the call was made on. Streams are not
// hedged: they go on the conn they are made on.
func (c *Conns) Conn() *grpc.ClientConn { return c.conns[0] }

// Conns returns the conns, conn i to the address i given to Dial (the
// Hedger's replica i).
func (c *Conns) Conns() []*grpc.ClientConn { return append([]*grpc.ClientConn(nil), c.conns...) }

// Interceptor returns the Interceptor installed on the conns: its Hedger
// gives the stats, and SetMode the kill switch.
func (c *Conns) Interceptor() *Interceptor { return c.ic }

// Close closes every conn and returns their errors, joined.
func (c *Conns) Close() error {
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}

// WithDialOptions gives Dial and DialServiceConfig the options of every
// conn they make, such as its transport credentials, which
// grpc.NewClient requires. The Interceptor comes first in the conns'
// chain of unary interceptors: those given with
// grpc.WithChainUnaryInterceptor here run after it, once per copy
// (grpc.WithUnaryInterceptor runs before any chained one). New and
// NewFromServiceConfig, which make no conn, refuse it.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) {
		o.dial = append(o.dial, opts...)
		o.dialSet = true
	}
}

// dialing marks the options of an Interceptor that Dial makes.
func dialing() Option { return func(o *options) { o.dialing = true } }

// Dial makes one ClientConn per address of the service's backends, with
// grpc.NewClient and the options of WithDialOptions, and an Interceptor
// installed on each that hedges every unary method with a Hedger made
// from cfg, each copy of a call on a different backend. It is New with
// WithReplicas, wired: cfg.Replicas is set to len(addrs) (if cfg sets it,
// it must match). Every mistake, in addrs, cfg and opts, is reported at
// once.
//
// addrs are gRPC targets ("10.0.0.1:50051", "dns:///replica-a:50051"), at
// least two, no two alike; each must reach one backend, or copies may
// meet on one. Pass the backends' own addresses, not the service's
// balanced name. grpc.NewClient does not connect until the first call.
func Dial(addrs []string, cfg hedge.Config, opts ...Option) (*Conns, error) {
	err := setReplicas(&cfg, len(addrs))
	return dial(addrs, opts, err, func(opts []Option) (*Interceptor, error) {
		h, err := hedge.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("hedgegrpc: Config: %w", err)
		}
		return New(h, opts...)
	})
}

// DialServiceConfig is Dial with the methods' policies from gRPC's
// service config, as NewFromServiceConfig reads them: base.Replicas is
// set to len(addrs) (if base sets it, it must match).
func DialServiceConfig(addrs []string, sc *ServiceConfig, base hedge.Config, opts ...Option) (*Conns, error) {
	err := setReplicas(&base, len(addrs))
	return dial(addrs, opts, err, func(opts []Option) (*Interceptor, error) {
		return NewFromServiceConfig(sc, base, opts...)
	})
}

// setReplicas sets cfg.Replicas to n, the number of addresses, unless it
// is set to another number.
func setReplicas(cfg *hedge.Config, n int) error {
	switch {
	case cfg.Replicas == 0:
		cfg.Replicas = n
	case cfg.Replicas != n:
		return fmt.Errorf("hedgegrpc: Config.Replicas = %d but Dial has %d addresses: leave Replicas at 0 and it is set for you", cfg.Replicas, n)
	}
	return nil
}

// dial checks addrs and opts, dials a conn per address and makes the
// Interceptor with build, given opts with the conns; err is a mistake
// found before.
func dial(addrs []string, opts []Option, err error, build func([]Option) (*Interceptor, error)) (*Conns, error) {
	opts = append(opts[:len(opts):len(opts)], dialing())
	o, oerr := collect(opts)
	errs := []error{err, oerr}
	if o.conns != nil {
		errs = append(errs, errors.New("hedgegrpc: WithReplicas given to Dial, which makes the conns: leave it out, or use New to bring conns of your own"))
	}
	if len(addrs) < 2 {
		errs = append(errs, fmt.Errorf("hedgegrpc: Dial has %d addresses: give the address of each backend, at least two, so that a copy can go to another", len(addrs)))
	}
	seen := make(map[string]bool, len(addrs))
	for i, a := range addrs {
		switch {
		case a == "":
			errs = append(errs, fmt.Errorf("hedgegrpc: Dial: address %d is empty", i))
		case seen[a]:
			errs = append(errs, fmt.Errorf("hedgegrpc: Dial: address %q is given twice: give each backend once, so that copies go to different ones", a))
		}
		seen[a] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// The conns need the Interceptor when they are made, and the
	// Interceptor the conns: they call it through c, set before Dial
	// returns, so before any call.
	c := &Conns{}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		return c.ic.Unary(ctx, method, req, reply, cc, invoker, callOpts...)
	}
	dialOpts := append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(unary)}, o.dial...)
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, dialOpts...)
		if err != nil {
			err = fmt.Errorf("hedgegrpc: Dial %q: %w (give dial options, such as transport credentials, with WithDialOptions)", a, err)
			return nil, errors.Join(err, c.Close())
		}
		c.conns = append(c.conns, cc)
	}
	ic, err := build(append(opts, WithReplicas(c.conns...)))
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	c.ic = ic
	return c, nil
}
