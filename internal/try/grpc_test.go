package try

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	rpbalpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/tailcut/hedge/internal/drill"
)

// grpcReplica is a loopback gRPC server of grpc.testing.TestService for
// the tests: UnaryCall answers at once, except every stallEvery-th call it
// receives, which it holds for stall (or until the call is cancelled);
// with exhausted set it answers RESOURCE_EXHAUSTED instead.
type grpcReplica struct {
	grpc_testing.UnimplementedTestServiceServer
	stallEvery int64
	stall      time.Duration
	exhausted  bool
	n          atomic.Int64
	mu         sync.Mutex
	md         []metadata.MD
}

func (s *grpcReplica) UnaryCall(ctx context.Context, req *grpc_testing.SimpleRequest) (*grpc_testing.SimpleResponse, error) {
	n := s.n.Add(1)
	s.mu.Lock()
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(s.md) < 10 {
		s.md = append(s.md, md)
	}
	s.mu.Unlock()
	if s.exhausted {
		return nil, status.Error(codes.ResourceExhausted, "slow down")
	}
	if s.stallEvery > 0 && n%s.stallEvery == 0 {
		t := time.NewTimer(s.stall)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return &grpc_testing.SimpleResponse{Payload: &grpc_testing.Payload{Body: make([]byte, req.GetResponseSize())}}, nil
}

// Reflection offered by a test server.
const (
	reflectBoth = iota
	reflectV1alphaOnly
	reflectNone
)

// startGRPCReplicas starts n gRPC replicas on loopback, stopped when the
// test ends.
func startGRPCReplicas(t *testing.T, n, refl int, set func(i int, r *grpcReplica)) ([]*grpcReplica, []string) {
	t.Helper()
	var reps []*grpcReplica
	var addrs []string
	for i := range n {
		r := &grpcReplica{}
		if set != nil {
			set(i, r)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		grpc_testing.RegisterTestServiceServer(srv, r)
		switch refl {
		case reflectBoth:
			reflection.Register(srv)
		case reflectV1alphaOnly:
			rpbalpha.RegisterServerReflectionServer(srv, reflection.NewServer(reflection.ServerOptions{Services: srv}))
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Stop(); <-done })
		reps = append(reps, r)
		addrs = append(addrs, l.Addr().String())
	}
	return reps, addrs
}

const unaryCall = "grpc.testing.TestService/UnaryCall"

func grpcOptions(addrs []string, a []Arm) Options {
	return Options{
		Replicas: addrs, Arms: a,
		GRPC: &GRPCOptions{Method: unaryCall, Requests: []string{`{"responseSize": 10}`, `{"response_size": 20, "payload": {"body": "aGVsbG8="}}`}, Idempotent: true},
		Rate: 200, Ramp: 500 * time.Millisecond, Warmup: 1500 * time.Millisecond, Duration: 2500 * time.Millisecond,
		Timeout: 5 * time.Second, Seed: 11, Resamples: 1000,
	}
}

func sentCalls(reps []*grpcReplica) int64 {
	var n int64
	for _, r := range reps {
		n += r.n.Load()
	}
	return n
}

// One replica of three holds every 8th of its calls for 80 ms. The arm
// with a fixed delay hedges from the first call: TAIL CUT on any machine.
func TestGRPCStallsTailCut(t *testing.T) {
	_, addrs := startGRPCReplicas(t, 3, reflectBoth, func(i int, r *grpcReplica) {
		if i == 2 {
			r.stallEvery, r.stall = 8, 80*time.Millisecond
		}
	})
	o := grpcOptions(addrs, arms(t, "none,fixed:10ms"))
	o.Rate, o.MaxRate, o.AllowHighRate, o.Duration = 250, 250, true, 8*time.Second // 1,000 calls an arm: a p99 of ten, whose interval is sure of the cut
	res := carried(t, []int{0, 1}, 20*time.Millisecond, func() *Result {
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	})
	logSummary(t, res)
	none, fixed := armByName(t, res, "none"), armByName(t, res, "fixed:10ms")
	t.Logf("gRPC: fixed:10ms p99 ratio %.2f (%.2f-%.2f)", fixed.P99.Ratio, fixed.P99.RatioLo, fixed.P99.RatioHi)
	if fixed.Verdict != drill.TailCut {
		t.Errorf("fixed: verdict %s (%s), want %s", fixed.Verdict, fixed.Why, drill.TailCut)
	}
	if fixed.Hedges == 0 || fixed.HedgeWins == 0 || none.Hedges != 0 {
		t.Errorf("fixed: %d hedges, %d wins; none: %d hedges; want some, some, none", fixed.Hedges, fixed.HedgeWins, none.Hedges)
	}
	if none.Errors != 0 || none.Statuses["OK"] != none.Requests {
		t.Errorf("none: %d errors, statuses %v of %d requests; want every call OK", none.Errors, none.Statuses, none.Requests)
	}
	if res.Protocol != ProtocolGRPC || res.Methods["/"+unaryCall] != 2 {
		t.Errorf("protocol %q, methods %v", res.Protocol, res.Methods)
	}
	if res.Replica[2].P99 < 50*time.Millisecond {
		t.Errorf("the stalling replica's copy p99 is %v, want its stalls to show", res.Replica[2].P99)
	}
}

func TestGRPCNoStallsNoTailCut(t *testing.T) {
	_, addrs := startGRPCReplicas(t, 3, reflectBoth, nil)
	res, err := Run(context.Background(), grpcOptions(addrs, arms(t, "none,default")))
	if err != nil {
		t.Fatal(err)
	}
	logSummary(t, res)
	if def := armByName(t, res, "default"); def.Verdict == drill.TailCut {
		t.Errorf("default: verdict %s (%s) without stalls", def.Verdict, def.Why)
	}
}

// Without --idempotent, and for a streaming method, nothing is sent.
func TestGRPCRefused(t *testing.T) {
	reps, addrs := startGRPCReplicas(t, 2, reflectBoth, nil)
	o := grpcOptions(addrs, arms(t, "none,default"))
	o.GRPC.Idempotent = false
	_, err := Run(context.Background(), o)
	if !errors.Is(err, ErrNotIdempotent) || !strings.Contains(err.Error(), "--idempotent") {
		t.Errorf("not idempotent: error %v, want ErrNotIdempotent saying --idempotent", err)
	}
	o = grpcOptions(addrs, arms(t, "none,default"))
	o.GRPC.Method = "grpc.testing.TestService/StreamingOutputCall"
	_, err = Run(context.Background(), o)
	if !errors.Is(err, ErrStreaming) {
		t.Errorf("streaming method: error %v, want ErrStreaming", err)
	}
	o = grpcOptions(addrs, arms(t, "none,default"))
	o.GRPC.Method = "grpc.testing.TestService/NoSuchCall"
	_, err = Run(context.Background(), o)
	if !errors.Is(err, ErrDescriptors) || !strings.Contains(err.Error(), "UnaryCall") {
		t.Errorf("unknown method: error %v, want ErrDescriptors listing the methods", err)
	}
	o = grpcOptions(addrs, arms(t, "none,default"))
	o.GRPC.Requests = []string{`{"responseSize": "many"}`}
	_, err = Run(context.Background(), o)
	if !errors.Is(err, ErrTargets) {
		t.Errorf("bad request JSON: error %v, want ErrTargets", err)
	}
	for _, bad := range []Options{
		{Replicas: []string{"http://" + addrs[0], addrs[1]}, Arms: o.Arms, GRPC: &GRPCOptions{Method: unaryCall, Requests: []string{"{}"}, Idempotent: true}},
		{Replicas: addrs, Arms: o.Arms, GRPC: &GRPCOptions{Method: "UnaryCall", Requests: []string{"{}"}, Idempotent: true}},
		{Replicas: addrs, Arms: o.Arms, GRPC: &GRPCOptions{Method: unaryCall, Idempotent: true}},
		{Replicas: addrs, Arms: o.Arms, GRPC: &GRPCOptions{Method: unaryCall, Requests: []string{"{}"}, Idempotent: true}, Targets: gets("/")},
		{Replicas: addrs, Arms: o.Arms, GRPC: &GRPCOptions{Method: unaryCall, Requests: []string{"{}"}, Idempotent: true}, Header: http.Header{"Grpc-Timeout": {"1S"}}},
	} {
		if _, err := Run(context.Background(), bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: error %v, want ErrInvalid", bad, err)
		}
	}
	if n := sentCalls(reps); n != 0 {
		t.Errorf("%d calls of the method sent by refused runs", n)
	}
}

// protoset returns the descriptor set of grpc.testing.TestService, its
// imports included, as protoc --include_imports -o would write it.
func protoset(t *testing.T) []byte {
	t.Helper()
	var set descriptorpb.FileDescriptorSet
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	add(grpc_testing.File_grpc_testing_test_proto)
	b, err := proto.Marshal(&set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The method's descriptors come from server reflection (v1, or v1alpha
// alone) or from a descriptor set, for servers without reflection; the
// metadata reaches the replicas and no output.
func TestGRPCDescriptors(t *testing.T) {
	const secret = "grpc-s3cr3t"
	short := func(addrs []string) Options {
		o := grpcOptions(addrs, arms(t, "none,default"))
		o.Rate, o.Ramp, o.Warmup, o.Duration = 100, 0, 0, 300*time.Millisecond
		return o
	}
	check := func(name string, reps []*grpcReplica, res *Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n, ok := 0, 0
		for _, a := range res.Arms {
			n += a.Requests
			ok += a.Statuses["OK"]
		}
		if n == 0 || ok != n || sentCalls(reps) == 0 {
			t.Errorf("%s: %d requests, %d OK, %d calls received", name, n, ok, sentCalls(reps))
		}
	}
	reps, addrs := startGRPCReplicas(t, 2, reflectBoth, nil)
	o := short(addrs)
	o.Header = http.Header{"Authorization": {"Bearer " + secret}, "X-Tenant": {"blue"}}
	res, err := Run(context.Background(), o)
	check("reflection v1", reps, res, err)
	for _, r := range reps {
		r.mu.Lock()
		for _, md := range r.md {
			if a, x := md.Get("authorization"), md.Get("x-tenant"); len(a) != 1 || a[0] != "Bearer "+secret || len(x) != 1 || x[0] != "blue" {
				t.Errorf("a replica got metadata %v", md)
			}
		}
		r.mu.Unlock()
	}
	dir := t.TempDir()
	paths, err := res.WriteFiles(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	res.WriteSummary(&sum)
	outs := []string{sum.String()}
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		outs = append(outs, string(b))
	}
	for i, s := range outs {
		if strings.Contains(s, secret) {
			t.Errorf("output %d holds the credential", i)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "report.md")); !strings.Contains(string(b), "`Authorization`, `X-Tenant`") || strings.Contains(string(b), "blue") || !strings.Contains(string(b), "hedgegrpc") {
		t.Errorf("report.md:\n%s", b)
	}

	reps, addrs = startGRPCReplicas(t, 2, reflectV1alphaOnly, nil)
	res, err = Run(context.Background(), short(addrs))
	check("reflection v1alpha", reps, res, err)

	reps, addrs = startGRPCReplicas(t, 2, reflectNone, nil)
	_, err = Run(context.Background(), short(addrs))
	if !errors.Is(err, ErrDescriptors) || !strings.Contains(err.Error(), "--protoset") {
		t.Errorf("no reflection: error %v, want ErrDescriptors naming --protoset", err)
	}
	o = short(addrs)
	o.GRPC.Protoset = protoset(t)
	res, err = Run(context.Background(), o)
	check("protoset", reps, res, err)

	o.GRPC.Protoset = []byte("not a descriptor set")
	if _, err := Run(context.Background(), o); !errors.Is(err, ErrDescriptors) {
		t.Errorf("bad protoset: error %v, want ErrDescriptors", err)
	}
}

// RESOURCE_EXHAUSTED backs the load off, as 429 does.
func TestGRPCPushbackBacksOff(t *testing.T) {
	_, addrs := startGRPCReplicas(t, 2, reflectBoth, func(_ int, r *grpcReplica) { r.exhausted = true })
	o := grpcOptions(addrs, arms(t, "none,default"))
	o.Rate, o.Ramp, o.Warmup, o.Duration = 100, 0, 0, 2*time.Second
	res, err := Run(context.Background(), o)
	if err != nil && !errors.Is(err, ErrServiceFailing) {
		t.Fatal(err)
	}
	if len(res.Backoff) == 0 || res.Pushback == 0 {
		t.Fatalf("no back-off recorded (%d pushbacks)", res.Pushback)
	}
	if res.Sent > 100 {
		t.Errorf("%d calls sent in 2 s at 100/s under constant pushback; want the rate halved each second", res.Sent)
	}
	if k := res.Arms[0].ErrorKinds["status RESOURCE_EXHAUSTED"]; k == 0 {
		t.Errorf("error kinds %v, want RESOURCE_EXHAUSTED counted", res.Arms[0].ErrorKinds)
	}
}
