package hedgegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

const unaryCall = "/grpc.testing.TestService/UnaryCall"

func mustHedger(t testing.TB, cfg hedge.Config) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// withHedger builds an Interceptor over h, with the conns as replicas if
// replicas is set.
func withHedger(h *hedge.Hedger, replicas bool) func([]*grpc.ClientConn) (*hedgegrpc.Interceptor, error) {
	return func(conns []*grpc.ClientConn) (*hedgegrpc.Interceptor, error) {
		if replicas {
			return hedgegrpc.New(h, hedgegrpc.WithReplicas(conns...))
		}
		return hedgegrpc.New(h)
	}
}

// No hedge fires when the primary answers before the delay: one copy, no
// grpc-previous-rpc-attempts.
func TestPrimaryWinsWithoutHedge(t *testing.T) {
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 2})
	c := newCluster(t, 2, nil, withHedger(h, true))

	resp, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.unaryCalls(); got != 1 {
		t.Fatalf("copies sent: %d, want 1", got)
	}
	seen := c.byAttempt(t)
	if seen[""] == nil || len(seen) != 1 {
		t.Fatalf("attempt values seen: %v, want only the primary's (none)", seen)
	}
	if resp.GetServerId() != seen[""].id {
		t.Errorf("reply from %q, want %q", resp.GetServerId(), seen[""].id)
	}
	st := h.OpStats(unaryCall)
	if st.Requests != 1 || st.Hedges != 0 || st.PrimaryWins != 1 {
		t.Errorf("stats: %+v", st)
	}
}

// A primary that stalls is overtaken by a hedge on another backend, which
// carries grpc-previous-rpc-attempts: 1 and wins; the primary is cancelled
// and reaped before the call returns.
func TestHedgeWinsWhenPrimaryStalls(t *testing.T) {
	for _, replicas := range []bool{true, false} {
		t.Run(fmt.Sprintf("replicas=%v", replicas), func(t *testing.T) {
			// The hedge answers only once the primary has reached its
			// backend (the primary could otherwise be cancelled before
			// it is sent); the primary stalls until cancelled.
			arrived := make(chan struct{})
			cancelled := make(chan string, 1)
			handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
				if attempt == "" {
					close(arrived)
					err := stall(ctx)
					cancelled <- b.id
					return nil, err
				}
				select {
				case <-arrived:
					return b.reply(attempt), nil
				case <-ctx.Done():
					return nil, status.FromContextError(ctx.Err()).Err()
				}
			}
			cfg := hedge.Config{Delay: hedge.Fixed(time.Millisecond)}
			if replicas {
				cfg.Replicas = 3
			}
			h := mustHedger(t, cfg)
			c := newCluster(t, 3, handle, withHedger(h, replicas))

			resp, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if n := c.inFlight.Load(); n != 0 {
				t.Errorf("%d copies still in flight after the call returned", n)
			}
			seen := c.byAttempt(t)
			if len(seen) != 2 || seen[""] == nil || seen["1"] == nil {
				t.Fatalf("attempt values seen: %v, want \"\" (primary) and \"1\" (hedge)", seen)
			}
			if c.sent.Load() != 2 || c.unaryCalls() != 2 {
				t.Errorf("copies sent %d, arrived %d; want 2", c.sent.Load(), c.unaryCalls())
			}
			if resp.GetHostname() != "attempt=1" || resp.GetServerId() != seen["1"].id {
				t.Errorf("reply %v, want the hedge's from %s", resp, seen["1"].id)
			}
			for _, b := range c.backends {
				for _, a := range b.seen() {
					if want := a.attempt; a.hedge != want {
						t.Errorf("copy %q carries %s %q, want %q: only a hedge carries it", a.attempt, hedgegrpc.AttemptKey, a.hedge, want)
					}
				}
			}
			if replicas && seen[""] == seen["1"] {
				t.Errorf("primary and hedge both went to %s", seen[""].id)
			}
			if !replicas && (seen[""] != c.backends[0] || seen["1"] != c.backends[0]) {
				t.Errorf("without replicas every copy goes on the call's conn")
			}
			if id := <-cancelled; id != seen[""].id {
				t.Errorf("cancelled on %s, want the primary's backend %s", id, seen[""].id)
			}
			st := h.OpStats(unaryCall)
			if st.Hedges != 1 || st.HedgeWins != 1 {
				t.Errorf("stats: hedges %d, hedge wins %d; want 1, 1", st.Hedges, st.HedgeWins)
			}
		})
	}
}

