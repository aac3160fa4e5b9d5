package hedgegrpc_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

// shardBackend is one server of a sharded service: it answers a
// UnaryCall with its id and the leaf (the request's ResponseSize), and
// records the leaves and hedge marks it saw. A stalled one holds every
// call until its client gives up.
type shardBackend struct {
	testgrpc.UnimplementedTestServiceServer
	k       int
	addr    string
	stalled *atomic.Int64 // the stalled backend's k; -1 before the first call

	mu     sync.Mutex
	leaves []int
	hedges int // copies marked with AttemptKey
}

func (b *shardBackend) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	b.mu.Lock()
	b.leaves = append(b.leaves, int(req.GetResponseSize()))
	if len(md.Get(hedgegrpc.AttemptKey)) > 0 {
		b.hedges++
	}
	b.mu.Unlock()
	if b.stalled.CompareAndSwap(-1, int64(b.k)) || b.stalled.Load() == int64(b.k) {
		return nil, stall(ctx)
	}
	return &testgrpc.SimpleResponse{ServerId: strconv.Itoa(b.k), Hostname: strconv.Itoa(int(req.GetResponseSize()))}, nil
}

func (b *shardBackend) seen() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.leaves)
}

// startShardBackends serves n backends on loopback, each reporting its
// load (ORCA). The first backend that a call reaches stalls from then on:
// it holds every call until its client gives up. So whichever server the
// Hedger picks first, a copy of the first call is held by a stalled
// server, and must be hedged to win. It returns the backends and the
// stalled one's index, to read once a call was made.
func startShardBackends(t *testing.T, n int) ([]*shardBackend, func() int) {
	t.Helper()
	stalled := new(atomic.Int64)
	stalled.Store(-1)
	var out []*shardBackend
	for k := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lr, err := hedgegrpc.LoadReportInterceptor(4)
		if err != nil {
			t.Fatal(err)
		}
		b := &shardBackend{k: k, addr: lis.Addr().String(), stalled: stalled}
		srv := grpc.NewServer(orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(lr))
		testgrpc.RegisterTestServiceServer(srv, b)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		out = append(out, b)
	}
	return out, func() int { return int(stalled.Load()) }
}

// alwaysHedge hedges every copy still running after a millisecond,
// whatever the servers' load, the hedges' record and the budget: these
// tests check where copies go, not whether the default sends them.
var alwaysHedge = hedge.Config{Delay: hedge.Fixed(time.Millisecond), MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1, NoBudget: true}

func dialShards(t *testing.T, addrs [][]string, cfg hedge.Config) *hedgegrpc.ShardConns {
	t.Helper()
	c, err := hedgegrpc.DialShards(addrs, cfg, hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// watchdog returns a context cancelled after a minute, so that a broken
// rule fails the test instead of hanging it (no deadline: the Hedger
// refuses hedges near one).
func watchdog(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := time.AfterFunc(time.Minute, cancel)
	t.Cleanup(func() { w.Stop(); cancel() })
	return ctx
}

// Three shards over four servers, two of which hold two shards each: one
// conn per server, named by address, and every copy of a leaf, hedges
// included, goes to a server of the leaf's shard, though a server stalls
// and its leaves are hedged. Load reports are read from every answer.
func TestShardsFanStaysInShard(t *testing.T) {
	bs, stalled := startShardBackends(t, 4)
	a := func(k int) string { return bs[k].addr }
	layout := [][]int{{0, 1}, {1, 2}, {2, 3}}
	c := dialShards(t, [][]string{{a(0), a(1)}, {a(1), a(2)}, {a(2), a(3)}}, alwaysHedge)
	if got := c.Servers(); !slices.Equal(got, []string{a(0), a(1), a(2), a(3)}) || len(c.Conns.Conns()) != 4 || c.Len() != 3 {
		t.Fatalf("servers %q, %d conns, %d shards; want the 4 addresses, 4 and 3", got, len(c.Conns.Conns()), c.Len())
	}
	for k := range bs {
		if got := c.Hedger().ReplicaName(k); got != a(k) {
			t.Errorf("ReplicaName(%d) = %q, want its address", k, got)
		}
	}
	for s, want := range layout {
		if got := c.Shard(s); !slices.Equal(got, want) {
			t.Errorf("shard %d is on servers %v, want %v", s, got, want)
		}
	}

	const n = 12
	ctx := watchdog(t)
	answered := 0
	for range 5 {
		res, err := hedgegrpc.Fan(ctx, c, "UnaryCall", n, hedge.FanOut{Hedges: 100}, func(ctx context.Context, i int, cc *grpc.ClientConn) (*testgrpc.SimpleResponse, error) {
			return testgrpc.NewTestServiceClient(cc).UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: int32(i)})
		})
		if err != nil {
			t.Fatalf("Fan: %v\n%v", err, c.Hedger().OpStats("UnaryCall"))
		}
		for i, r := range res.Values {
			k, _ := strconv.Atoi(r.GetServerId())
			if r.GetHostname() != strconv.Itoa(i) || !slices.Contains(layout[i%3], k) {
				t.Fatalf("leaf %d (shard %d) answered by server %d for leaf %s", i, i%3, k, r.GetHostname())
			}
			answered++
		}
	}
	hedges := 0
	for k, b := range bs {
		for _, leaf := range b.seen() {
			if !slices.Contains(layout[leaf%3], k) {
				t.Errorf("server %d got a copy of leaf %d, of shard %d on servers %v", k, leaf, leaf%3, layout[leaf%3])
			}
		}
		b.mu.Lock()
		hedges += b.hedges
		b.mu.Unlock()
	}
	// The stalled server held a leaf of the first fan-out, which a hedge
	// saved on the other server of the leaf's shard.
	st := c.Hedger().OpStats("UnaryCall")
	var wins int64
	for _, s := range st.Shards {
		wins += s.HedgeWins
	}
	if len(st.Shards) != 3 || wins == 0 {
		t.Errorf("shard stats %v: want the leaves of server %d won by hedges", st.Shards, stalled())
	}
	// A hedge that won reached its server marked; one cancelled early
	// may not have reached it at all.
	if int64(hedges) < st.HedgeWins || int64(hedges) > st.Hedges {
		t.Errorf("servers saw %d copies marked as hedges; the Hedger sent %d, %d of which won", hedges, st.Hedges, st.HedgeWins)
	}
	if got := c.Interceptor().Stats(); got.LoadReports < int64(answered) || got.BadLoadReports != 0 {
		t.Errorf("load reports %+v, want one per answer (%d) and none bad", got, answered)
	}
}

