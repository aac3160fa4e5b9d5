// Package sparegrpc is package spare's gRPC server interceptor: it runs a
// server's calls through a spare.Limiter, hedge copies at low priority.
//
// A call is a copy when its metadata carries hedge-attempt with a value
// of 1 or more (hedgegrpc.AttemptKey), which hedgegrpc.Interceptor sets
// on every hedge copy: a copy sent while another copy of the call runs.
// Any other call is a primary. That includes a failover, a copy sent
// after the only running copy failed, and grpc-go's own retries: each is
// the call's only copy. So grpc-previous-rpc-attempts
// (hedgegrpc.PreviousAttemptsKey), which those carry too, marks no copy
// here. A unary copy is a spare.Copy: if a primary preempts
// it, its handler is called again with the same request and the earlier
// call's result is dropped, so the handler must be safe to call twice for
// a request it may get twice anyway (a hedged one). A stream copy is a
// spare.CopyOnce, since a stream cannot be replayed: it runs only on a
// worker free when it comes, and is otherwise refused with
// ResourceExhausted (spare.ErrNoSpare).
//
// # Load reports
//
// Every call's answer carries the server's load, as an ORCA per-call load
// report (gRFC A51) in its trailer: the Limiter's Load, less the call
// answered, with hedgegrpc.RecordLoad (named metrics hedge_running,
// hedge_queued, hedge_workers, hedge_done, and application_utilization
// (running+queued)/workers). A call refused for a full queue reports the
// load that refused it. A hedgegrpc.Interceptor with WithReplicas reads
// the reports, and its Hedger's hedge decisions then read the load of a
// copy's replica from its fresh report rather than from the client's own
// view (hedge.Load); gRPC's weighted_round_robin balancer reads the
// utilization.
//
// gRPC sends the report only when the server is built with
// orca.CallMetricsServerOption(nil) and the interceptors run after that
// option's own: install them with grpc.ChainUnaryInterceptor and
// grpc.ChainStreamInterceptor, after the option, not with
// grpc.UnaryInterceptor, which always runs first. ServerOptions returns
// the three in that order:
//
//	l, err := spare.New(spare.Config{Workers: 8})
//	srv := grpc.NewServer(sparegrpc.ServerOptions(l)...)
//
// Without the option the interceptors work as before and report nothing.
package sparegrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/wire"
	"github.com/tailcut/hedge/internal/wire/orcawire"
	"github.com/tailcut/hedge/spare"
)

// kindOf returns how a call with ctx's metadata is admitted; replay says
// whether a copy can run again.
func kindOf(ctx context.Context, replay bool) spare.Kind {
	md, _ := metadata.FromIncomingContext(ctx)
	if !wire.IsHedgeCopy(md.Get(wire.AttemptKey)) {
		return spare.Primary
	}
	if replay {
		return spare.Copy
	}
	return spare.CopyOnce
}

// refused is the status of a call refused with spare.ErrQueueFull or
// spare.ErrNoSpare.
func refused(err error) error {
	switch {
	case errors.Is(err, spare.ErrQueueFull):
		return status.Error(codes.ResourceExhausted, "server busy: its queue is full; retry later or elsewhere")
	case errors.Is(err, spare.ErrNoSpare):
		return status.Error(codes.ResourceExhausted, "server busy: no worker to spare for a hedge copy that cannot be preempted; the primary has the call")
	}
	return status.FromContextError(err).Err()
}

// ServerOptions returns the server options that run a server's calls
// through l and send its load with every answer (see the package doc,
// "Load reports"): orca.CallMetricsServerOption(nil), then
// UnaryServerInterceptor(l) and StreamServerInterceptor(l), chained after
// it. Interceptors of options given after these run inside l, on a
// worker.
func ServerOptions(l *spare.Limiter) []grpc.ServerOption {
	return []grpc.ServerOption{
		orca.CallMetricsServerOption(nil),
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(l)),
	}
}

// held is l's load as a call holding a worker reports it: of the others.
func held(l *spare.Limiter) hedge.Load {
	ld := l.Load()
	ld.Running = max(0, ld.Running-1)
	return ld
}

// UnaryServerInterceptor runs unary calls through l (see the package
// documentation). A call refused with spare.ErrQueueFull fails with
// codes.ResourceExhausted. Every answer carries l's load as an ORCA
// report, when the server has orca.CallMetricsServerOption before this
// interceptor (see the package doc, "Load reports").
func UnaryServerInterceptor(l *spare.Limiter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var resp any
		var herr error
		err := l.Run(ctx, kindOf(ctx, true), func(ctx context.Context) error {
			resp, herr = handler(ctx, req)
			orcawire.RecordLoad(ctx, held(l)) // a rerun's overwrites
			return nil
		})
		if err != nil {
			orcawire.RecordLoad(ctx, l.Load())
			return nil, refused(err)
		}
		return resp, herr
	}
}

// StreamServerInterceptor runs streams through l, a copy as a
// spare.CopyOnce, which runs only on a worker free when it comes and is
// otherwise refused (spare.ErrNoSpare) with codes.ResourceExhausted.
// Like UnaryServerInterceptor, it reports l's load when the stream ends.
func StreamServerInterceptor(l *spare.Limiter) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var herr error
		err := l.Run(ss.Context(), kindOf(ss.Context(), false), func(context.Context) error {
			herr = handler(srv, ss)
			orcawire.RecordLoad(ss.Context(), held(l))
			return nil
		})
		if err != nil {
			orcawire.RecordLoad(ss.Context(), l.Load())
			return refused(err)
		}
		return herr
	}
}