// A copy failing with a non-fatal code sends the next copy at once (the
// delay is an hour); when all fail, the last copy's status is returned.
// That copy is the call's only one: it carries no AttemptKey, so that a
// server serves it as a primary.
func TestNonFatalCodeSendsNextCopyAtOnce(t *testing.T) {
	t.Run("hedge succeeds", func(t *testing.T) {
		handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
			if attempt == "" {
				return nil, status.Error(codes.Unavailable, "primary unavailable")
			}
			return b.reply(attempt), nil
		}
		h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), MaxAttempts: 3, Replicas: 3, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
		c := newCluster(t, 3, handle, withHedger(h, true))
		resp, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetHostname() != "attempt=1" {
			t.Errorf("reply %v, want the first hedge's", resp)
		}
		if got := c.unaryCalls(); got != 2 {
			t.Errorf("copies: %d, want 2", got)
		}
		for _, b := range c.backends {
			for _, a := range b.seen() {
				if a.hedge != "" {
					t.Errorf("copy %q, sent when no other copy ran, carries %s %q", a.attempt, hedgegrpc.AttemptKey, a.hedge)
				}
			}
		}
	})
	t.Run("all fail", func(t *testing.T) {
		handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
			return nil, status.Errorf(codes.Unavailable, "unavailable at attempt %q", attempt)
		}
		h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), MaxAttempts: 3, Replicas: 3, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
		c := newCluster(t, 3, handle, withHedger(h, true))
		_, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if s := status.Convert(err); s.Code() != codes.Unavailable || s.Message() != `unavailable at attempt "2"` {
			t.Errorf("error %v, want the last copy's status", err)
		}
		if got := c.unaryCalls(); got != 3 {
			t.Errorf("copies: %d, want 3", got)
		}
		if seen := c.byAttempt(t); len(seen) != 3 {
			t.Errorf("attempts seen: %v", seen)
		}
	})
}

// A fatal code ends the call at once: no further copy is sent, and a copy
// still in flight is cancelled.
func TestFatalCodeEndsCallAtOnce(t *testing.T) {
	t.Run("no next copy", func(t *testing.T) {
		handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
			return nil, status.Error(codes.InvalidArgument, "bad request")
		}
		h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), MaxAttempts: 3, Replicas: 3, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
		c := newCluster(t, 3, handle, withHedger(h, true))
		_, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("error %v, want InvalidArgument", err)
		}
		if got := c.unaryCalls(); got != 1 {
			t.Errorf("copies: %d, want 1", got)
		}
	})
	t.Run("cancels the copy in flight", func(t *testing.T) {
		arrived := make(chan struct{})
		cancelled := make(chan struct{})
		handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
			if attempt == "" {
				close(arrived)
				err := stall(ctx)
				close(cancelled)
				return nil, err
			}
			<-arrived
			return nil, status.Error(codes.InvalidArgument, "bad request")
		}
		// Delay 0: both copies go at once.
		h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(0), Replicas: 2, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
		c := newCluster(t, 2, handle, withHedger(h, true))
		_, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("error %v, want InvalidArgument", err)
		}
		if n := c.inFlight.Load(); n != 0 {
			t.Errorf("%d copies in flight after the call returned", n)
		}
		<-cancelled
	})
}

