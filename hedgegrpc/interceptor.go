package hedgegrpc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/wire"
)

// PreviousAttemptsKey is the metadata key that counts the copies sent
// before this one, as in gRPC's A6: copy i (i > 0) carries the value i;
// the primary does not carry it. It does not mark a hedge: grpc-go sets it
// on its own retries too, and on a failover it marks the request's only
// copy. Servers tell hedges by AttemptKey.
const PreviousAttemptsKey = wire.PreviousAttemptsKey

// AttemptKey is the metadata key that marks a hedge copy: a copy sent
// while another copy of the call runs (hedge.Attempt.Hedge) carries its
// index, "1" for the first hedge. The primary never carries it, nor does a
// copy that stands alone: a failover (the first copy never reached a
// server) or a copy sent after the only running copy failed. That copy is
// the call's primary now, and a server that runs hedges at low priority
// (package sparegrpc) must serve it as one. It is the gRPC form of
// hedgehttp's Hedge-Attempt header.
const AttemptKey = wire.AttemptKey

// PushbackKey is the trailer key with which a server asks the client to
// hold off, as in gRPC's A6: its value is a number of milliseconds to wait
// before the next copy, and a negative or unparsable value means "no
// further copy" (see the package doc, "Server pushback"). A server sets it
// with grpc.SetTrailer(ctx, metadata.Pairs(hedgegrpc.PushbackKey, "-1")).
const PushbackKey = wire.PushbackKey

// prevAttempts[i] is the key's value for copy i.
var prevAttempts = [hedge.HardMaxAttempts]string{"0", "1", "2", "3", "4"}

// Option configures an Interceptor.
type Option func(*options)

type options struct {
	conns   []*grpc.ClientConn
	opName  func(string) string
	errs    []error
	tied    *TiedConfig       // WithTied
	dial    []grpc.DialOption // WithDialOptions
	dialSet bool              // WithDialOptions was given
	dialing bool              // Dial or DialServiceConfig makes the Interceptor
}

// WithReplicas sends each copy of a call on conns[a.Replica], where
// a.Replica is the replica the Hedger picked for it (hedge.Attempt), and
// never on the ClientConn the call was made on. Dial does the wiring for
// you from the backends' addresses; WithReplicas is for conns of your own. The Hedger must have
// Config.Replicas == len(conns) (NewFromServiceConfig sets it); the
// Hedger's Picker then never sends two copies of a call to the same conn,
// so with one conn per backend every copy reaches a different backend.
//
// A copy whose conn is the one the call was made on continues down that
// conn's interceptor chain; a copy on another conn goes through that conn's
// Invoke and so through that conn's own interceptors (once per copy). The
// Interceptor recognises the copies, so it may be installed on every conn
// of the set (see the package doc for the wiring); it then passes them
// through.
//
// With WithReplicas the Interceptor also reads the servers' load reports
// in the copies' trailers (see the package doc, "Load reports").
//
// Streaming calls are not affected: they go to the conn they were made on.
func WithReplicas(conns ...*grpc.ClientConn) Option {
	return func(o *options) {
		if len(conns) == 0 {
			o.errs = append(o.errs, errors.New("hedgegrpc: WithReplicas without conns: pass one ClientConn per replica"))
			return
		}
		for i, c := range conns {
			if c == nil {
				o.errs = append(o.errs, fmt.Errorf("hedgegrpc: WithReplicas: conn %d is nil", i))
				return
			}
		}
		o.conns = append([]*grpc.ClientConn(nil), conns...)
	}
}

// WithOpName sets the operation class (the op of hedge.Do, which keys
// delay estimates and stats) of a full method name. The default is the full
// method name itself, which is bounded because method names are static.
// f must map to a small fixed set of names too.
func WithOpName(f func(fullMethod string) string) Option {
	return func(o *options) {
		if f == nil {
			o.errs = append(o.errs, errors.New("hedgegrpc: WithOpName(nil): pass a function, or leave the option out for full method names"))
			return
		}
		o.opName = f
	}
}

