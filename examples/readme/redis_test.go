package readme

import (
	"context"
	"log"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tailcut/hedge/hedgeredis"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestRedisSnippet runs the README's hedgeredis snippet against a real
// primary and a real replica that follows it.
func TestRedisSnippet(t *testing.T) {
	servers := redistest.Start(t, 2)
	primaryAddr, replicaAddr := servers[0].Addr, servers[1].Addr
	ctx := context.Background()

	// Make the second server a replica of the first, and seed the key on
	// both, so that the hedged read finds it wherever it lands.
	rep := redis.NewClient(&redis.Options{Addr: replicaAddr})
	defer rep.Close()
	if err := rep.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(servers[0].Port)).Err(); err != nil {
		t.Fatal(err)
	}
	prim := redis.NewClient(&redis.Options{Addr: primaryAddr})
	defer prim.Close()
	if err := prim.Set(ctx, "user:42", "Ada", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := prim.Do(ctx, "WAIT", 1, 60000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v: the replica did not catch up", n, err)
	}

	c, err := hedgeredis.NewFromOptions([]*redis.Options{{Addr: primaryAddr}, {Addr: replicaAddr}}, hedgeredis.Config{})
	if err != nil {
		log.Fatal(err) // every mistake at once: one server, the same server twice, Config.Hedge.* fields
	}
	defer c.Close()
	// Writes go to the primary, once: they are never hedged.
	if err := c.Set(ctx, "user:42", "Ada", time.Hour).Err(); err != nil {
		log.Fatal(err)
	}
	v, err := c.Get(ctx, "user:42").Result() // hedged across both; a replica may lag

	if err != nil || v != "Ada" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if ttl, err := prim.TTL(ctx, "user:42").Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL on the primary = %v, %v: Set did not reach it", ttl, err)
	}
	if _, err := hedgeredis.NewFromOptions([]*redis.Options{{Addr: primaryAddr}}, hedgeredis.Config{}); err == nil {
		t.Fatal("a client over one server was accepted")
	}
}