// Each copy unmarshals into its own reply. A loser that completes after
// the winner (here made to, by an inner interceptor that holds it until its
// context is cancelled and then lets it finish anyway) writes only to its
// own reply, Header and Trailer, never the caller's: with the engine's
// default reaping and with ReapInBackground, where the loser writes while
// the caller is reading. Run with -race.
func TestReplyIsolation(t *testing.T) {
	for _, bg := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReapInBackground=%v", bg), func(t *testing.T) {
			release := make(chan struct{})
			loserDone := make(chan struct{})
			var loserReply *testgrpc.SimpleResponse
			var loserHeader metadata.MD
			var loserErr error
			late := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if attemptOf(ctx) == "" {
					return invoker(ctx, method, req, reply, cc, opts...)
				}
				defer close(loserDone)
				<-ctx.Done() // the primary has won
				if bg {
					<-release // the caller has its reply
				}
				// Finish the RPC regardless: gRPC unmarshals into reply and
				// sets the Header target now, after the winner.
				opts = append(opts, grpc.Header(&loserHeader))
				loserErr = invoker(context.WithoutCancel(ctx), method, req, reply, cc, opts...)
				loserReply = reply.(*testgrpc.SimpleResponse)
				return loserErr
			}
			h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(0), ReapInBackground: bg})
			c := newCluster(t, 1, nil, withHedger(h, false), late)

			var header, trailer metadata.MD
			resp := &testgrpc.SimpleResponse{}
			err := c.conns[0].Invoke(context.Background(), unaryCall, &testgrpc.SimpleRequest{}, resp, grpc.Header(&header), grpc.Trailer(&trailer))
			if err != nil {
				t.Fatal(err)
			}
			close(release)
			// Read while the loser (with ReapInBackground) may be writing.
			got := []string{resp.GetHostname(), string(resp.GetPayload().GetBody()), strings.Join(header.Get("attempt"), ","), strings.Join(trailer.Get("attempt"), ",")}
			<-loserDone
			if want := []string{"attempt=", "b0/", "", ""}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("caller saw %q, want the primary's %q", got, want)
			}
			if loserErr != nil || loserReply.GetHostname() != "attempt=1" || loserReply == resp {
				t.Errorf("loser: err %v, reply %v (same message as the caller's: %v); want its own successful reply", loserErr, loserReply, loserReply == resp)
			}
			if a := loserHeader.Get("attempt"); len(a) != 1 || a[0] != "1" {
				t.Errorf("loser's header %v", loserHeader)
			}
			if resp.GetHostname() != "attempt=" || first(header, "server") != "b0" || first(header, "attempt") != "" {
				t.Errorf("the loser changed the caller's reply or header: %v %v", resp, header)
			}
		})
	}
}

// The caller's deadline bounds every copy (servers see it), and the call
// returns DeadlineExceeded with no copy left running. The deadline expires
// when the test says, once both copies have reached their backends, so the
// outcome does not depend on how fast the machine is.
func TestCallerDeadline(t *testing.T) {
	arrived := make(chan string, 2)
	handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		arrived <- b.id
		return nil, stall(ctx)
	}
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(0), Replicas: 2})
	c := newCluster(t, 2, handle, withHedger(h, true))
	ctx := newExpiring(time.Hour)
	go func() {
		<-arrived
		<-arrived
		ctx.expire()
	}()
	var finished []error
	_, err := c.client().UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.OnFinish(func(err error) { finished = append(finished, err) }))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("error %v, want DeadlineExceeded", err)
	}
	if n := c.inFlight.Load(); n != 0 {
		t.Errorf("%d copies in flight after the call returned", n)
	}
	if len(finished) != 1 || status.Code(finished[0]) != codes.DeadlineExceeded {
		t.Errorf("OnFinish called with %v, want once with DeadlineExceeded", finished)
	}
	seen := c.byAttempt(t)
	if len(seen) != 2 {
		t.Errorf("attempts seen: %v, want the primary and a hedge", seen)
	}
	for _, b := range c.backends {
		for _, a := range b.seen() {
			if !a.hasDeadline {
				t.Errorf("%s: copy %q arrived without the caller's deadline", b.id, a.attempt)
			}
		}
	}
}

// expiring is a context whose deadline, reported as d from its making (so
// that gRPC sends it as grpc-timeout), passes when expire is called rather
// than on the clock.
type expiring struct {
	deadline time.Time
	done     chan struct{}
	once     sync.Once
}

func newExpiring(d time.Duration) *expiring {
	return &expiring{deadline: time.Now().Add(d), done: make(chan struct{})}
}

