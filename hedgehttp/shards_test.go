package hedgehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/loadreport"
)

// shardServer is one server of a sharded service on loopback: it answers
// "server K leaf I" and records the leaves it saw.
type shardServer struct {
	k     int
	url   string
	mu    sync.Mutex
	leafs []int // the leaf of each copy seen
}

func (s *shardServer) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.leafs)
}

// startShardServers starts n servers, each behind loadreport.Handler.
// With stall, the first server that a request reaches stalls from then on: it holds every
// request until its client gives up. So whichever server the Hedger picks
// first, a copy of the first request is held by a stalled server, and
// must be hedged to win. It returns the servers and the stalled one's
// index, to read once a request was sent.
func startShardServers(t *testing.T, n int, stall bool) ([]*shardServer, func() int) {
	t.Helper()
	stop := make(chan struct{})
	var stalled atomic.Int64
	stalled.Store(-1)
	var out []*shardServer
	for k := range n {
		s := &shardServer{k: k}
		app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			leaf, _ := strconv.Atoi(r.URL.Query().Get("leaf"))
			s.mu.Lock()
			s.leafs = append(s.leafs, leaf)
			s.mu.Unlock()
			if stall && (stalled.CompareAndSwap(-1, int64(k)) || stalled.Load() == int64(k)) {
				select {
				case <-r.Context().Done():
				case <-stop:
				}
				return
			}
			fmt.Fprintf(w, "server %d leaf %d", s.k, leaf)
		})
		h, err := loadreport.Handler(app, 4)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		s.url = srv.URL
		t.Cleanup(srv.Close)
		out = append(out, s)
	}
	t.Cleanup(func() { close(stop) })
	return out, func() int { return int(stalled.Load()) }
}

// alwaysHedge hedges every copy still running after a millisecond,
// whatever the servers' load, the hedges' record and the budget: these
// tests check where copies go, not whether the default sends them.
var alwaysHedge = hedge.Config{Delay: hedge.Fixed(time.Millisecond), MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1, NoBudget: true}

func newShards(t *testing.T, urls [][]string, cfg hedgehttp.ShardConfig) *hedgehttp.Shards {
	t.Helper()
	sh, err := hedgehttp.NewShards(&http.Transport{}, urls, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.CloseIdleConnections)
	return sh
}

// readBody is a DoShard and Fan read function: the body as a string.
func readBody(resp *http.Response) (string, error) {
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// watchdog returns a context cancelled after waitLimit, so that a broken
// rule fails the test instead of hanging it (no deadline: the Hedger
// refuses hedges near one).
func watchdog(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := time.AfterFunc(waitLimit, cancel)
	t.Cleanup(func() { w.Stop(); cancel() })
	return ctx
}

// Three shards over four servers, two of which hold two shards each: the
// servers are deduplicated, named by URL, and every copy of a leaf, hedges
// included, goes to a server of the leaf's shard, though a server stalls
// and its leaves are hedged. Load reports are read from every answer.
func TestShardsFanStaysInShard(t *testing.T) {
	srv, stalled := startShardServers(t, 4, true)
	u := func(k int) string { return srv[k].url }
	layout := [][]int{{0, 1}, {1, 2}, {2, 3}}
	urls := [][]string{{u(0), u(1)}, {u(1), u(2)}, {u(2), u(3)}}
	sh := newShards(t, urls, hedgehttp.ShardConfig{Hedge: alwaysHedge})

	servers := sh.Servers()
	if len(servers) != 4 || sh.Len() != 3 {
		t.Fatalf("%d servers, %d shards; want 4 and 3", len(servers), sh.Len())
	}
	for k, s := range servers {
		if s != srv[k].url {
			t.Errorf("server %d is %s, want %s", k, s, srv[k].url)
		}
		if got := sh.Hedger().ReplicaName(k); got != srv[k].url {
			t.Errorf("ReplicaName(%d) = %q, want its URL", k, got)
		}
	}
	for s, want := range layout {
		if got := sh.Shard(s); !slices.Equal(got, want) {
			t.Errorf("shard %d is on servers %v, want %v", s, got, want)
		}
	}

	const n = 12
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = newRequest(t, http.MethodGet, "/get?leaf="+strconv.Itoa(i), nil)
	}
	ctx := watchdog(t)
	answered := 0
	for range 5 {
		res, err := hedgehttp.Fan(ctx, sh, reqs, hedge.FanOut{Hedges: 100}, func(i int, resp *http.Response) (string, error) {
			return readBody(resp)
		})
		if err != nil {
			t.Fatalf("Fan: %v\n%v", err, sh.Hedger().OpStats(http.MethodGet))
		}
		for i, v := range res.Values {
			var k, leaf int
			if _, err := fmt.Sscanf(v, "server %d leaf %d", &k, &leaf); err != nil || leaf != i {
				t.Fatalf("leaf %d answered %q", i, v)
			}
			if !slices.Contains(layout[i%3], k) {
				t.Fatalf("leaf %d (shard %d) answered by server %d", i, i%3, k)
			}
			answered++
		}
	}
	for k, s := range srv {
		for _, leaf := range s.seen() {
			if !slices.Contains(layout[leaf%3], k) {
				t.Errorf("server %d got a copy of leaf %d, of shard %d on servers %v", k, leaf, leaf%3, layout[leaf%3])
			}
		}
	}
	// The stalled server held a leaf of the first fan-out, which a hedge
	// saved on the other server of the leaf's shard.
	st := sh.Hedger().OpStats(http.MethodGet)
	var wins int64
	for _, s := range st.Shards {
		wins += s.HedgeWins
	}
	if len(st.Shards) != 3 || wins == 0 {
		t.Errorf("shard stats %v: want the leaves of server %d won by hedges", st.Shards, stalled())
	}
	if got := sh.Stats(); got.LoadReports < int64(answered) || got.BadLoadReports != 0 {
		t.Errorf("load reports %+v, want one per answer (%d) and none bad", got, answered)
	}
}

