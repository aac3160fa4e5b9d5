package hedgegrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

// stallFirst is a backend whose primaries stall until cancelled and whose
// hedges answer, once a primary has arrived, with the backend's name.
type stallFirst struct {
	testgrpc.UnimplementedTestServiceServer
	name    string
	arrived chan struct{} // closed by the first primary, on any backend
	once    *sync.Once
	primary chan string // the name of the first primary's backend
}

func (s stallFirst) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(hedgegrpc.AttemptKey)) == 0 { // the primary
		s.once.Do(func() { s.primary <- s.name; close(s.arrived) })
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	select {
	case <-s.arrived:
		return &testgrpc.SimpleResponse{ServerId: s.name}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// Dial makes one ClientConn per backend, wired so that each copy of a
// call goes to a different backend. Here three backends run on loopback;
// the primary of the call stalls wherever it lands, and the hedge,
// sent after 10 ms to another backend, answers.
func ExampleDial() {
	arrived, once, primary := make(chan struct{}), new(sync.Once), make(chan string, 1)
	var addrs []string
	for _, name := range []string{"a", "b", "c"} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		srv := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(srv, stallFirst{name: name, arrived: arrived, once: once, primary: primary})
		go srv.Serve(lis)
		defer srv.Stop()
		addrs = append(addrs, lis.Addr().String())
	}

	conns, err := hedgegrpc.Dial(addrs, hedge.Config{
		Delay:     hedge.Fixed(10 * time.Millisecond),
		Retryable: hedgegrpc.NonFatal(codes.Unavailable),
	}, hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))) // or your TLS credentials
	if err != nil {
		log.Fatal(err)
	}
	defer conns.Close()

	client := testgrpc.NewTestServiceClient(conns.Conn())
	resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("answered by the hedge, on another backend than the primary's:", resp.GetServerId() != <-primary)
	const method = "/grpc.testing.TestService/UnaryCall"
	st := conns.Interceptor().Hedger(method).OpStats(method)
	fmt.Println("replicas:", conns.Interceptor().Hedger(method).Replicas(), "hedges:", st.Hedges, "hedge wins:", st.HedgeWins)
	// Output:
	// answered by the hedge, on another backend than the primary's: true
	// replicas: 3 hedges: 1 hedge wins: 1
}