func (e *expiring) expire()                     { e.once.Do(func() { close(e.done) }) }
func (e *expiring) Deadline() (time.Time, bool) { return e.deadline, true }
func (e *expiring) Done() <-chan struct{}       { return e.done }
func (e *expiring) Value(any) any               { return nil }
func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Header, Trailer and Peer options receive the winner's values, and
// OnFinish runs once; on failure they receive the returned error's copy's.
func TestCallOptionsFollowTheWinner(t *testing.T) {
	handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		if attempt == "" {
			return nil, stall(ctx)
		}
		return b.reply(attempt), nil
	}
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Millisecond), Replicas: 3, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
	c := newCluster(t, 3, handle, withHedger(h, true))

	var header, trailer metadata.MD
	var p peer.Peer
	var finished []error
	_, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{},
		grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p),
		grpc.OnFinish(func(err error) { finished = append(finished, err) }))
	if err != nil {
		t.Fatal(err)
	}
	hedgeBackend := c.byAttempt(t)["1"]
	if first(header, "attempt") != "1" || first(trailer, "attempt") != "1" || first(header, "server") != hedgeBackend.id {
		t.Errorf("header %v, trailer %v; want the hedge's", header, trailer)
	}
	if p.Addr == nil || p.Addr.String() != hedgeBackend.addr {
		t.Errorf("peer %v, want %s", p.Addr, hedgeBackend.addr)
	}
	if len(finished) != 1 || finished[0] != nil {
		t.Errorf("OnFinish calls: %v, want one with nil", finished)
	}

	// Failure: every copy fails with a non-fatal code; the trailer is the
	// last copy's, whose status is returned.
	failing := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		return nil, status.Errorf(codes.Unavailable, "down at %q", attempt)
	}
	h2 := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 2, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
	c2 := newCluster(t, 2, failing, withHedger(h2, true))
	trailer, finished = nil, nil
	_, err = c2.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer),
		grpc.OnFinish(func(err error) { finished = append(finished, err) }))
	if status.Convert(err).Message() != `down at "1"` {
		t.Fatalf("error %v, want the last copy's", err)
	}
	if a := trailer.Get("attempt"); len(a) != 1 || a[0] != "1" {
		t.Errorf("trailer %v, want the last copy's", trailer)
	}
	if len(finished) != 1 || finished[0] != err {
		t.Errorf("OnFinish calls %v, want one with %v", finished, err)
	}
}

// Streams are never hedged: with a zero delay and three replicas, a
// server-streaming and a bidi call each reach one backend once, on the
// call's conn, without grpc-previous-rpc-attempts.
func TestStreamingPassesThrough(t *testing.T) {
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(0), MaxAttempts: 3, Replicas: 3})
	c := newCluster(t, 3, nil, withHedger(h, true))
	ctx := context.Background()

	s, err := c.client().StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{
		ResponseParameters: []*testgrpc.ResponseParameters{{}, {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := s.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("received %d messages, want 2", n)
	}

	bidi, err := c.client().FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bidi.Send(&testgrpc.StreamingOutputCallRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bidi.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := bidi.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := bidi.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want EOF", err)
	}

	if got := c.backends[0].streams.Load(); got != 2 {
		t.Errorf("streams on the call's backend: %d, want 2", got)
	}
	for _, b := range c.backends[1:] {
		if got := b.streams.Load(); got != 0 {
			t.Errorf("%s got %d streams, want 0", b.id, got)
		}
	}
	for _, a := range c.backends[0].seen() {
		if a.attempt != "" {
			t.Errorf("a stream carried %s=%q", hedgegrpc.PreviousAttemptsKey, a.attempt)
		}
	}
	if st := h.OpStats("/grpc.testing.TestService/StreamingOutputCall"); st.Requests != 0 {
		t.Errorf("streams went through the Hedger: %+v", st)
	}
}

// A reply that is not a proto message (here a raw-bytes codec on the
// client) is isolated the same way, through a new value of its type.
func TestNonProtoReply(t *testing.T) {
	handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		if attempt == "" {
			return nil, stall(ctx)
		}
		return b.reply(attempt), nil
	}
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Millisecond), Replicas: 2})
	c := newCluster(t, 2, handle, withHedger(h, true))
	req, err := proto.Marshal(&testgrpc.SimpleRequest{ResponseSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	var raw rawBytes
	if err := c.conns[0].Invoke(context.Background(), unaryCall, rawBytes(req), &raw, grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatal(err)
	}
	var resp testgrpc.SimpleResponse
	if err := proto.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.GetHostname() != "attempt=1" {
		t.Errorf("reply %v, want the hedge's", &resp)
	}
}

// first returns md's first value for key, or "(none)".
func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return "(none)"
}

type rawBytes []byte