// Interceptor hedges unary gRPC calls with hedge.Do. Install its Unary
// method with grpc.WithUnaryInterceptor or grpc.WithChainUnaryInterceptor.
// It is safe for concurrent use.
type Interceptor struct {
	all    *hedge.Hedger            // New: every method
	byKey  map[string]*hedge.Hedger // NewFromServiceConfig; nil values mean "not hedged"
	conns  []*grpc.ClientConn
	opName func(string) string
	mode   *hedge.ModeVar // shared by every Hedger of the Interceptor
	tied   *tiedState     // WithTied; nil without

	hedgers []*hedge.Hedger // every distinct Hedger, which load reports reach
	loads   loadStats
	shards  int // DialShards: the number of shards; 0 without
}

// SetMode switches every Hedger of the Interceptor at once (hedge.Off is
// the kill switch, hedge.Shadow the dry run): they share one
// hedge.ModeVar, so it is a single atomic store.
func (ic *Interceptor) SetMode(m hedge.Mode) error { return ic.mode.Set(m) }

// Mode returns the mode every Hedger of the Interceptor is in.
func (ic *Interceptor) Mode() hedge.Mode { return ic.mode.Mode() }

// ModeVar returns the mode switch the Interceptor's Hedgers share, to hand
// to other Hedgers of the service (as their hedge.Config.Mode) or to a control
// endpoint.
func (ic *Interceptor) ModeVar() *hedge.ModeVar { return ic.mode }

// New returns an Interceptor that hedges every unary method with h.
//
// h's Config.Retryable decides which failures send the next copy at once;
// its default retries every error except hedge.Permanent ones. For gRPC,
// set it to NonFatal(codes.Unavailable) or similar, so that a failure such
// as INVALID_ARGUMENT ends the call instead.
//
// Without WithReplicas every copy goes on the conn the call was made on,
// and Attempt.Replica is ignored (a Hedger with Config.Replicas still
// sends at most that many copies).
func New(h *hedge.Hedger, opts ...Option) (*Interceptor, error) {
	o, err := collect(opts)
	if h == nil {
		err = errors.Join(err, errors.New("hedgegrpc: New(nil): pass a *hedge.Hedger made with hedge.New"))
	} else if o.conns != nil && h.Replicas() != len(o.conns) {
		err = errors.Join(err, replicaMismatch(h.Replicas(), len(o.conns)))
	}
	ts, terr := newTiedState(o)
	if err = errors.Join(err, terr); err != nil {
		return nil, err
	}
	return &Interceptor{all: h, conns: o.conns, opName: o.opName, mode: h.ModeVar(), tied: ts, hedgers: []*hedge.Hedger{h}}, nil
}

