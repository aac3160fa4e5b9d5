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

// generated stands in for the package protoc generates for a service, so
// that the snippets' pb.NewYourServiceClient compiles here.
type generated struct{}

func (generated) NewYourServiceClient(cc grpc.ClientConnInterface) testgrpc.TestServiceClient {
	return testgrpc.NewTestServiceClient(cc)
}

// grpcBackends starts n real gRPC servers on loopback and returns their
// addresses.
func grpcBackends(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(srv, testService{})
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		addrs = append(addrs, lis.Addr().String())
	}
	return addrs
}

const unaryCall = "/grpc.testing.TestService/UnaryCall"

// TestGRPCSnippet runs the README's hedgegrpc.Dial snippet against three
// real gRPC servers on loopback.
func TestGRPCSnippet(t *testing.T) {
	addrs := grpcBackends(t, 3)
	var pb generated

	// addrs: each backend's own address, such as "10.0.0.1:50051".
	conns, err := hedgegrpc.Dial(addrs, hedge.Config{},
		hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))) // or your TLS credentials
	if err != nil {
		log.Fatal(err)
	}
	defer conns.Close()
	client := pb.NewYourServiceClient(conns.Conn()) // each copy of a call on another backend

	resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	if err != nil || resp.GetUsername() != "replica" {
		t.Fatalf("UnaryCall = %v, %v", resp, err)
	}
	h := conns.Interceptor().Hedger(unaryCall)
	if h == nil || h.Replicas() != 3 {
		t.Fatalf("Hedger for %s = %v, want one over 3 replicas", unaryCall, h)
	}
	if st := h.OpStats(unaryCall); st.Requests != 1 {
		t.Fatalf("stats %v, want one request", st)
	}
}

// TestGRPCServiceConfigSnippet runs the transports guide's service-config
// snippet against three real gRPC servers on loopback.
func TestGRPCServiceConfigSnippet(t *testing.T) {
	addrs := grpcBackends(t, 3)
	var pb generated
	serviceConfigJSON := `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.010s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}`

	sc, err := hedgegrpc.ParseServiceConfig(serviceConfigJSON) // errors name the field; sc.Warnings lists near misses
	if err != nil {
		log.Fatal(err)
	}
	// One conn per backend, so that each copy of a call goes to a different one.
	conns, err := hedgegrpc.DialServiceConfig(addrs, sc, hedge.Config{},
		hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))) // or your TLS credentials
	if err != nil {
		log.Fatal(err)
	}
	defer conns.Close()
	client := pb.NewYourServiceClient(conns.Conn())

	resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	if err != nil || resp.GetUsername() != "replica" {
		t.Fatalf("UnaryCall = %v, %v", resp, err)
	}
	h := conns.Interceptor().Hedger(unaryCall)
	if h == nil {
		t.Fatalf("no Hedger for %s: the service config was not applied", unaryCall)
	}
	if st := h.OpStats(unaryCall); st.Requests != 1 {
		t.Fatalf("stats %v, want one request", st)
	}
	if len(sc.Warnings) != 0 {
		t.Fatalf("warnings for a correct config: %v", sc.Warnings)
	}
}