// rawCodec sends and receives messages as raw bytes: the server still
// speaks proto.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(rawBytes), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*rawBytes) = append(rawBytes(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// A Hedger whose Config.Replicas does not match the conns is refused at
// construction, with a message that says what to do.
func TestReplicaMismatch(t *testing.T) {
	var conns []*grpc.ClientConn
	for range 2 {
		// NewClient does not dial until the first call; none is made.
		cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		conns = append(conns, cc)
	}
	for _, tc := range []struct {
		replicas int
		want     string
	}{
		{0, "make it with Config.Replicas = 2"},
		// More replicas than conns: the conns are missing, not the
		// replicas too many.
		{3, "pass WithReplicas one ClientConn per replica, 3 of them"},
	} {
		h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: tc.replicas})
		_, err := hedgegrpc.New(h, hedgegrpc.WithReplicas(conns...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Replicas %d: err = %v, want one that says %q", tc.replicas, err, tc.want)
		}
	}
}

// The service config's policies apply per method, with gRPC's precedence:
// UnaryCall is hedged by the service-wide entry (three copies at once, one
// per replica, marked 1 and 2), EmptyCall is not, by its own entry.
func TestServiceConfigEndToEnd(t *testing.T) {
	sc, err := hedgegrpc.ParseServiceConfig(`{
		"loadBalancingConfig": [{"round_robin": {}}],
		"methodConfig": [
			{"name": [{"service": "grpc.testing.TestService"}],
			 "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0s", "nonFatalStatusCodes": ["UNAVAILABLE"]}},
			{"name": [{"service": "grpc.testing.TestService", "method": "EmptyCall"}], "timeout": "5s"}
		],
		"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy waits until all three have arrived, so none can win (and
	// cancel the others) before each backend has seen one.
	var arrivals atomic.Int64
	all := make(chan struct{})
	handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		if arrivals.Add(1) == 3 {
			close(all)
		}
		select {
		case <-all:
			return b.reply(attempt), nil
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	c := newCluster(t, 3, handle, func(conns []*grpc.ClientConn) (*hedgegrpc.Interceptor, error) {
		return hedgegrpc.NewFromServiceConfig(sc, hedge.Config{}, hedgegrpc.WithReplicas(conns...))
	})
	if _, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.backends {
		if got := b.unary.Load(); got != 1 {
			t.Errorf("%s: %d UnaryCalls, want 1", b.id, got)
		}
	}
	seen := c.byAttempt(t)
	if len(seen) != 3 || seen[""] == nil || seen["1"] == nil || seen["2"] == nil {
		t.Errorf("attempt values seen: %v, want \"\", 1, 2", seen)
	}

	if _, err := c.client().EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	var empties int64
	for _, b := range c.backends {
		empties += b.empty.Load()
	}
	if empties != 1 {
		t.Errorf("EmptyCall sent %d times, want 1", empties)
	}
	if h := c.ic.Hedger("/grpc.testing.TestService/EmptyCall"); h != nil {
		t.Errorf("EmptyCall has a Hedger")
	}
	if h := c.ic.Hedger("/other.Service/Get"); h != nil {
		t.Errorf("a method the config does not name has a Hedger")
	}
	h := c.ic.Hedger(unaryCall)
	if got, want := h.Budget().String(), "throttle(maxTokens=10, tokenRatio=0.1)"; got != want {
		t.Errorf("budget %s, want %s", got, want)
	}
	if st := h.OpStats(unaryCall); st.Requests != 1 || st.Hedges != 2 {
		t.Errorf("stats: %+v", st)
	}
}

// retryThrottling stops hedges once failures drain the bucket to half, and,
// as in gRPC, each failed copy debits it before the next copy is decided:
// with maxTokens 3 (threshold 1.5), call 0's primary fails (3 -> 2, still
// above 1.5: hedge), its hedge fails (2 -> 1); call 1's primary fails
// (1 -> 0) and gets no hedge, nor does call 2's. Debiting once per call
// instead would have let call 1 hedge too.
func TestRetryThrottlingStopsHedges(t *testing.T) {
	sc, err := hedgegrpc.ParseServiceConfig(`{
		"methodConfig": [{"name": [{}],
			"hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "3600s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}],
		"retryThrottling": {"maxTokens": 3, "tokenRatio": 0.1}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		return nil, status.Error(codes.Unavailable, "down")
	}
	c := newCluster(t, 2, handle, func(conns []*grpc.ClientConn) (*hedgegrpc.Interceptor, error) {
		return hedgegrpc.NewFromServiceConfig(sc, hedge.Config{}, hedgegrpc.WithReplicas(conns...))
	})
	h := c.ic.Hedger(unaryCall)
	for i, want := range []struct {
		copies int64
		tokens float64
	}{{2, 1}, {1, 0}, {1, 0}} {
		before := c.unaryCalls()
		_, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want Unavailable", i, err)
		}
		if got := c.unaryCalls() - before; got != want.copies {
			t.Errorf("call %d sent %d copies, want %d", i, got, want.copies)
		}
		if got := h.Budget().Tokens(); got != want.tokens {
			t.Errorf("after call %d: %v tokens, want %v", i, got, want.tokens)
		}
	}
	if st := h.OpStats(unaryCall); st.Refused[hedge.RefusedBudget] != 2 {
		t.Errorf("budget denials %d, want 2", st.Refused[hedge.RefusedBudget])
	}
}