// A request of one shard goes to that shard's servers only: its primary,
// held by the server that stalls, is hedged to the shard's other server.
func TestDoShardHedgesWithinTheShard(t *testing.T) {
	srv, stalled := startShardServers(t, 4, true)
	urls := [][]string{{srv[0].url, srv[1].url}, {srv[2].url, srv[3].url}}
	sh := newShards(t, urls, hedgehttp.ShardConfig{Hedge: alwaysHedge})
	ctx := watchdog(t)
	for i := range 10 {
		v, err := hedgehttp.DoShard(ctx, sh, 1, newRequest(t, http.MethodGet, "/get?leaf=1", nil), readBody)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("server %d leaf 1", 5-stalled()); v != want {
			t.Fatalf("request %d: answer %q, want %q: server %d stalls", i, v, want, stalled())
		}
	}
	if len(srv[0].seen())+len(srv[1].seen()) != 0 {
		t.Errorf("shard 0's servers got copies of a shard 1 request")
	}
	st := sh.Hedger().OpStats(http.MethodGet)
	if st.Shards[1].HedgeWins == 0 || st.Shards[0].Leaves != 0 || st.Shards[1].Leaves != 10 {
		t.Errorf("shard stats %v: want 10 requests and a hedge win on shard 1, nothing on shard 0", st.Shards)
	}
}

func TestNewShardsValidates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		urls   [][]string
		cfg    hedgehttp.ShardConfig
		errHas string
	}{
		{"none", nil, hedgehttp.ShardConfig{}, "without shards"},
		{"empty shard", [][]string{{"http://a:1"}, {}}, hedgehttp.ShardConfig{}, "shards[1] is empty"},
		{"bad URL", [][]string{{"a:1"}}, hedgehttp.ShardConfig{}, "shards[0][0]"},
		{"twice in a shard", [][]string{{"http://a:1", "http://A:1/"}}, hedgehttp.ShardConfig{}, "repeats a server of the same shard"},
		{"two schemes", [][]string{{"http://a:1"}, {"https://a:1"}}, hedgehttp.ShardConfig{}, "another scheme"},
		{"replicas set", [][]string{{"http://a:1"}}, hedgehttp.ShardConfig{Hedge: hedge.Config{Replicas: 1}}, "leave them zero"},
		{"hedge config", [][]string{{"http://a:1"}}, hedgehttp.ShardConfig{Hedge: hedge.Config{MaxAttempts: 99}}, "ShardConfig.Hedge"},
	} {
		_, err := hedgehttp.NewShards(nil, tc.urls, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.errHas)
		}
	}
	sh, err := hedgehttp.NewShards(nil, [][]string{{"http://a:1", "http://b:1"}, {"http://B:1", "http://c:1"}}, hedgehttp.ShardConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.Servers(); !slices.Equal(got, []string{"http://a:1", "http://b:1", "http://c:1"}) {
		t.Errorf("servers %q, want a, b, c: b named twice is one server", got)
	}
}

// A leaf that cannot be copied stops Fan before anything is sent; DoShard
// sends such a request once.
func TestShardsWritesAndBodies(t *testing.T) {
	srv, _ := startShardServers(t, 2, false)
	sh := newShards(t, [][]string{{srv[0].url, srv[1].url}}, hedgehttp.ShardConfig{Hedge: alwaysHedge})
	ctx := watchdog(t)
	post := newRequest(t, http.MethodPost, "/post?leaf=0", strings.NewReader("x"))
	_, err := hedgehttp.Fan(ctx, sh, []*http.Request{post}, hedge.FanOut{}, func(int, *http.Response) (string, error) { return "", nil })
	if !errors.Is(err, hedgehttp.ErrNotReplayable) {
		t.Fatalf("Fan of a POST: %v, want ErrNotReplayable", err)
	}
	if len(srv[0].seen())+len(srv[1].seen()) != 0 {
		t.Fatal("Fan sent a leaf of a fan-out it refused")
	}
	v, err := hedgehttp.DoShard(ctx, sh, 0, post, readBody)
	if err != nil || !strings.HasSuffix(v, "leaf 0") {
		t.Fatalf("DoShard of a POST: %q, %v", v, err)
	}
	if st := sh.Hedger().OpStats(http.MethodPost); st.Unhedgeable != 1 {
		t.Errorf("POST: %d unhedgeable, want 1 (sent once)", st.Unhedgeable)
	}
	if _, err := hedgehttp.DoShard(ctx, sh, 1, newRequest(t, http.MethodGet, "/", nil), readBody); err == nil || !strings.Contains(err.Error(), "use 0 to 0") {
		t.Errorf("DoShard on shard 1 of 1: %v, want an error naming the range", err)
	}
}