// NewFromServiceConfig returns an Interceptor that hedges the methods sc
// gives a hedgingPolicy, each as its entry says, and passes every other
// method through.
//
// Each methodConfig entry with a hedging policy gets its own Hedger, made
// with hedge.New(policy.Config(base)): MaxAttempts, Delay and Retryable
// come from the policy, everything else from base. All of them share one
// Budget: hedge.NewThrottle from retryThrottling if sc has one (base must
// then set neither Budget nor NoBudget); otherwise base.Budget, or none
// with base.NoBudget, or else one hedge.DefaultBudget(), the engine's
// default, shared across methods. They share one mode switch too:
// base.Mode when it is a *hedge.ModeVar, or one made from base.Mode, which
// SetMode flips for all. With WithReplicas, base.Replicas is set
// to the number of conns (if base sets it, it must match).
//
// Every mistake, in sc, base and opts, is reported here at once, not at the
// first call. ServiceConfig.Warnings are not: check them after
// ParseServiceConfig.
func NewFromServiceConfig(sc *ServiceConfig, base hedge.Config, opts ...Option) (*Interceptor, error) {
	o, err := collect(opts)
	ts, terr := newTiedState(o)
	errs := []error{err, terr}
	if sc == nil {
		errs = append(errs, errors.New("hedgegrpc: NewFromServiceConfig(nil, ...): pass the result of ParseServiceConfig"))
	} else {
		errs = append(errs, sc.Validate())
		if sc.RetryThrottling != nil && (base.Budget != nil || base.NoBudget) {
			errs = append(errs, errors.New("hedgegrpc: the service config sets retryThrottling and base Config sets Budget or NoBudget: keep one"))
		}
	}
	if o.conns != nil {
		if base.Replicas != 0 && base.Replicas != len(o.conns) {
			errs = append(errs, fmt.Errorf("hedgegrpc: base Config.Replicas = %d but WithReplicas has %d conns: leave Replicas at 0 and it is set for you", base.Replicas, len(o.conns)))
		} else {
			base.Replicas = len(o.conns)
		}
	}
	if sc != nil && slices.ContainsFunc(sc.MethodConfigs, func(mc MethodConfig) bool { return mc.Hedging != nil }) {
		// base on its own, with the fields every policy sets given valid
		// values, so that a mistake in it is reported once, not per entry.
		probe := base
		probe.MaxAttempts, probe.Delay, probe.Retryable = 2, hedge.Fixed(0), nil
		if base.Budget == nil && !base.NoBudget && sc.RetryThrottling != nil {
			probe.NoBudget = true // the throttle replaces the budget
		}
		if _, err := hedge.New(probe); err != nil {
			errs = append(errs, fmt.Errorf("hedgegrpc: base Config: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	switch {
	case sc.RetryThrottling != nil:
		b, err := sc.RetryThrottling.Budget()
		if err != nil {
			return nil, fmt.Errorf("hedgegrpc: retryThrottling: %w", err)
		}
		base.Budget = b
	case base.Budget == nil && !base.NoBudget:
		base.Budget = hedge.DefaultBudget()
	}
	// One mode switch for every method's Hedger.
	mv, ok := base.Mode.(*hedge.ModeVar)
	if !ok {
		mv = new(hedge.ModeVar)
		if base.Mode != nil {
			_ = mv.Set(base.Mode.Mode()) // validated above
		}
		base.Mode = mv
	}
	ic := &Interceptor{byKey: map[string]*hedge.Hedger{}, conns: o.conns, opName: o.opName, mode: mv, tied: ts}
	for i, mc := range sc.MethodConfigs {
		var h *hedge.Hedger
		if mc.Hedging != nil {
			var err error
			if h, err = hedge.New(mc.Hedging.Config(base)); err != nil {
				errs = append(errs, fmt.Errorf("hedgegrpc: methodConfig[%d]: %w", i, err))
				continue
			}
		}
		for _, n := range mc.Names {
			ic.byKey[n.key()] = h
		}
		if h != nil {
			ic.hedgers = append(ic.hedgers, h)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ic, nil
}

func collect(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.dialSet && !o.dialing {
		o.errs = append(o.errs, errors.New("hedgegrpc: WithDialOptions is for Dial and DialServiceConfig, which make the conns: give grpc.NewClient your dial options yourself"))
	}
	return o, errors.Join(o.errs...)
}

// replicaMismatch is the error of a Hedger whose Config.Replicas is not
// the number of conns given to WithReplicas.
func replicaMismatch(replicas, conns int) error {
	if replicas == 0 {
		return fmt.Errorf("hedgegrpc: the Hedger has no Config.Replicas but WithReplicas has %d conns: make it with Config.Replicas = %d, one per conn (Dial sets it for you)", conns, conns)
	}
	return fmt.Errorf("hedgegrpc: the Hedger has Config.Replicas = %d but WithReplicas has %d conns: pass WithReplicas one ClientConn per replica, %d of them (Dial dials one per address for you), or, if there are only %d backends, make the Hedger with Config.Replicas = %d", replicas, conns, replicas, conns, conns)
}

// Hedger returns the Hedger that hedges fullMethod ("/package.Service/
// Method"), or nil if the method is passed through. Use it for Stats.
func (ic *Interceptor) Hedger(fullMethod string) *hedge.Hedger {
	if ic.byKey == nil {
		return ic.all
	}
	if h, ok := ic.byKey[fullMethod]; ok {
		return h
	}
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		if h, ok := ic.byKey[fullMethod[:i+1]]; ok {
			return h
		}
	}
	return ic.byKey[""]
}

// copyKey marks the context of a copy sent on another conn, so that an
// Interceptor installed there too passes it through instead of hedging a
// copy again.
type copyKey struct{}

// Unary is the interceptor; its signature is grpc.UnaryClientInterceptor.
//
// It runs the call through hedge.Do, or, on the conns of DialShards,
// through hedge.DoShard on the shard that WithShard names (a call without
// one fails with an error matching ErrNoShard). Each copy unmarshals into a reply of
// its own, a new message of reply's type, and only the winner's is copied
// into reply (proto.Reset, then proto.Merge), after hedge.Do returned: a
// losing copy never writes to reply, even one that completes later. Header,
// Trailer and Peer call options get the same treatment, and an OnFinish
// callback runs once, with the call's outcome. Copies after the first carry
// PreviousAttemptsKey metadata, and hedge copies AttemptKey. Every copy's context derives from ctx, so
// the caller's deadline and cancellation bound all of them.
//
// A copy that fails with a PushbackKey trailer holds the next copy back
// for the time it gives, or stops further copies (see the package doc,
// "Server pushback"). With WithReplicas, a copy's ORCA load report
// (LoadReportKey) goes to the Hedgers' ReportLoad for its replica (see
// the package doc, "Load reports").
//
// When every copy fails, the error returned is the last copy's, as gRPC
// reports it (status.Code works on it). When the caller's context ends the
// call, the error has code DeadlineExceeded or Canceled.
//
// Calls pass straight to invoker, unhedged, when the method has no Hedger,
// when reply is nil, a nil pointer or not a pointer, or when the call is a
// copy that an Interceptor with WithReplicas sent on another conn.
func (ic *Interceptor) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if fc, ok := ctx.Value(fanCopyKey{}).(*fanCopy); ok && ic.shards > 0 {
		return ic.fanCall(ctx, fc, method, req, reply, cc, invoker, opts)
	}
	h := ic.Hedger(method)
	if h == nil || ctx.Value(copyKey{}) != nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	shard := -1
	if ic.shards > 0 {
		s, ok := ctx.Value(shardKey{}).(int)
		if !ok {
			return noShardError{method}
		}
		shard = s
	}
	c := &call{ic: ic, method: method, req: req, reply: reply, cc: cc, invoker: invoker, opts: opts}
	if pm, ok := reply.(proto.Message); ok && pm.ProtoReflect().IsValid() {
		// The type is taken here, on the caller's goroutine: a copy must
		// not touch reply itself, which the caller fills (finish) while
		// losers may still be starting (ReapInBackground).
		c.pm, c.mt = pm, pm.ProtoReflect().Type()
	} else if ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	} else if rt := reflect.TypeOf(reply); rt != nil && rt.Kind() == reflect.Pointer && !reflect.ValueOf(reply).IsNil() {
		c.rt = rt.Elem()
	} else {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	for _, o := range opts {
		switch o.(type) {
		case grpc.HeaderCallOption, *grpc.HeaderCallOption,
			grpc.TrailerCallOption, *grpc.TrailerCallOption,
			grpc.PeerCallOption, *grpc.PeerCallOption,
			grpc.OnFinishCallOption, *grpc.OnFinishCallOption:
			c.special = true
		}
	}
	if ic.tied != nil {
		return c.tiedCall(ctx)
	}
	op := method
	if ic.opName != nil {
		op = ic.opName(method)
	}
	var i int
	var err error
	if shard >= 0 {
		i, err = hedge.DoShard(ctx, h, op, shard, c.attempt)
	} else {
		i, err = hedge.Do(ctx, h, op, c.attempt)
	}
	return c.finish(i, err)
}

// call is one intercepted call.
type call struct {
	ic      *Interceptor
	method  string
	req     any
	reply   any
	pm      proto.Message            // reply, if it is a proto message
	mt      protoreflect.MessageType // its type, which the copies' replies are made of
	rt      reflect.Type             // otherwise the type reply points to
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption
	special bool // opts hold Header, Trailer, Peer or OnFinish options
	copies  [hedge.HardMaxAttempts]copyState
}

// copyState is what one copy owns. Its copy writes it; the caller reads it
// only after seeing done, or after hedge.Do returned its index.
type copyState struct {
	reply   any
	trailer metadata.MD  // always asked for: it may carry pushback
	out     *callOutputs // nil unless the call has special options
	err     error        // as gRPC returned it
	ret     error        // as returned to hedge.Do: err, or hedge.PushbackAfter(err, ...)
	done    atomic.Bool
	optBuf  [2]grpc.CallOption // backs the copy's options in the common case
}

// callOutputs receive what Header and Peer options would write.
type callOutputs struct {
	header metadata.MD
	peer   peer.Peer
}

// attempt sends copy a.Index.
func (c *call) attempt(ctx context.Context, a hedge.Attempt) (int, error) {
	s := &c.copies[a.Index]
	if c.mt != nil {
		s.reply = c.mt.New().Interface()
	} else {
		s.reply = reflect.New(c.rt).Interface()
	}
	if c.special {
		s.out = new(callOutputs)
	}
	opts := s.redirect(c.opts)
	switch {
	case a.Hedge:
		ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, prevAttempts[a.Index], AttemptKey, prevAttempts[a.Index])
	case a.Index > 0:
		ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, prevAttempts[a.Index])
	}
	var err error
	switch conn := c.cc; {
	case c.ic.conns == nil:
		err = c.invoker(ctx, c.method, c.req, s.reply, c.cc, opts...)
	case a.Replica < 0 || a.Replica >= len(c.ic.conns):
		err = status.Errorf(codes.Internal, "hedgegrpc: the Hedger picked replica %d but WithReplicas has %d conns: pass one ClientConn per replica (Dial dials one per address for you)", a.Replica, len(c.ic.conns))
	case c.ic.conns[a.Replica] == conn:
		err = c.invoker(ctx, c.method, c.req, s.reply, c.cc, opts...)
	default:
		ctx = context.WithValue(ctx, copyKey{}, true)
		err = c.ic.conns[a.Replica].Invoke(ctx, c.method, c.req, s.reply, opts...)
	}
	if c.ic.conns != nil && a.Replica >= 0 && a.Replica < len(c.ic.conns) {
		c.ic.readLoad(a.Replica, s.trailer)
	}
	s.err, s.ret = err, err
	if v := s.trailer[PushbackKey]; err != nil && len(v) > 0 {
		s.ret = hedge.PushbackAfter(err, pushbackDelay(v))
	}
	s.done.Store(true)
	return a.Index, s.ret
}

// pushbackDelay reads the values of a PushbackKey trailer as gRFC A6 does:
// one non-negative integer is a number of milliseconds before the next
// copy; anything else (negative, unparsable, several values) means no
// further copy, returned as -1. Milliseconds beyond what a Duration holds
// saturate to hedge.Never.
func pushbackDelay(v []string) time.Duration {
	if len(v) != 1 {
		return -1
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(strings.TrimSpace(v[0]), "-"):
		return hedge.Never
	case err != nil || ms < 0:
		return -1
	case ms > int64(hedge.Never/time.Millisecond):
		return hedge.Never
	}
	return time.Duration(ms) * time.Millisecond
}

// redirect returns the call options of a copy: opts with Header, Trailer
// and Peer options pointed at s and OnFinish options removed (finish runs
// them once), and a Trailer option for s if opts has none. s.out is set if
// opts hold special options.
func (s *copyState) redirect(opts []grpc.CallOption) []grpc.CallOption {
	r := s.optBuf[:0]
	trailer := false
	for _, o := range opts {
		if s.out == nil {
			r = append(r, o)
			continue
		}
		switch o.(type) {
		case grpc.HeaderCallOption, *grpc.HeaderCallOption:
			r = append(r, grpc.Header(&s.out.header))
		case grpc.TrailerCallOption, *grpc.TrailerCallOption:
			if !trailer {
				r = append(r, grpc.Trailer(&s.trailer))
				trailer = true
			}
		case grpc.PeerCallOption, *grpc.PeerCallOption:
			r = append(r, grpc.Peer(&s.out.peer))
		case grpc.OnFinishCallOption, *grpc.OnFinishCallOption:
		default:
			r = append(r, o)
		}
	}
	if !trailer {
		r = append(r, grpc.Trailer(&s.trailer))
	}
	return r
}

// finish turns hedge.Do's outcome into the call's: the winner's reply and
// outputs, or the final error and the outputs of the copy that returned it.
func (c *call) finish(i int, err error) error {
	var from *copyState
	if err == nil {
		from = &c.copies[i]
		if c.pm != nil {
			proto.Reset(c.pm)
			proto.Merge(c.pm, from.reply.(proto.Message))
		} else {
			reflect.ValueOf(c.reply).Elem().Set(reflect.ValueOf(from.reply).Elem())
		}
	} else {
		from, err = c.failure(err)
	}
	if c.special {
		c.deliver(from, err)
	}
	return err
}

// failure picks the copy the error to return came from (nil if none),
// and that error: the last copy's when several failed, as gRPC returned
// it (without hedge's marks).
func (c *call) failure(err error) (*copyState, error) {
	var from *copyState
	var ae *hedge.AttemptsError
	if errors.As(err, &ae) && len(ae.Errs) > 0 {
		err = ae.Errs[len(ae.Errs)-1]
	}
	var ce *hedge.CopyError
	if errors.As(err, &ce) {
		err = ce.Err
		if ce.Index >= 0 && ce.Index < len(c.copies) && c.copies[ce.Index].done.Load() {
			from = &c.copies[ce.Index]
		}
	} else {
		for j := range c.copies {
			if s := &c.copies[j]; s.done.Load() && sameError(s.ret, err) {
				from = s
				break
			}
		}
	}
	if from != nil {
		err = from.err
	}
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &st) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		err = status.FromContextError(err).Err()
	}
	return from, err
}

