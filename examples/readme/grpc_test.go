package readme

import (
	"context"
	"log"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

// testService answers UnaryCall with its own name.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (testService) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Username: "replica"}, nil
}

// TestGRPCSnippet runs the README's hedgegrpc snippet against a real gRPC
// server on loopback.
func TestGRPCSnippet(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, testService{})
	go srv.Serve(lis)
	defer srv.Stop()
	target := lis.Addr().String()
	serviceConfigJSON := `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.010s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`

	sc, err := hedgegrpc.ParseServiceConfig(serviceConfigJSON) // errors name the field; sc.Warnings lists near misses
	if err != nil {
		log.Fatal(err)
	}
	ic, err := hedgegrpc.NewFromServiceConfig(sc, hedge.Config{})
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()), // or your TLS credentials
		grpc.WithUnaryInterceptor(ic.Unary))

	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	if err != nil || resp.GetUsername() != "replica" {
		t.Fatalf("UnaryCall = %v, %v", resp, err)
	}
	const method = "/grpc.testing.TestService/UnaryCall"
	h := ic.Hedger(method)
	if h == nil {
		t.Fatalf("no Hedger for %s: the service config was not applied", method)
	}
	if st := h.Stats(); len(st) != 1 || st[0].Requests != 1 {
		t.Fatalf("stats %v, want one request", st)
	}
	if len(sc.Warnings) != 0 {
		t.Fatalf("warnings for a correct config: %v", sc.Warnings)
	}
}
