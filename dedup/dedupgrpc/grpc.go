// Package dedupgrpc is the gRPC half of package dedup: a unary server
// interceptor that runs a call carrying an idempotency key once, and
// replays its reply to every later copy of the call.
//
// The key is the metadata entry "idempotency-key" (MetadataKey), checked
// as dedup.ParseKey checks the HTTP header. The call's fingerprint is the
// SHA-256 of the full method name and the deterministically marshalled
// request message. The key lives in the namespace Config.Scope gives it,
// by default (DefaultScope) a hash of the credentials the call carries,
// so that two users who send the same key never share a reply. The
// outcome stored is the marshalled reply message (up
// to Config.MaxStoredReply bytes), or the status (code, message and
// details) of an error the handler returned that Config.Keep keeps. By
// default no error is kept: an error says the call did not do its work
// (it was refused as Unauthenticated, PermissionDenied or
// ResourceExhausted, its input was wrong, it failed), so the claim is
// released and a retry, with fresh credentials or after the back-off the
// error's details asked for, runs the handler again rather than getting
// the refusal back for the TTL. A replay is marked in the response header
// metadata with "idempotent-replayed: true" (ReplayedKey).
//
// A replayed reply is unmarshalled into a new message of the method's
// output type: the type of a reply this process has seen for the method,
// or else the one the global protobuf registry gives for the method's
// descriptor (generated code registers it). Requests and replies must be
// proto.Message values (the default codec).
//
// Refusals, each a status with a message that says what to do:
//
//   - InvalidArgument: a malformed key (empty, too long, not printable
//     ASCII), or two different keys in the metadata;
//   - FailedPrecondition: the key was first used with a different request;
//   - Unavailable: the store failed; the interceptor fails closed and never
//     runs a call it could not claim;
//   - Aborted: another copy still holds the claim and this call's context
//     ended first, or at once with dedup.RefuseInProgress;
//   - InvalidArgument too, with Config.RequireKey, for a call without a
//     key;
//   - AlreadyExists: the call ran, but its reply was too large to store,
//     so it cannot be replayed.
//
// A handler that panics releases its claim, and the panic goes on. The
// lease, the waiting and the stores are package dedup's.
package dedupgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tailcut/hedge/dedup"
)

// Metadata keys.
const (
	// MetadataKey is the request metadata entry that carries the key.
	MetadataKey = "idempotency-key"
	// ReplayedKey is the response header entry set to "true" on a replay.
	ReplayedKey = "idempotent-replayed"
)

// cleanupTimeout bounds store calls made after the call's context ended.
const cleanupTimeout = 5 * time.Second

// Config configures New. The zero value deduplicates with an in-memory
// store and the defaults.
type Config struct {
	// Store keeps claims and outcomes. Nil means a new dedup.MemoryStore.
	Store dedup.Store
	// Options sets the lease, the TTL and the polling pause; see
	// dedup.Options.
	dedup.Options
	// MaxKeyLen bounds the key. Zero means dedup.DefaultMaxKeyLen.
	MaxKeyLen int
	// MaxStoredReply bounds a stored reply. Zero means
	// dedup.DefaultMaxStoredBody.
	MaxStoredReply int
	// Scope returns the namespace of a call's key, such as the
	// authenticated account, so that two clients picking the same key do
	// not share an outcome. Nil means DefaultScope: a hash of the
	// credentials the call carries. A Scope that returns a constant makes
	// one namespace for all.
	Scope func(ctx context.Context) string
	// RequireKey refuses a call without an idempotency key with
	// InvalidArgument. It applies to every call through the interceptor:
	// install it on the servers (or chains) of the methods that write.
	// False lets calls without a key pass through untouched.
	RequireKey bool
	// Keep reports whether an error status the handler returned is stored
	// and replayed, details included. Nil keeps none (see the package
	// doc). Never keep Unauthenticated, PermissionDenied,
	// ResourceExhausted or DeadlineExceeded, which a retry is meant to
	// get past.
	Keep func(codes.Code) bool
}