// Mistakes in options and in combining a service config with a base
// Config are reported at construction.
func TestConstructionErrors(t *testing.T) {
	h := mustHedger(t, hedge.Config{})
	throttled, err := hedgegrpc.ParseServiceConfig(`{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}`)
	if err != nil {
		t.Fatal(err)
	}
	budget, _ := hedge.NewBudget(0.1, 10)
	cc := dial(t, "127.0.0.1:1")
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"nil hedger", func() error { _, err := hedgegrpc.New(nil); return err }, "New(nil)"},
		{"no conns", func() error { _, err := hedgegrpc.New(h, hedgegrpc.WithReplicas()); return err }, "WithReplicas without conns"},
		{"nil conn", func() error { _, err := hedgegrpc.New(h, hedgegrpc.WithReplicas(cc, nil)); return err }, "conn 1 is nil"},
		{"nil op name", func() error { _, err := hedgegrpc.New(h, hedgegrpc.WithOpName(nil)); return err }, "WithOpName(nil)"},
		{"nil config", func() error { _, err := hedgegrpc.NewFromServiceConfig(nil, hedge.Config{}); return err }, "NewFromServiceConfig(nil"},
		{"replicas mismatch", func() error {
			_, err := hedgegrpc.NewFromServiceConfig(&hedgegrpc.ServiceConfig{}, hedge.Config{Replicas: 3}, hedgegrpc.WithReplicas(cc))
			return err
		}, "Replicas = 3 but WithReplicas has 1"},
		{"throttle and budget", func() error {
			_, err := hedgegrpc.NewFromServiceConfig(throttled, hedge.Config{Budget: budget})
			return err
		}, "keep one"},
		{"throttle and no budget", func() error {
			_, err := hedgegrpc.NewFromServiceConfig(throttled, hedge.Config{NoBudget: true})
			return err
		}, "keep one"},
		{"bad base", func() error {
			sc, _ := hedgegrpc.ParseServiceConfig(`{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 2}}]}`)
			_, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{MaxHedgesInFlight: -1})
			return err
		}, "base Config: hedge: Config.MaxHedgesInFlight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The interceptor's stats use the op name WithOpName gives.
func TestWithOpName(t *testing.T) {
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour)})
	c := newCluster(t, 1, nil, func([]*grpc.ClientConn) (*hedgegrpc.Interceptor, error) {
		return hedgegrpc.New(h, hedgegrpc.WithOpName(func(m string) string { return m[strings.LastIndexByte(m, '/')+1:] }))
	})
	if _, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if st := h.OpStats("UnaryCall"); st.Requests != 1 {
		t.Errorf("stats under UnaryCall: %+v", st)
	}
}

func TestNonFatal(t *testing.T) {
	f := hedgegrpc.NonFatal(codes.Unavailable, codes.Aborted)
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, ""), true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Aborted, "")), true},
		{status.Error(codes.InvalidArgument, ""), false},
		{errors.New("not a status"), false},
		{nil, false},
	} {
		if got := f(tc.err); got != tc.want {
			t.Errorf("NonFatal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Concurrent calls, some hedged, share the Interceptor safely (run with
// -race): each gets its own copy's reply.
func TestConcurrentCalls(t *testing.T) {
	handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		return b.reply(attempt), nil
	}
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(0), Replicas: 3, NoBudget: true})
	c := newCluster(t, 3, handle, withHedger(h, true))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				resp, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				if err != nil {
					t.Error(err)
					return
				}
				if want := resp.GetServerId() + "/" + strings.TrimPrefix(resp.GetHostname(), "attempt="); string(resp.GetPayload().GetBody()) != want {
					t.Errorf("reply mixes copies: %v", resp)
				}
			}
		})
	}
	wg.Wait()
}