// A call with WithShard goes to its shard's servers only: its primary,
// held by the server that stalls, is hedged to the shard's other server.
// A call without a shard sends nothing and fails with ErrNoShard.
func TestShardCallHedgesWithinTheShard(t *testing.T) {
	bs, stalled := startShardBackends(t, 4)
	c := dialShards(t, [][]string{{bs[0].addr, bs[1].addr}, {bs[2].addr, bs[3].addr}}, alwaysHedge)
	client := testgrpc.NewTestServiceClient(c.Conn())
	ctx := watchdog(t)
	for i := range 10 {
		r, err := client.UnaryCall(hedgegrpc.WithShard(ctx, 1), &testgrpc.SimpleRequest{ResponseSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(5 - stalled()); r.GetServerId() != want {
			t.Fatalf("call %d answered by server %s, want %s: server %d stalls", i, r.GetServerId(), want, stalled())
		}
	}
	if len(bs[0].seen())+len(bs[1].seen()) != 0 {
		t.Errorf("shard 0's servers got copies of shard 1's calls")
	}
	st := c.Hedger().OpStats("/grpc.testing.TestService/UnaryCall")
	if st.Shards[1].HedgeWins == 0 || st.Shards[0].Leaves != 0 || st.Shards[1].Leaves != 10 {
		t.Errorf("shard stats %v: want 10 calls and a hedge win on shard 1, nothing on shard 0", st.Shards)
	}

	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if !errors.Is(err, hedgegrpc.ErrNoShard) || !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithShard") {
		t.Errorf("call without a shard: %v, want ErrNoShard naming WithShard", err)
	}
	if n := len(bs[0].seen()) + len(bs[1].seen()); n != 0 {
		t.Errorf("%d copies reached shard 0's servers", n)
	}
}

func TestDialShardsValidates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		addrs  [][]string
		cfg    hedge.Config
		errHas string
	}{
		{"none", nil, hedge.Config{}, "without shards"},
		{"empty shard", [][]string{{"a:1", "b:1"}, {}}, hedge.Config{}, "shards[1] is empty"},
		{"empty address", [][]string{{"a:1", ""}}, hedge.Config{}, "shards[0][1] is empty"},
		{"twice in a shard", [][]string{{"a:1", "a:1"}}, hedge.Config{}, "lists \"a:1\" twice"},
		{"replicas set", [][]string{{"a:1", "b:1"}}, hedge.Config{Replicas: 2}, "leave them zero"},
		{"hedge config", [][]string{{"a:1", "b:1"}}, hedge.Config{MaxAttempts: 99}, "Config"},
	} {
		_, err := hedgegrpc.DialShards(tc.addrs, tc.cfg, hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
		if err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.errHas)
		}
	}
	c := dialShards(t, [][]string{{"a:1", "b:1"}, {"b:1", "c:1"}}, hedge.Config{})
	if got := c.Servers(); !slices.Equal(got, []string{"a:1", "b:1", "c:1"}) {
		t.Errorf("servers %q, want a, b, c: b named twice is one server", got)
	}
}
