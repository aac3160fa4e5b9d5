// Package tiedgrpc runs a gRPC server's unary calls through a
// tied.Server: a worker limit, a bounded FIFO queue, and a tied copy
// started only once the sibling's server granted its claim. See
// package tied for the design; this package adds the gRPC wiring, so that
// package tied itself needs no gRPC.
//
// A server installs UnaryServerInterceptor and registers the claim
// service (which answers peers' claims) with Register; its tied.Config.Sender is a Sender, which reaches
// the peers (host:port, as clients name them in the tied-sibling metadata)
// over gRPC:
//
//	sender := tiedgrpc.NewSender(grpc.WithTransportCredentials(creds))
//	ts, err := tied.NewServer(tied.Config{Workers: 8, Secret: secret, Peers: peers, Sender: sender})
//	srv := grpc.NewServer(tiedgrpc.ServerOptions(ts)...)
//	tiedgrpc.Register(srv, ts)
//
// Clients send tied calls with hedgegrpc.WithTied.
//
// Streaming calls are not queued.
//
// # Load reports
//
// Every unary call's answer carries the server's load, as an ORCA per-call
// load report (gRFC A51) in its trailer: the tied.Server's Load, less the
// call answered, with hedgegrpc.RecordLoad (named metrics hedge_running,
// hedge_queued, hedge_workers, hedge_done, and application_utilization
// (running+queued)/workers). A call refused for a full queue, or a tied
// copy dropped for its sibling, reports the load it found; claims report
// nothing. A hedgegrpc.Interceptor with WithReplicas reads the reports
// and passes them to its Hedgers (hedge.Load); gRPC's
// weighted_round_robin balancer reads the utilization.
//
// gRPC sends the report only when the server is built with
// orca.CallMetricsServerOption(nil) and UnaryServerInterceptor runs after
// that option's own: install it with grpc.ChainUnaryInterceptor after the
// option, not with grpc.UnaryInterceptor, which always runs first.
// ServerOptions returns the two in that order. Without the option the
// interceptor works as before and reports nothing.
package tiedgrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tailcut/hedge/internal/wire/orcawire"
	"github.com/tailcut/hedge/tied"
)

// ServiceName names the claim service that Register installs.
const ServiceName = "tailcut.tied.v1.Tied"

// ClaimMethod is the full name of the method of the claim service that
// Sender calls: it takes a peer's signed claim (tied.Claim.Sign) as a
// google.protobuf.StringValue and answers the verdict's name ("go" or
// "lost") the same way, or PermissionDenied for a refused message.
const ClaimMethod = "/" + ServiceName + "/Claim"

// CancelMethod is the earlier name of ClaimMethod, which servers of
// earlier versions call. Register serves it too, as it serves
// ClaimMethod.
//
// Deprecated: use ClaimMethod.
const CancelMethod = "/" + ServiceName + "/Cancel"

// IsClaimMethod reports whether fullMethod (as in
// grpc.UnaryServerInfo.FullMethod) is a method of the claim service:
// ClaimMethod, or its earlier name CancelMethod. An interceptor that must
// tell claims from the application's calls, to count calls say, asks it
// rather than comparing names.
func IsClaimMethod(fullMethod string) bool {
	return fullMethod == ClaimMethod || fullMethod == CancelMethod
}

// UnaryServerInterceptor runs each unary call through s.Admit before the
// handler, with the tie read from the tied.IDKey, tied.SiblingKey and
// tied.RoleKey metadata (malformed: untied, counted in
// tied.Stats.BadTie). A call refused because the queue is full fails with
// ResourceExhausted and a tied.RefusedHeader ("tied-refused") trailer; a
// tied copy dropped for its sibling fails with Aborted and a
// tied.DroppedKey trailer "sibling", a spare copy that found no free
// worker with Aborted and "no-spare" (which clients such as
// hedgegrpc.WithTied tell from the service's own Aborted). Claims (ClaimMethod, CancelMethod) bypass the queue. A tied copy's
// claim is sent from within the interceptor, on the call's goroutine.
// Every answer but a claim's carries s's load as an ORCA report, when the
// server has orca.CallMetricsServerOption before this interceptor (see
// the package doc, "Load reports").
func UnaryServerInterceptor(s *tied.Server) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if IsClaimMethod(info.FullMethod) {
			return handler(ctx, req)
		}
		md, _ := metadata.FromIncomingContext(ctx)
		t, err := tied.ParseTieRole(first(md, tied.IDKey), first(md, tied.SiblingKey), first(md, tied.RoleKey))
		if err != nil {
			s.CountBadTie()
		}
		release, err := s.Admit(ctx, t)
		if err != nil {
			orcawire.RecordLoad(ctx, s.Load())
		}
		switch {
		case errors.Is(err, tied.ErrQueueFull):
			_ = grpc.SetTrailer(ctx, metadata.Pairs("tied-refused", "queue-full"))
			return nil, status.Error(codes.ResourceExhausted, "server busy: its queue is full; retry later or elsewhere")
		case errors.Is(err, tied.ErrNoSpare):
			_ = grpc.SetTrailer(ctx, metadata.Pairs(tied.DroppedKey, tied.DroppedNoSpare))
			return nil, status.Error(codes.Aborted, "no spare capacity: no worker was free for this spare copy; its primary has the call")
		case errors.Is(err, tied.ErrDropped):
			_ = grpc.SetTrailer(ctx, metadata.Pairs(tied.DroppedKey, tied.DroppedSibling))
			return nil, status.Error(codes.Aborted, "dropped: the sibling copy of this tied call started first")
		case err != nil:
			return nil, status.FromContextError(err).Err()
		}
		defer release()
		resp, err := handler(ctx, req)
		ld := s.Load() // while the call holds its worker: of the others
		ld.Running = max(0, ld.Running-1)
		orcawire.RecordLoad(ctx, ld)
		return resp, err
	}
}

