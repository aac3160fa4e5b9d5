package dedupgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/tailcut/hedge/dedup"
	"github.com/tailcut/hedge/dedup/dedupgrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service appends an "order line" per call and answers with its number.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	runs  atomic.Int64
	block chan struct{}
	// entered, if set, is told once a call has entered the handler.
	entered chan struct{}
	fail    func(n int64) error
}

func (s *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	n := s.runs.Add(1)
	if s.entered != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
	}
	if s.block != nil {
		<-s.block
	}
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return nil, err
		}
	}
	return &testgrpc.SimpleResponse{Username: fmt.Sprintf("order %d for %d bytes", n, req.GetResponseSize())}, nil
}

func start(t *testing.T, svc *service, cfg dedupgrpc.Config) testgrpc.TestServiceClient {
	t.Helper()
	ic, err := dedupgrpc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(ic.Unary))
	testgrpc.RegisterTestServiceServer(srv, svc)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(l)
	}()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-served
	})
	return testgrpc.NewTestServiceClient(conn)
}

func call(t *testing.T, c testgrpc.TestServiceClient, key string, size int32) (*testgrpc.SimpleResponse, metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, dedupgrpc.MetadataKey, key)
	}
	var hdr metadata.MD
	resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: size}, grpc.Header(&hdr))
	return resp, hdr, err
}

func TestOnceAndReplay(t *testing.T) {
	svc := &service{}
	c := start(t, svc, dedupgrpc.Config{})
	r1, h1, err := call(t, c, "k", 1)
	if err != nil || r1.GetUsername() != "order 1 for 1 bytes" || len(h1.Get(dedupgrpc.ReplayedKey)) != 0 {
		t.Fatal(r1, h1, err)
	}
	r2, h2, err := call(t, c, "k", 1)
	if err != nil || r2.GetUsername() != "order 1 for 1 bytes" || h2.Get(dedupgrpc.ReplayedKey)[0] != "true" {
		t.Fatal(r2, h2, err)
	}
	if _, _, err := call(t, c, "", 1); err != nil {
		t.Fatal(err)
	}
	if n := svc.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2 (one keyed, one unkeyed)", n)
	}
}

func TestRefusals(t *testing.T) {
	svc := &service{}
	c := start(t, svc, dedupgrpc.Config{})
	call(t, c, "k", 1)
	_, _, err := call(t, c, "k", 2)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "different request") {
		t.Fatalf("same key, other request: %v", err)
	}
	_, _, err = call(t, c, strings.Repeat("x", 300), 1)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "300 bytes long") {
		t.Fatalf("long key: %v", err)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), dedupgrpc.MetadataKey, "a", dedupgrpc.MetadataKey, "b")
	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("two keys: %v", err)
	}
}

