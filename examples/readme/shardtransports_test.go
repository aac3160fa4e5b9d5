package readme

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/examples/readme/pb"
	"github.com/tailcut/hedge/hedgegrpc"
	"github.com/tailcut/hedge/hedgehttp"
	"github.com/tailcut/hedge/hedgeredis"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestHTTPShardsSnippet runs the transports guide's sharded HTTP snippet
// against 30 shards of 2 real HTTP servers on loopback, each answering
// with its shard: every leaf's answer comes from its own shard.
func TestHTTPShardsSnippet(t *testing.T) {
	ctx := context.Background()
	urls := make([][]string, 30)
	for s := range urls {
		for range 2 {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, s)
			}))
			t.Cleanup(srv.Close)
			urls[s] = append(urls[s], srv.URL)
		}
	}

	// urls[s] lists shard s's replicas, such as {"http://10.0.1.1:8080", "http://10.0.2.1:8080"}.
	sh, err := hedgehttp.NewShards(nil, urls, hedgehttp.ShardConfig{})
	if err != nil {
		log.Fatal(err) // every mistake at once: an empty shard, a server twice in a shard
	}
	reqs := make([]*http.Request, len(urls))
	for i := range reqs {
		// Path and query alone: each copy goes to a server of leaf i's shard.
		reqs[i], _ = http.NewRequest("GET", "/search?q=tail", nil)
	}
	// Leaf i is on shard i mod 30; FanOut.Shard maps leaves otherwise.
	res, err := hedgehttp.Fan(ctx, sh, reqs, hedge.FanOut{}, func(i int, resp *http.Response) ([]byte, error) {
		return io.ReadAll(resp.Body) // read inside the copy; the body is closed after
	})

	if err != nil {
		t.Fatal(err)
	}
	for i, v := range res.Values {
		if string(v) != fmt.Sprint(i) {
			t.Errorf("leaf %d answered by shard %q", i, v)
		}
	}
}

// TestGRPCShardsSnippet runs the transports guide's sharded gRPC snippet
// against 4 shards of 2 real gRPC servers on loopback.
func TestGRPCShardsSnippet(t *testing.T) {
	ctx := context.Background()
	addrs := make([][]string, 4)
	for s := range addrs {
		addrs[s] = grpcBackends(t, 2)
	}
	reqs := make([]*pb.Request, len(addrs))
	for i := range reqs {
		reqs[i] = &pb.Request{}
	}
	req := &pb.Request{}

	conns, err := hedgegrpc.DialShards(addrs, hedge.Config{}, // addrs[s]: shard s's replicas, "10.0.1.1:50051"
		hedgegrpc.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		log.Fatal(err)
	}
	defer conns.Close()
	res, err := hedgegrpc.Fan(ctx, conns, "/search.Search/Query", len(addrs), hedge.FanOut{},
		func(ctx context.Context, i int, cc *grpc.ClientConn) (*pb.Reply, error) {
			return pb.NewSearchClient(cc).Query(ctx, reqs[i]) // cc: a server of leaf i's shard
		})
	// A single call names its shard; without one it fails with ErrNoShard.
	r, err := pb.NewSearchClient(conns.Conn()).Query(hedgegrpc.WithShard(ctx, 7), req)

	if len(res.Values) != len(addrs) || len(res.Errs) != len(addrs) {
		t.Fatalf("Fan = %d values, %d errors; want %d", len(res.Values), len(res.Errs), len(addrs))
	}
	for i, e := range res.Errs {
		if e != nil || res.Values[i].GetUsername() != "replica" {
			t.Errorf("leaf %d: %v, %v", i, res.Values[i], e)
		}
	}
	// There are 4 shards here: shard 7 is not one of them.
	if err == nil || r != nil {
		t.Errorf("a call to shard 7 of 4 = %v, %v; want an error", r, err)
	}
	if r, err := pb.NewSearchClient(conns.Conn()).Query(hedgegrpc.WithShard(ctx, 3), req); err != nil || r.GetUsername() != "replica" {
		t.Errorf("a call to shard 3 = %v, %v", r, err)
	}
}

// TestRedisClusterSnippet runs the transports guide's Redis Cluster
// snippet against a real cluster of 3 masters with a replica each.
func TestRedisClusterSnippet(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	seeds := []string{cl.Shards[0].Master.Addr}

	c, err := hedgeredis.NewClusterFromOptions(ctx, &redis.ClusterOptions{Addrs: seeds}, hedgeredis.ClusterConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	v, err := c.Get(ctx, "user:42").Result()                // the slot's master or replica, hedged to the other
	vals, err := c.MGet(ctx, "user:42", "user:43").Result() // keys of any slots: one leaf per slot
	err = c.Set(ctx, "user:42", "Ada", 0).Err()             // the master, once, through the ClusterClient

	if err != nil || v != "" || len(vals) != 2 {
		t.Fatalf("Get = %q, MGet = %v, Set: %v; want a missing key, two values and a write", v, vals, err)
	}
	master := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer master.Close()
	if got, err := master.Get(ctx, "user:42").Result(); err != nil || got != "Ada" {
		t.Fatalf("the cluster holds %q, %v after Set", got, err)
	}
}