// sameError reports whether a and b are the same error value, without
// panicking on uncomparable ones.
func sameError(a, b error) bool {
	if a == nil || b == nil || reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	if !reflect.ValueOf(a).Comparable() || !reflect.ValueOf(b).Comparable() {
		return false
	}
	return a == b
}

// deliver writes the outputs of copy from (nil: none) to the caller's
// Header, Trailer and Peer options and runs OnFinish callbacks once.
func (c *call) deliver(from *copyState, err error) {
	var header, trailer metadata.MD
	var p peer.Peer
	if from != nil {
		trailer = from.trailer
		if from.out != nil {
			header, p = from.out.header, from.out.peer
		}
	}
	for _, o := range c.opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = header
		case *grpc.HeaderCallOption:
			*o.HeaderAddr = header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = trailer
		case *grpc.TrailerCallOption:
			*o.TrailerAddr = trailer
		case grpc.PeerCallOption:
			*o.PeerAddr = p
		case *grpc.PeerCallOption:
			*o.PeerAddr = p
		}
	}
	for _, o := range c.opts {
		switch o := o.(type) {
		case grpc.OnFinishCallOption:
			o.OnFinish(err)
		case *grpc.OnFinishCallOption:
			o.OnFinish(err)
		}
	}
}

// NonFatal returns a hedge.Config.Retryable that treats a failure as
// non-fatal, so that the next copy goes at once, when its gRPC status code
// is one of cs; any other failure ends the call. It is what a
// hedgingPolicy's nonFatalStatusCodes maps to.
func NonFatal(cs ...codes.Code) func(err error) bool {
	var set uint64
	for _, c := range cs {
		if c < 64 {
			set |= 1 << c
		}
	}
	return func(err error) bool {
		c := status.Code(err)
		return c < 64 && set&(1<<c) != 0
	}
}