// Interceptor deduplicates keyed unary calls. Make one with New; it is
// safe for concurrent use.
type Interceptor struct {
	c      *dedup.Coordinator
	maxKey int
	max    int
	scope  func(context.Context) string
	keep   func(codes.Code) bool
	req    bool
	types  sync.Map // full method -> protoreflect.MessageType
}

// New returns an Interceptor. The error says what is wrong with cfg.
func New(cfg Config) (*Interceptor, error) {
	store := cfg.Store
	if store == nil {
		store = dedup.NewMemoryStore(dedup.MemoryOptions{})
	}
	if cfg.MaxKeyLen < 0 || cfg.MaxStoredReply < 0 {
		return nil, errors.New("dedupgrpc: MaxKeyLen and MaxStoredReply must not be negative; zero means the default")
	}
	c, err := dedup.NewCoordinator(store, cfg.Options)
	if err != nil {
		return nil, err
	}
	i := &Interceptor{c: c, maxKey: cfg.MaxKeyLen, max: cfg.MaxStoredReply, scope: cfg.Scope, keep: cfg.Keep, req: cfg.RequireKey}
	if i.max == 0 {
		i.max = dedup.DefaultMaxStoredBody
	}
	if i.keep == nil {
		i.keep = defaultKeep
	}
	if i.scope == nil {
		i.scope = DefaultScope
	}
	return i, nil
}

// DefaultScope is the default of Config.Scope: dedup.CredentialScope of
// the call's "authorization" and "cookie" metadata and the client's TLS
// certificate, if any (the store sees a hash, never the credentials), so
// that two users who send the same key never share an outcome. The
// :authority is left out, as dedup.DefaultScope leaves out the Host:
// hedged copies go to replicas by their own addresses.
func DefaultScope(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	var cert []byte
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			cert = ti.State.PeerCertificates[0].Raw
		}
	}
	return dedup.CredentialScope(md.Get("authorization"), md.Get("cookie"), cert)
}

// defaultKeep keeps no error: see the package doc.
func defaultKeep(codes.Code) bool { return false }

// statusProtoHeader marks an outcome whose Body is the marshalled
// google.rpc.Status of a kept error (code, message and details); without
// it, Body is the message alone.
const statusProtoHeader = "Grpc-Status-Proto"

// Unary is the grpc.UnaryServerInterceptor: pass it to
// grpc.UnaryInterceptor or grpc.ChainUnaryInterceptor.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(MetadataKey)
	if len(vals) == 0 {
		if i.req {
			return nil, status.Errorf(codes.InvalidArgument, "dedupgrpc: %s requires the %s metadata: send a unique key per operation, such as a UUID, and the same key with every retry", info.FullMethod, MetadataKey)
		}
		return handler(ctx, req)
	}
	var key string
	for n, v := range vals {
		k, err := dedup.ParseKey(v, i.maxKey)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		if n > 0 && k != key {
			return nil, status.Errorf(codes.InvalidArgument, "%v: the call carries two different %s values; send one", dedup.ErrInvalidKey, MetadataKey)
		}
		key = k
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "dedupgrpc: the request of %s is a %T, not a proto.Message", info.FullMethod, req)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "dedupgrpc: marshalling the request to fingerprint it: %v", err)
	}
	fp := dedup.FingerprintOf([]byte(info.FullMethod), b)
	key = dedup.ScopedKey(i.scope(ctx), key)
	cl, err := i.c.Acquire(ctx, key, fp)
	if err != nil {
		return nil, refusal(err)
	}
	if !cl.Won {
		return i.replay(ctx, info.FullMethod, cl.Existing.Outcome)
	}
	return i.run(ctx, req, info, handler, cl)
}

