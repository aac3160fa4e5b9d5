package shardbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tailcut/hedge/internal/bench"
)

// ServerEnv is the environment variable that turns a process into the
// servers of a Backend: MaybeServe, called first thing by the program
// Start runs, serves when it is set and exits. Its value is the kind and
// the number of servers, "http:60" or "grpc:60".
const ServerEnv = "HEDGE_BENCH_SHARD_SERVERS"

// hello is the line the server process writes to its standard output
// once it listens: the address of its control server and of each server.
type hello struct {
	Control string   `json:"control"`
	Servers []string `json:"servers"`
}

// MaybeServe serves the servers of a Backend and exits, if ServerEnv is
// set; otherwise it returns at once. A program that Start runs (by
// default the running executable) must call it before anything else: the
// hedge command calls it from an init function, a test binary from
// TestMain.
func MaybeServe() {
	v, ok := os.LookupEnv(ServerEnv)
	if !ok {
		return
	}
	if err := serve(v, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "shard servers: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// parseSpec reads ServerEnv's value.
func parseSpec(v string) (kind string, n int, err error) {
	kind, num, ok := cutColon(v)
	n, aerr := strconv.Atoi(num)
	if !ok || aerr != nil || n < 1 || n > MaxServers || (kind != KindHTTP && kind != KindGRPC) {
		return "", 0, fmt.Errorf("%s=%q: want http:N or grpc:N, N from 1 to %d", ServerEnv, v, MaxServers)
	}
	return kind, n, nil
}

func cutColon(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// serve runs the servers and the control server until stdin ends (the
// parent closed it, or died) or SIGTERM comes.
func serve(spec string, stdin io.Reader, stdout io.Writer) error {
	kind, n, err := parseSpec(spec)
	if err != nil {
		return err
	}
	s := &servers{gates: make([]*bench.Gate, n), served: make([]atomic.Int64, n)}
	for i := range n {
		s.gates[i] = &bench.Gate{}
	}
	defer s.close()
	var addrs []string
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
		addrs = append(addrs, l.Addr().String())
		switch kind {
		case KindHTTP:
			srv := &http.Server{Handler: s.httpHandler(i), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
			s.httpServers = append(s.httpServers, srv)
			s.wg.Go(func() { _ = srv.Serve(l) })
		case KindGRPC:
			srv := grpc.NewServer()
			testgrpc.RegisterTestServiceServer(srv, &service{gate: s.gates[i], served: &s.served[i]})
			s.grpcServers = append(s.grpcServers, srv)
			s.wg.Go(func() { _ = srv.Serve(l) })
		}
	}
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("control server: %w", err)
	}
	ctrl := &http.Server{Handler: s.control(), ReadHeaderTimeout: 10 * time.Second}
	s.httpServers = append(s.httpServers, ctrl)
	s.wg.Go(func() { _ = ctrl.Serve(cl) })
	line, _ := json.Marshal(hello{Control: cl.Addr().String(), Servers: addrs})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(term)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(stdin))
		close(eof)
	}()
	select {
	case <-eof:
	case <-term:
	}
	return nil
}

// servers are the running servers of one process.
type servers struct {
	gates       []*bench.Gate
	served      []atomic.Int64
	httpServers []*http.Server
	grpcServers []*grpc.Server
	wg          sync.WaitGroup
}

// close ends the stalls and stops every server.
func (s *servers) close() {
	for _, g := range s.gates {
		g.Close()
	}
	for _, srv := range s.httpServers {
		_ = srv.Close()
	}
	for _, srv := range s.grpcServers {
		srv.Stop()
	}
	s.wg.Wait()
}

// value is what every read answers.
var value = bench.ItemValue()

// httpHandler serves GET /item?k=N on server i, once no stall is on.
func (s *servers) httpHandler(i int) http.Handler {
	g := s.gates[i]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.served[i].Add(1)
		g.Wait(r.Context())
		if bench.ItemRequest(w, r) {
			bench.WriteItem(w, value)
		}
	})
}

// service is one gRPC server's TestService: UnaryCall answers once no
// stall is on.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	gate   *bench.Gate
	served *atomic.Int64
}

func (s *service) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.served.Add(1)
	s.gate.Wait(ctx)
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: value}}, nil
}

// control serves POST /stall?server=I&d=DURATION, which stalls server I
// for d and answers once the stall is over, and GET /served, the requests
// each server received as a JSON array.
func (s *servers) control() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /stall", func(w http.ResponseWriter, r *http.Request) {
		i, err1 := strconv.Atoi(r.URL.Query().Get("server"))
		d, err2 := time.ParseDuration(r.URL.Query().Get("d"))
		if err := errors.Join(err1, err2); err != nil || i < 0 || i >= len(s.gates) || d <= 0 {
			http.Error(w, fmt.Sprintf("want server=0..%d and a positive d", len(s.gates)-1), http.StatusBadRequest)
			return
		}
		if err := s.gates[i].Stall(r.Context(), d); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /served", func(w http.ResponseWriter, _ *http.Request) {
		out := make([]int64, len(s.served))
		for i := range s.served {
			out[i] = s.served[i].Load()
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	return mux
}