// A hedgingDelay longer than any call, such as "9223372036s" (the most
// whole seconds a time.Duration holds) or "315576000000s" (the longest
// proto Duration, hedge.Never), sends no hedge however long the primary
// takes. On synctest's fake clock the call starts a second after the
// Hedger was made (so that start plus delay passes math.MaxInt64) and the
// primary takes an hour: a deadline that wrapped around would send the
// hedge at once. The invoker stands in for the network, whose sockets
// would keep the fake clock from moving.
func TestHugeHedgingDelayNeverHedges(t *testing.T) {
	for _, delay := range []string{"9223372036s", "9223372036.854775807s", "9223372036.854775808s", "315576000000s", "315576000000.999999999s"} {
		t.Run(delay, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc, err := hedgegrpc.ParseServiceConfig(`{"methodConfig": [{"name": [{}],
					"hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "` + delay + `"}}]}`)
				if err != nil {
					t.Fatal(err)
				}
				ic, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{})
				if err != nil {
					t.Fatal(err)
				}
				var copies atomic.Int64
				invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
					copies.Add(1)
					select {
					case <-time.After(time.Hour):
						reply.(*testgrpc.SimpleResponse).Hostname = "attempt=" + attemptOf(ctx)
						return nil
					case <-ctx.Done():
						return status.FromContextError(ctx.Err()).Err()
					}
				}
				time.Sleep(time.Second)
				resp := &testgrpc.SimpleResponse{}
				if err := ic.Unary(context.Background(), unaryCall, &testgrpc.SimpleRequest{}, resp, nil, invoker); err != nil {
					t.Fatal(err)
				}
				st := ic.Hedger(unaryCall).OpStats(unaryCall)
				if n := copies.Load(); n != 1 || st.Hedges != 0 || resp.GetHostname() != "attempt=" {
					t.Errorf("copies %d, hedges %d, reply from %q; want one copy, no hedge, the primary's reply", n, st.Hedges, resp.GetHostname())
				}
				// The Hedger's timer goroutine lingers after its last
				// timer: let fake time pass so that it ends in the bubble.
				time.Sleep(time.Minute)
			})
		})
	}
}