// run runs the handler once under the claim, renewing its lease
// meanwhile. If the claim was lost while it ran, the outcome stored by
// the copy that took over is replayed instead of its reply (see
// dedup.Coordinator.Settle).
func (i *Interceptor) run(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler, cl dedup.Claim) (any, error) {
	cctx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	}
	finished := false
	stop := i.c.KeepAlive(ctx, cl)
	defer func() {
		stop()
		if !finished {
			c, cancel := cctx()
			defer cancel()
			_ = i.c.Release(c, cl)
		}
	}()
	resp, err := handler(dedup.WithClaim(ctx, cl), req)
	finished = true
	stop()
	c, cancel := cctx()
	defer cancel()
	settle := func(out dedup.Outcome, resp any, err error) (any, error) {
		final, replayed, _ := i.c.Settle(c, cl, out)
		if replayed && !out.TooLarge {
			return i.replay(ctx, info.FullMethod, final)
		}
		return resp, err
	}
	if err != nil {
		st := status.Convert(err)
		if !i.keep(st.Code()) {
			// Given up; if the claim was lost meanwhile, the copy that
			// took over has the committed outcome (dedup.Coordinator.Yield).
			if final, replayed := i.c.Yield(c, cl); replayed {
				return i.replay(ctx, info.FullMethod, final)
			}
			return nil, err
		}
		out := dedup.Outcome{Status: int(st.Code()), Body: []byte(st.Message())}
		if b, merr := proto.Marshal(st.Proto()); merr == nil && len(b) <= i.max {
			out.Header = map[string][]string{statusProtoHeader: {"1"}}
			out.Body = b
		}
		return settle(out, nil, err)
	}
	m, ok := resp.(proto.Message)
	if !ok {
		_ = i.c.Release(c, cl)
		return nil, status.Errorf(codes.Internal, "dedupgrpc: the reply of %s is a %T, not a proto.Message", info.FullMethod, resp)
	}
	i.types.Store(info.FullMethod, m.ProtoReflect().Type())
	out := dedup.Outcome{Status: int(codes.OK)}
	b, merr := proto.Marshal(m)
	switch {
	case merr != nil:
		_ = i.c.Release(c, cl)
		return nil, status.Errorf(codes.Internal, "dedupgrpc: marshalling the reply: %v", merr)
	case len(b) > i.max:
		out.TooLarge = true
	default:
		out.Body = b
	}
	return settle(out, resp, nil)
}

func refusal(err error) error {
	switch {
	case errors.Is(err, dedup.ErrFingerprintMismatch):
		return status.Errorf(codes.FailedPrecondition, "%v: use a new key for a different call", err)
	case errors.Is(err, dedup.ErrStoreUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	default:
		return status.Errorf(codes.Aborted, "%v: retry with the same key later", err)
	}
}

func (i *Interceptor) replay(ctx context.Context, method string, out dedup.Outcome) (any, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(ReplayedKey, "true"))
	if out.TooLarge {
		return nil, status.Error(codes.AlreadyExists, dedup.ErrOutcomeTooLarge.Error())
	}
	if codes.Code(out.Status) != codes.OK {
		if len(out.Header[statusProtoHeader]) > 0 {
			p := status.New(codes.Unknown, "").Proto()
			if err := proto.Unmarshal(out.Body, p); err == nil {
				return nil, status.FromProto(p).Err()
			}
		}
		return nil, status.Error(codes.Code(out.Status), string(out.Body))
	}
	mt, err := i.replyType(method)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "dedupgrpc: replaying %s: %v", method, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(out.Body, m); err != nil {
		return nil, status.Errorf(codes.Internal, "dedupgrpc: unmarshalling the stored reply of %s: %v", method, err)
	}
	return m, nil
}

// replyType returns the output message type of a full method name
// "/package.Service/Method".
func (i *Interceptor) replyType(method string) (protoreflect.MessageType, error) {
	if t, ok := i.types.Load(method); ok {
		return t.(protoreflect.MessageType), nil
	}
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("%q is not /package.Service/Method", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("service %s is not in the protobuf registry: %w", svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("service %s has no method %s", svc, name)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, fmt.Errorf("the reply type %s is not registered: %w", md.Output().FullName(), err)
	}
	i.types.Store(method, mt)
	return mt, nil
}
