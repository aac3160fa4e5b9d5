package hedgegrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/protobuf/proto"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

// ParseServiceConfig reads gRPC's own service config: the hedging policy
// of each method, with gRPC's precedence, and the channel's throttle. A
// mistake is reported with the field it is in.
func ExampleParseServiceConfig() {
	sc, err := hedgegrpc.ParseServiceConfig(`{
		"methodConfig": [
			{"name": [{"service": "grpc.testing.TestService"}],
			 "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.010s", "nonFatalStatusCodes": ["UNAVAILABLE", "ABORTED"]}},
			{"name": [{"service": "grpc.testing.TestService", "method": "EmptyCall"}], "timeout": "1s"}
		],
		"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
	}`)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range []string{
		"/grpc.testing.TestService/UnaryCall",
		"/grpc.testing.TestService/EmptyCall",
		"/other.Service/Get",
	} {
		fmt.Printf("%s: %v\n", m, sc.Lookup(m))
	}
	fmt.Println(sc.RetryThrottling)

	_, err = hedgegrpc.ParseServiceConfig(`{"methodConfig": [{"name": [{}],
		"hedgingPolicy": {"maxAttempts": 1, "hedgingDelay": "10ms"}}]}`)
	fmt.Println(err)
	// Output:
	// /grpc.testing.TestService/UnaryCall: hedgingPolicy{maxAttempts: 3, hedgingDelay: 10ms, nonFatalStatusCodes: [UNAVAILABLE ABORTED]}
	// /grpc.testing.TestService/EmptyCall: not hedged
	// /other.Service/Get: not hedged
	// retryThrottling{maxTokens: 10, tokenRatio: 0.1}
	// hedgegrpc: service config: methodConfig[0].hedgingPolicy.maxAttempts: 1 is below 2: hedging needs the primary and at least one hedge; use 2
	// hedgegrpc: service config: methodConfig[0].hedgingPolicy.hedgingDelay: "10ms" is not a duration: a service config gives seconds with an "s" suffix; write "0.010s"
}

// WithReplicas sends the copies of a call to different backends, one
// ClientConn per backend. The conns are dialed with an interceptor that
// calls the Interceptor made from them; any conn may then serve as the
// client's, and the Interceptor passes its own copies through on the
// others.
func ExampleWithReplicas() {
	addrs := []string{"replica-a.example:50051", "replica-b.example:50051", "replica-c.example:50051"}
	h, err := hedge.New(hedge.Config{
		Replicas:  len(addrs),
		Retryable: hedgegrpc.NonFatal(codes.Unavailable),
	})
	if err != nil {
		log.Fatal(err)
	}
	var ic *hedgegrpc.Interceptor // set below, before the first call
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return ic.Unary(ctx, method, req, reply, cc, invoker, opts...)
	}
	conns := make([]*grpc.ClientConn, len(addrs))
	for i, addr := range addrs {
		conns[i], err = grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUnaryInterceptor(unary))
		if err != nil {
			log.Fatal(err)
		}
		defer conns[i].Close()
	}
	if ic, err = hedgegrpc.New(h, hedgegrpc.WithReplicas(conns...)); err != nil {
		log.Fatal(err)
	}

	client := testgrpc.NewTestServiceClient(conns[0])
	resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{FillServerId: true})
	fmt.Println(resp.GetServerId(), err)
	st := ic.Hedger("/grpc.testing.TestService/UnaryCall").OpStats("/grpc.testing.TestService/UnaryCall")
	fmt.Println("hedges:", st.Hedges, "hedge wins:", st.HedgeWins)
}

// echoService answers UnaryCall with an empty response.
type echoService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echoService) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{}, nil
}

// LoadReportInterceptor makes a gRPC server without a queue of the
// toolkit's report its load with every answer, as an ORCA report in the
// trailer, which a hedgegrpc.Interceptor with WithReplicas reads. The
// server needs orca.CallMetricsServerOption(nil), and the interceptor
// chained after it. Here a plain client reads the report.
func ExampleLoadReportInterceptor() {
	lr, err := hedgegrpc.LoadReportInterceptor(16) // the server runs 16 calls at once
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(lr))
	testgrpc.RegisterTestServiceServer(srv, echoService{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	var trailer metadata.MD
	if _, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer)); err != nil {
		log.Fatal(err)
	}
	r := new(v3orcapb.OrcaLoadReport)
	if err := proto.Unmarshal([]byte(trailer.Get(hedgegrpc.LoadReportKey)[0]), r); err != nil {
		log.Fatal(err)
	}
	m := r.GetNamedMetrics()
	fmt.Println("running", m[hedgegrpc.RunningMetric], "queued", m[hedgegrpc.QueuedMetric],
		"workers", m[hedgegrpc.WorkersMetric], "done", m[hedgegrpc.DoneMetric])
	// Output: running 0 queued 0 workers 16 done 0
}
