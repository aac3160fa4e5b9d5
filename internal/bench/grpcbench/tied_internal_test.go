package grpcbench

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/tied"
	"github.com/tailcut/hedge/tied/tiedgrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Received counts the application's calls and not the claims between the
// servers, under either name of the claim method: ClaimMethod, or
// CancelMethod, which servers of earlier versions call.
func TestTiedReceivedExcludesClaims(t *testing.T) {
	secret := []byte("a secret the bench servers share, 32 bytes or more")
	tb, err := StartTied(bench.TiedBackendOptions{Replicas: 2, Workers: 1, MaxQueue: 16, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	b := tb.(*TiedBackend)
	defer b.Close()
	cc, err := grpc.NewClient(b.addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	//lint:ignore SA1019 servers of earlier versions still claim at the deprecated method, which must keep working
	for _, m := range []string{tiedgrpc.ClaimMethod, tiedgrpc.CancelMethod} {
		msg := tied.Claim{ID: tied.NewID(), Ticket: 1, Sent: time.Now()}.Sign(secret)
		out := new(wrapperspb.StringValue)
		if err := cc.Invoke(ctx, m, wrapperspb.String(msg), out); err != nil || out.GetValue() != tied.VerdictGo.String() {
			t.Errorf("claim by %s: %q, %v; want go", m, out.GetValue(), err)
		}
	}
	if n := b.Received(); n != 0 {
		t.Errorf("Received() = %d after two claims, want 0", n)
	}
	if _, err := testgrpc.NewTestServiceClient(cc).UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := b.Received(); n != 1 {
		t.Errorf("Received() = %d after one call, want 1", n)
	}
	if s := b.Servers()[0].Stats(); s.ClaimsReceived != 2 {
		t.Errorf("%+v, want 2 claims received", s)
	}
}

// With Spare, the default client's calls go through each replica's
// spare.Limiter.
func TestTiedSpareServes(t *testing.T) {
	secret := []byte("a secret the bench servers share, 32 bytes or more")
	tb, err := StartTied(bench.TiedBackendOptions{Replicas: 2, Workers: 1, MaxQueue: 16, Secret: secret, Spare: true})
	if err != nil {
		t.Fatal(err)
	}
	b := tb.(*TiedBackend)
	defer b.Close()
	call, closeFn, err := b.NewCaller(bench.SpareConfig, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 5 {
		if err := call(ctx, i, time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	var primaries int64
	for _, l := range b.Limiters() {
		primaries += l.Stats().Primaries
	}
	if len(b.Limiters()) != 2 || primaries != 5 {
		t.Fatalf("%d limiters ran %d primaries, want 2 and 5", len(b.Limiters()), primaries)
	}
}