// ServerOptions returns the server options that run a server's unary
// calls through s and send its load with every answer (see the package
// doc, "Load reports"): orca.CallMetricsServerOption(nil), then
// UnaryServerInterceptor(s), chained after it. Interceptors of options
// given after these run inside s's queue, on a worker. Register the claim
// service with Register as well.
func ServerOptions(s *tied.Server) []grpc.ServerOption {
	return []grpc.ServerOption{
		orca.CallMetricsServerOption(nil),
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(s)),
	}
}

// first returns md's first value for key, or "".
func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// IsDropped reports whether err, with the trailer of its call, is the
// answer to a tied copy dropped for its sibling: Aborted with a
// tied.DroppedKey trailer.
func IsDropped(err error, trailer metadata.MD) bool {
	return status.Code(err) == codes.Aborted && len(trailer.Get(tied.DroppedKey)) > 0
}

// DroppedError returns the error that a call's err and trailer stand for
// when they are a dropped copy's answer (see IsDropped): tied.ErrNoSpare
// for a spare copy that found no free worker, tied.ErrDropped otherwise;
// nil when they are no such answer.
func DroppedError(err error, trailer metadata.MD) error {
	if !IsDropped(err, trailer) {
		return nil
	}
	if first(trailer, tied.DroppedKey) == tied.DroppedNoSpare {
		return tied.ErrNoSpare
	}
	return tied.ErrDropped
}

// claimServer is the claim service's implementation.
type claimServer interface {
	claim(ctx context.Context, msg *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

type claimImpl struct{ s *tied.Server }

func (c claimImpl) claim(_ context.Context, msg *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	out, err := c.s.ReceiveClaim(msg.GetValue())
	if err != nil {
		return nil, status.Error(codes.PermissionDenied, "claim refused")
	}
	return wrapperspb.String(out.String()), nil
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*claimServer)(nil),
	Methods:     []grpc.MethodDesc{claimMethod("Claim"), claimMethod("Cancel")},
	Metadata:    "tied.proto",
}

// claimMethod describes the method of the claim service named name
// (ClaimMethod, CancelMethod), which answers claims.
func claimMethod(name string) grpc.MethodDesc {
	full := "/" + ServiceName + "/" + name
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			call := func(ctx context.Context, req any) (any, error) {
				return srv.(claimServer).claim(ctx, req.(*wrapperspb.StringValue))
			}
			if ic == nil {
				return call(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, call)
		},
	}
}

// Register installs the claim service of s on reg (a *grpc.Server), so
// that peers' Senders reach it: ClaimMethod, and CancelMethod for the
// peers of earlier versions.
func Register(reg grpc.ServiceRegistrar, s *tied.Server) {
	reg.RegisterService(&serviceDesc, claimImpl{s})
}

// Sender is a tied.Sender that calls peers' ClaimMethod with claims,
// on one ClientConn per peer (a persistent HTTP/2 connection), made on first use and closed by
// CloseIdleConnections (which tied.Server.Close calls). A peer that
// answers ClaimMethod with Unimplemented is a server of an earlier
// version, which serves only CancelMethod: the claim is sent again there,
// and so are the later claims to that peer.
type Sender struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	legacy map[string]bool // peers called at CancelMethod
	closed bool
}

// NewSender returns a Sender that dials peers with opts. Without a
// transport credentials option it uses insecure ones: fine on loopback,
// not across machines, where the claims, though signed, would travel in
// the clear.
func NewSender(opts ...grpc.DialOption) *Sender {
	return &Sender{opts: append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...), conns: map[string]*grpc.ClientConn{}, legacy: map[string]bool{}}
}

// ErrClosed is returned by SendClaim after CloseIdleConnections.
var ErrClosed = errors.New("tiedgrpc: the Sender is closed")

// SendClaim calls ClaimMethod of the peer at addr with msg (CancelMethod,
// for a peer of an earlier version), and returns its answer.
func (s *Sender) SendClaim(ctx context.Context, addr, msg string) (string, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", ErrClosed
	}
	cc := s.conns[addr]
	if cc == nil {
		var err error
		if cc, err = grpc.NewClient(addr, s.opts...); err != nil {
			s.mu.Unlock()
			return "", fmt.Errorf("tiedgrpc: connecting to peer %s: %w", addr, err)
		}
		s.conns[addr] = cc
	}
	method := ClaimMethod
	if s.legacy[addr] {
		method = CancelMethod
	}
	s.mu.Unlock()
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, method, wrapperspb.String(msg), out)
	if method == ClaimMethod && status.Code(err) == codes.Unimplemented {
		s.mu.Lock()
		s.legacy[addr] = true
		s.mu.Unlock()
		err = cc.Invoke(ctx, CancelMethod, wrapperspb.String(msg), out)
	}
	if err != nil {
		return "", fmt.Errorf("tiedgrpc: claim to %s: %w", addr, err)
	}
	return out.GetValue(), nil
}

// CloseIdleConnections closes every connection of the Sender; it sends
// nothing afterwards.
func (s *Sender) CloseIdleConnections() {
	s.mu.Lock()
	conns := s.conns
	s.conns, s.closed = nil, true
	s.mu.Unlock()
	for _, cc := range conns {
		cc.Close()
	}
}