// A copy that fails with grpc-retry-pushback-ms in its trailers ends the
// call with its status: no further copy goes, whether the value says "stop"
// (negative or unparsable, gRPC's A6) or gives a delay (the engine cannot
// hold the next copy back yet, so a delay stops too). The caller's Trailer
// option gets the pushback, and the retryThrottling bucket is debited once,
// as gRPC debits a pushback. Without pushback, the same failures send the
// next copy at once (TestNonFatalCodeSendsNextCopyAtOnce).
func TestServerPushbackStopsHedging(t *testing.T) {
	sc, err := hedgegrpc.ParseServiceConfig(`{
		"methodConfig": [{"name": [{}],
			"hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "3600s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}],
		"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	build := func(conns []*grpc.ClientConn) (*hedgegrpc.Interceptor, error) {
		return hedgegrpc.NewFromServiceConfig(sc, hedge.Config{}, hedgegrpc.WithReplicas(conns...))
	}
	for _, tc := range []struct {
		name      string
		pushback  string // set by the copy that pushes back
		from      string // the attempt that pushes back; earlier ones fail without pushback
		copies    int64
		tokensOut float64
	}{
		{"primary, negative", "-1", "", 1, 9},
		{"primary, unparsable", "soon", "", 1, 9},
		{"primary, fraction", "1.5", "", 1, 9},
		// The primary fails without pushback (a token), the hedge it
		// sends at once pushes back (another): the third copy never goes.
		{"hedge, negative", "-1", "1", 2, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
				switch {
				case attempt == tc.from:
					_ = grpc.SetTrailer(ctx, metadata.Pairs(hedgegrpc.PushbackKey, tc.pushback))
					return nil, status.Errorf(codes.Unavailable, "pushback from attempt %q", attempt)
				case attempt < tc.from:
					return nil, status.Errorf(codes.Unavailable, "down at attempt %q", attempt)
				}
				return b.reply(attempt), nil
			}
			c := newCluster(t, 3, handle, build)
			var trailer metadata.MD
			_, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
			if s := status.Convert(err); s.Code() != codes.Unavailable || s.Message() != fmt.Sprintf("pushback from attempt %q", tc.from) {
				t.Errorf("error %v, want the pushing copy's status", err)
			}
			if _, ok := status.FromError(err); !ok {
				t.Errorf("error %T is not a gRPC status error", err)
			}
			if got := c.unaryCalls(); got != tc.copies {
				t.Errorf("copies sent: %d, want %d", got, tc.copies)
			}
			if got := trailer.Get(hedgegrpc.PushbackKey); len(got) != 1 || got[0] != tc.pushback {
				t.Errorf("caller's trailer %v, want the pushback %q", trailer, tc.pushback)
			}
			h := c.ic.Hedger(unaryCall)
			if got := h.Budget().Tokens(); got != tc.tokensOut {
				t.Errorf("throttle holds %v tokens, want %v", got, tc.tokensOut)
			}
			if st := h.OpStats(unaryCall); st.Hedges != tc.copies-1 || st.Failures != 1 {
				t.Errorf("stats: hedges %d, failures %d; want %d, 1", st.Hedges, st.Failures, tc.copies-1)
			}
		})
	}

	// Pushback on a successful reply changes nothing: the copy wins.
	t.Run("success", func(t *testing.T) {
		handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(hedgegrpc.PushbackKey, "-1"))
			return b.reply(attempt), nil
		}
		c := newCluster(t, 3, handle, build)
		if _, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := c.ic.Hedger(unaryCall).Budget().Tokens(); got != 10 {
			t.Errorf("throttle holds %v tokens, want 10", got)
		}
	})
}

// TestServerPushbackDelaysTheNextCopy: a number of milliseconds holds the
// next copy back for that long, instead of sending it at once (as after
// another non-fatal failure) or at the hedging delay (an hour here).
func TestServerPushbackDelaysTheNextCopy(t *testing.T) {
	for _, ms := range []string{"0", "30"} {
		t.Run(ms+"ms", func(t *testing.T) {
			var failedAt atomic.Int64
			handle := func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
				if attempt == "" {
					_ = grpc.SetTrailer(ctx, metadata.Pairs(hedgegrpc.PushbackKey, ms))
					failedAt.Store(time.Now().UnixNano())
					return nil, status.Error(codes.Unavailable, "busy")
				}
				if gap := time.Duration(time.Now().UnixNano() - failedAt.Load()); ms == "30" && gap < 30*time.Millisecond {
					return nil, status.Errorf(codes.Internal, "the hedge came %v after the pushback, before the 30ms asked", gap)
				}
				return b.reply(attempt), nil
			}
			b, _ := hedge.NewThrottle(10, 1)
			h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 2, Budget: b, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
			c := newCluster(t, 2, handle, withHedger(h, true))
			if _, err := c.client().UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatalf("call failed: %v; want the hedge sent after the pushback to win", err)
			}
			if got := c.unaryCalls(); got != 2 {
				t.Errorf("copies sent: %d, want 2", got)
			}
			if got := b.Tokens(); got != 10 {
				t.Errorf("throttle holds %v tokens, want 10: one debit for the pushback, one credit for the success", got)
			}
		})
	}
}

// TestServerPushbackLetsCopiesInFlightFinish: "no further copy" stops new
// copies, not the ones already running, which may still win.
func TestServerPushbackLetsCopiesInFlightFinish(t *testing.T) {
	b, _ := hedge.NewThrottle(10, 0.1)
	h := mustHedger(t, hedge.Config{Delay: hedge.Fixed(0), Replicas: 2, Budget: b, Retryable: hedgegrpc.NonFatal(codes.Unavailable)})
	handle := func(ctx context.Context, bk *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		if attempt == "" {
			// Answer only once the client has taken the hedge's pushback
			// (it debits the throttle), so that the pushback comes first
			// whatever the scheduling.
			for b.Tokens() == 10 {
				if err := ctx.Err(); err != nil {
					return nil, status.FromContextError(err).Err()
				}
				time.Sleep(time.Millisecond)
			}
			return bk.reply(attempt), nil
		}
		_ = grpc.SetTrailer(ctx, metadata.Pairs(hedgegrpc.PushbackKey, "-1"))
		return nil, status.Error(codes.Unavailable, "pushback")
	}
	c := newCluster(t, 2, handle, withHedger(h, true))
	// The timeout only bounds a failure; the call ends long before.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.client().UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatalf("call failed: %v; want the primary, still in flight at the pushback, to win", err)
	}
	if got := c.unaryCalls(); got != 2 {
		t.Errorf("copies sent: %d, want 2", got)
	}
}
