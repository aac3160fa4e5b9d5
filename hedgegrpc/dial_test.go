package hedgegrpc_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

var insecureCreds = hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))

// Dial's mistakes are reported at once, each saying what to do, and no
// conn is left open.
func TestDialErrors(t *testing.T) {
	two := []string{"127.0.0.1:1", "127.0.0.1:2"}
	cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for _, tc := range []struct {
		name  string
		addrs []string
		cfg   hedge.Config
		opts  []hedgegrpc.Option
		want  string
	}{
		{"one address", two[:1], hedge.Config{}, []hedgegrpc.Option{insecureCreds}, "at least two"},
		{"twice", []string{two[0], two[0]}, hedge.Config{}, []hedgegrpc.Option{insecureCreds}, "given twice"},
		{"empty", []string{two[0], ""}, hedge.Config{}, []hedgegrpc.Option{insecureCreds}, "address 1 is empty"},
		{"replicas", two, hedge.Config{Replicas: 3}, []hedgegrpc.Option{insecureCreds}, "leave Replicas at 0"},
		{"no credentials", two, hedge.Config{}, nil, "WithDialOptions"},
		{"own conns", two, hedge.Config{}, []hedgegrpc.Option{insecureCreds, hedgegrpc.WithReplicas(cc, cc)}, "WithReplicas given to Dial"},
		{"bad config", two, hedge.Config{MaxAttempts: -1}, []hedgegrpc.Option{insecureCreds}, "hedgegrpc: Config:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := hedgegrpc.Dial(tc.addrs, tc.cfg, tc.opts...)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one that says %q", err, tc.want)
			}
		})
	}
	h := mustHedger(t, hedge.Config{})
	if _, err := hedgegrpc.New(h, insecureCreds); err == nil || !strings.Contains(err.Error(), "WithDialOptions is for Dial") {
		t.Errorf("New with WithDialOptions: %v", err)
	}
}

// DialServiceConfig hedges the methods the service config names, each
// copy on its own backend: three copies at once reach three backends.
func TestDialServiceConfig(t *testing.T) {
	sc, err := hedgegrpc.ParseServiceConfig(`{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0s"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy waits until all three have arrived, so none wins before
	// each backend has seen one.
	all := make(chan struct{})
	var n atomic.Int64
	backends := startBackends(t, 3, func(ctx context.Context, b *backend, attempt string) (*testgrpc.SimpleResponse, error) {
		if n.Add(1) == 3 {
			close(all)
		}
		select {
		case <-all:
			return b.reply(attempt), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	var addrs []string
	for _, b := range backends {
		addrs = append(addrs, b.addr)
	}
	conns, err := hedgegrpc.DialServiceConfig(addrs, sc, hedge.Config{NoBudget: true}, insecureCreds)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	if got := len(conns.Conns()); got != 3 {
		t.Fatalf("%d conns, want 3", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := testgrpc.NewTestServiceClient(conns.Conn()).UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		if got := len(b.seen()); got != 1 {
			t.Errorf("backend %s saw %d copies, want 1", b.id, got)
		}
	}
	if r := conns.Interceptor().Hedger("/grpc.testing.TestService/UnaryCall").Replicas(); r != 3 {
		t.Errorf("the Hedger has %d replicas, want 3", r)
	}
}