func TestConcurrentCopiesRunOnce(t *testing.T) {
	svc := &service{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	c := start(t, svc, dedupgrpc.Config{})
	const copies = 6
	var wg sync.WaitGroup
	got := make([]string, copies)
	errs := make([]error, copies)
	for i := range copies {
		wg.Go(func() {
			r, _, err := call(t, c, "k", 3)
			got[i], errs[i] = r.GetUsername(), err
		})
	}
	// Wait until one copy runs the handler; then let it finish.
	select {
	case <-svc.entered:
	case <-time.After(time.Minute): // hang guard only
		t.Fatal("no copy reached the handler within a minute")
	}
	close(svc.block)
	wg.Wait()
	for i := range copies {
		if errs[i] != nil || got[i] != "order 1 for 3 bytes" {
			t.Fatalf("copy %d: %q, %v", i, got[i], errs[i])
		}
	}
	if n := svc.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

// TestRefusalsNotKept: by default an error did nothing, so it is not
// stored: a call refused as Unauthenticated, PermissionDenied,
// ResourceExhausted (a rate limit) or with any other error runs again on
// the retry.
func TestRefusalsNotKept(t *testing.T) {
	for _, code := range []codes.Code{codes.Unauthenticated, codes.PermissionDenied, codes.ResourceExhausted, codes.InvalidArgument, codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(code.String(), func(t *testing.T) {
			svc := &service{fail: func(n int64) error {
				if n == 1 {
					return status.Error(code, "refused")
				}
				return nil
			}}
			c := start(t, svc, dedupgrpc.Config{})
			if _, _, err := call(t, c, "k", 1); status.Code(err) != code {
				t.Fatal(err)
			}
			r, h, err := call(t, c, "k", 1)
			if err != nil || r.GetUsername() != "order 2 for 1 bytes" || len(h.Get(dedupgrpc.ReplayedKey)) != 0 {
				t.Fatalf("retry after %v: %v, %v, %v; want the handler run again", code, r, h, err)
			}
			if _, h, err := call(t, c, "k", 1); err != nil || len(h.Get(dedupgrpc.ReplayedKey)) != 1 {
				t.Fatalf("third call: %v, %v", h, err)
			}
			if n := svc.runs.Load(); n != 2 {
				t.Fatalf("%d runs, want 2", n)
			}
		})
	}
}

// TestKeptErrorReplaysDetails: an error that Config.Keep keeps is replayed
// with its code, message and details.
func TestKeptErrorReplaysDetails(t *testing.T) {
	detail := &testgrpc.SimpleResponse{Username: "field amount: must be positive"}
	svc := &service{fail: func(n int64) error {
		st, err := status.New(codes.FailedPrecondition, "no such product").WithDetails(protoadapt.MessageV1Of(detail))
		if err != nil {
			return err
		}
		return st.Err()
	}}
	c := start(t, svc, dedupgrpc.Config{Keep: func(c codes.Code) bool { return c == codes.FailedPrecondition }})
	if _, _, err := call(t, c, "k", 1); status.Code(err) != codes.FailedPrecondition {
		t.Fatal(err)
	}
	_, h, err := call(t, c, "k", 1)
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "no such product" || h.Get(dedupgrpc.ReplayedKey)[0] != "true" {
		t.Fatalf("replayed error: %v, %v", err, h)
	}
	ds := st.Details()
	if len(ds) != 1 {
		t.Fatalf("replayed details %v, want the one the handler sent", ds)
	}
	if got, ok := ds[0].(*testgrpc.SimpleResponse); !ok || got.GetUsername() != detail.GetUsername() {
		t.Fatalf("replayed detail %#v", ds[0])
	}
	if n := svc.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func TestTooLargeReply(t *testing.T) {
	svc := &service{}
	c := start(t, svc, dedupgrpc.Config{MaxStoredReply: 4})
	if _, _, err := call(t, c, "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := call(t, c, "k", 1); status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "too large") {
		t.Fatal(err)
	}
}

// down is a MemoryStore whose Claim fails, to test how the interceptor
// treats an unreachable store.
type down struct{ *dedup.MemoryStore }

func (down) Claim(context.Context, string, dedup.Fingerprint, time.Duration) (dedup.Claim, error) {
	return dedup.Claim{}, errors.New("connection refused")
}

func TestStoreDown(t *testing.T) {
	svc := &service{}
	c := start(t, svc, dedupgrpc.Config{Store: down{dedup.NewMemoryStore(dedup.MemoryOptions{})}})
	if _, _, err := call(t, c, "k", 1); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "connection refused") {
		t.Fatal(err)
	}
	if svc.runs.Load() != 0 {
		t.Fatal("the handler ran without a claim")
	}
}

// TestReplayFromRegistry: a process that has not run the method itself
// (a restarted replica sharing the store) replays with the type from the
// protobuf registry.
func TestReplayFromRegistry(t *testing.T) {
	store := dedup.NewMemoryStore(dedup.MemoryOptions{})
	c1 := start(t, &service{}, dedupgrpc.Config{Store: store})
	if _, _, err := call(t, c1, "k", 1); err != nil {
		t.Fatal(err)
	}
	svc2 := &service{}
	c2 := start(t, svc2, dedupgrpc.Config{Store: store})
	r, h, err := call(t, c2, "k", 1)
	if err != nil || r.GetUsername() != "order 1 for 1 bytes" || h.Get(dedupgrpc.ReplayedKey)[0] != "true" || svc2.runs.Load() != 0 {
		t.Fatal(r, h, err)
	}
}

// TestDefaultScopeCredentials: with Scope nil, two users who send the
// same key and request each get their own call; a user's retry replays
// their own.
func TestDefaultScopeCredentials(t *testing.T) {
	svc := &service{}
	c := start(t, svc, dedupgrpc.Config{})
	as := func(token string) (string, bool) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, dedupgrpc.MetadataKey, "k", "authorization", "Bearer "+token)
		var hdr metadata.MD
		r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 1}, grpc.Header(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		return r.GetUsername(), len(hdr.Get(dedupgrpc.ReplayedKey)) > 0
	}
	for i, want := range []struct {
		token, reply string
		replayed     bool
	}{
		{"alice", "order 1 for 1 bytes", false},
		{"bob", "order 2 for 1 bytes", false},
		{"alice", "order 1 for 1 bytes", true},
	} {
		if got, rep := as(want.token); got != want.reply || rep != want.replayed {
			t.Fatalf("call %d as %s: %q, replayed %v; want %q, %v", i, want.token, got, rep, want.reply, want.replayed)
		}
	}
}

// TestRefuseInProgress: with RefuseInProgress a copy that finds its key
// held is answered Aborted at once.
func TestRefuseInProgress(t *testing.T) {
	svc := &service{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	c := start(t, svc, dedupgrpc.Config{Options: dedup.Options{InProgress: dedup.RefuseInProgress}})
	done := make(chan error, 1)
	go func() {
		_, _, err := call(t, c, "k", 1)
		done <- err
	}()
	<-svc.entered
	if _, _, err := call(t, c, "k", 1); status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "still in progress") {
		t.Fatalf("a copy while the first runs: %v", err)
	}
	close(svc.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := svc.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

// TestRequireKey: with RequireKey a call without a key is refused.
func TestRequireKey(t *testing.T) {
	svc := &service{}
	c := start(t, svc, dedupgrpc.Config{RequireKey: true})
	if _, _, err := call(t, c, "", 1); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), dedupgrpc.MetadataKey) {
		t.Fatal(err)
	}
	if _, _, err := call(t, c, "k", 1); err != nil {
		t.Fatal(err)
	}
	if n := svc.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}
