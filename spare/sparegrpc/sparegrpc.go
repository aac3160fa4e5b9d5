// Package sparegrpc is package spare's gRPC server interceptor: it runs a
// server's calls through a spare.Limiter, hedge copies at low priority.
//
// A call is a copy when its metadata carries grpc-previous-rpc-attempts
// with a value of 1 or more (hedgegrpc.PreviousAttemptsKey), which
// hedgegrpc.Interceptor sets on every copy after the first, as grpc-go's
// own hedging does. A unary copy is a spare.Copy: if a primary preempts
// it, its handler is called again with the same request and the earlier
// call's result is dropped, so the handler must be safe to call twice for
// a request it may get twice anyway (a hedged one). Streams are
// spare.CopyOnce: a stream cannot be replayed.
package sparegrpc

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/spare"
)

// kindOf returns how a call with ctx's metadata is admitted; replay says
// whether a copy can run again.
func kindOf(ctx context.Context, replay bool) spare.Kind {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(hedgegrpc.PreviousAttemptsKey)
	if len(v) == 0 {
		return spare.Primary
	}
	if n, err := strconv.Atoi(v[0]); err != nil || n < 1 {
		return spare.Primary
	}
	if replay {
		return spare.Copy
	}
	return spare.CopyOnce
}

// refused is the status of a call refused with spare.ErrQueueFull.
func refused(err error) error {
	if errors.Is(err, spare.ErrQueueFull) {
		return status.Error(codes.ResourceExhausted, "server busy: its queue is full; retry later or elsewhere")
	}
	return status.FromContextError(err).Err()
}

// UnaryServerInterceptor runs unary calls through l (see the package
// documentation). A call refused with spare.ErrQueueFull fails with
// codes.ResourceExhausted.
func UnaryServerInterceptor(l *spare.Limiter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var resp any
		var herr error
		err := l.Run(ctx, kindOf(ctx, true), func(ctx context.Context) error {
			resp, herr = handler(ctx, req)
			return nil
		})
		if err != nil {
			return nil, refused(err)
		}
		return resp, herr
	}
}

// StreamServerInterceptor runs streams through l, a copy as a
// spare.CopyOnce.
func StreamServerInterceptor(l *spare.Limiter) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var herr error
		err := l.Run(ss.Context(), kindOf(ss.Context(), false), func(context.Context) error {
			herr = handler(srv, ss)
			return nil
		})
		if err != nil {
			return refused(err)
		}
		return herr
	}
}
