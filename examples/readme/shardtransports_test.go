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

// grpcShardsSnippet is the transports guide's sharded gRPC snippet.
func grpcShardsSnippet(ctx context.Context, addrs [][]string, reqs []*pb.Request, req *pb.Request, got func(hedge.FanResult[*pb.Reply], *pb.Reply)) error {
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
	if err != nil {
		return err // fewer leaves answered than FanOut.Need; res holds those that did
	}
	// A single call names its shard; without one it fails with ErrNoShard.
	r, err := pb.NewSearchClient(conns.Conn()).Query(hedgegrpc.WithShard(ctx, 7), req)
	got(res, r)
	return err
}

// TestGRPCShardsSnippet runs the transports guide's sharded gRPC snippet
// against 8 shards of 2 real gRPC servers on loopback: every leaf
// answers, and so does the call to shard 7.
func TestGRPCShardsSnippet(t *testing.T) {
	addrs := make([][]string, 8)
	for s := range addrs {
		addrs[s] = grpcBackends(t, 2)
	}
	reqs := make([]*pb.Request, len(addrs))
	for i := range reqs {
		reqs[i] = &pb.Request{}
	}
	var res hedge.FanResult[*pb.Reply]
	var r *pb.Reply
	err := grpcShardsSnippet(context.Background(), addrs, reqs, &pb.Request{}, func(fr hedge.FanResult[*pb.Reply], one *pb.Reply) { res, r = fr, one })
	if err != nil || r.GetUsername() != "replica" {
		t.Fatalf("snippet: %v, %v", r, err)
	}
	for i, e := range res.Errs {
		if e != nil || res.Values[i].GetUsername() != "replica" {
			t.Errorf("leaf %d: %v, %v", i, res.Values[i], e)
		}
	}
}

// redisClusterSnippet is the transports guide's Redis Cluster snippet.
func redisClusterSnippet(ctx context.Context, seeds []string, got func(v string, vals []any)) error {
	c, err := hedgeredis.NewClusterFromOptions(ctx, &redis.ClusterOptions{Addrs: seeds}, hedgeredis.ClusterConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "user:42", "Ada", 0).Err(); err != nil { // the master, once, through the ClusterClient
		return err
	}
	v, err := c.Get(ctx, "user:42").Result() // the slot's master or replica, hedged to the other
	if err != nil {
		return err
	}
	vals, err := c.MGet(ctx, "user:42", "user:43").Result() // keys of any slots: one leaf per slot
	if err != nil {
		return err
	}
	got(v, vals)
	return nil
}

// TestRedisClusterSnippet runs the transports guide's Redis Cluster
// snippet against a real cluster of 3 masters with a replica each.
func TestRedisClusterSnippet(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	var v string
	var vals []any
	err := redisClusterSnippet(context.Background(), []string{cl.Shards[0].Master.Addr}, func(s string, a []any) { v, vals = s, a })
	if err != nil || v != "Ada" || len(vals) != 2 || vals[0] != "Ada" || vals[1] != nil {
		t.Fatalf("snippet: Get %q, MGet %v, %v; want Ada, [Ada <nil>]", v, vals, err)
	}
}
