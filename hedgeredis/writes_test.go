package hedgeredis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
)

// TestSetSetNXDel checks the typed writes against real servers: each sends
// the command go-redis sends (EX, PX, KEEPTTL, NX), to the primary alone,
// once, counted as a write and never seen by the Hedger; the other
// replicas receive nothing.
func TestSetSetNXDel(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := hedgeNow()
	cfg.Primary = 1
	c := startClient(t, servers, cfg, nil)
	seed(t, c, func(ctx context.Context, rc *redis.Client) error { return rc.ConfigResetStat(ctx).Err() })
	ctx := context.Background()
	p := c.Replica(1)

	if s, err := c.Set(ctx, "s:a", "1", 0).Result(); s != "OK" || err != nil {
		t.Fatalf("Set = %q, %v; want OK", s, err)
	}
	if v, err := p.Get(ctx, "s:a").Result(); v != "1" || err != nil {
		t.Errorf("s:a on the primary = %q, %v; want 1", v, err)
	}
	if err := c.Set(ctx, "s:ex", "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := p.TTL(ctx, "s:ex").Result(); err != nil || d <= 0 || d > time.Hour {
		t.Errorf("TTL after Set with an hour = %v, %v; want (0, 1h] (EX)", d, err)
	}
	// A TTL with milliseconds goes as PX: the key expires 90.5 s after
	// the server ran the SET, which is between two TIME replies around it.
	const px = 90*time.Second + 500*time.Millisecond
	before, err := p.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "s:px", "x", px).Err(); err != nil {
		t.Fatal(err)
	}
	after, err := p.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	expiry, err := p.Do(ctx, "PEXPIRETIME", "s:px").Int64()
	if lo, hi := before.Add(px).UnixMilli(), after.Add(px).UnixMilli(); err != nil || expiry < lo || expiry > hi {
		t.Errorf("PEXPIRETIME after Set with 90.5 s = %d, %v; want in [%d, %d] (PX)", expiry, err, lo, hi)
	}
	if err := c.Set(ctx, "s:px", "y", redis.KeepTTL).Err(); err != nil {
		t.Fatal(err)
	}
	if kept, err := p.Do(ctx, "PEXPIRETIME", "s:px").Int64(); kept != expiry || err != nil {
		t.Errorf("PEXPIRETIME after Set with KeepTTL = %d, %v; want %d, kept", kept, err, expiry)
	}

	if ok, err := c.SetNX(ctx, "s:nx", "first", 0).Result(); !ok || err != nil {
		t.Errorf("SetNX of a new key = %v, %v; want true", ok, err)
	}
	if ok, err := c.SetNX(ctx, "s:nx", "second", time.Hour).Result(); ok || err != nil {
		t.Errorf("SetNX of an existing key = %v, %v; want false", ok, err)
	}
	if v, _ := p.Get(ctx, "s:nx").Result(); v != "first" {
		t.Errorf("s:nx = %q, want first", v)
	}

	if n, err := c.Del(ctx, "s:a", "s:missing", "s:nx").Result(); n != 2 || err != nil {
		t.Errorf("Del = %d, %v; want 2", n, err)
	}
	if n, err := p.Exists(ctx, "s:a", "s:nx").Result(); n != 0 || err != nil {
		t.Errorf("after Del, %d of the keys exist (%v); want 0", n, err)
	}

	const writes = 7 // Set 4, SetNX 2, Del 1
	if calls := commandCalls(t, p); calls["set"] != "6" || calls["del"] != "1" {
		t.Errorf("primary: set called %q times, del %q; want 6 and 1", calls["set"], calls["del"])
	}
	s := c.Stats()
	for i, r := range s.Replicas {
		want := int64(0)
		if i == 1 {
			want = writes
		}
		if r.Writes != want || r.Copies != 0 {
			t.Errorf("replica %d: %d writes, %d read copies; want %d, 0", i, r.Writes, r.Copies, want)
		}
		if i == 1 {
			continue
		}
		calls := commandCalls(t, c.Replica(i))
		for _, cmd := range []string{"set", "setnx", "del"} {
			if calls[cmd] != "" {
				t.Errorf("replica %d received %s %s times", i, cmd, calls[cmd])
			}
		}
	}
	if len(s.Ops) != 0 {
		t.Errorf("the Hedger saw %v; want nothing (writes never go through it)", s.Ops)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Set":   c.Set(ctx, "s:a", "1", 0).Err(),
		"SetNX": c.SetNX(ctx, "s:a", "1", 0).Err(),
		"Del":   c.Del(ctx, "s:a").Err(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// TestKeyedSetIsNotHedged: a Set whose context carries an idempotency key
// (which lets hedge.Do copy a write) is still sent to the primary alone,
// once. With the primary stalled, the Set waits past the moment a hedge
// would have gone out (reads started after it are hedged meanwhile), and
// returns only after the release.
func TestKeyedSetIsNotHedged(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := startClient(t, servers, hedgeNow(), nil)
	seed(t, c, func(ctx context.Context, rc *redis.Client) error {
		if err := rc.Set(ctx, "k:r", "old", 0).Err(); err != nil {
			return err
		}
		return rc.ConfigResetStat(ctx).Err()
	})
	ctx := context.Background()
	st := stall(t, servers[0])
	done := make(chan error, 1)
	go func() {
		done <- c.Set(hedge.WithIdempotencyKey(ctx, "set-k-1"), "k:w", "new", 0).Err()
	}()
	waitFor(t, "the write to be sent", func() bool { return c.Stats().Replicas[0].Writes == 1 })
	for i := 0; c.Stats().Op("GET").Hedges == 0; i++ {
		if i == 200 {
			t.Fatal("200 reads and none hedged")
		}
		if v, err := c.Get(ctx, "k:r").Result(); v != "old" || err != nil {
			t.Fatalf("Get = %q, %v; want old", v, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Set returned (%v) while the primary was stalled", err)
	default:
	}
	release(t, st)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls := commandCalls(t, c.Replica(0)); calls["set"] != "1" {
		t.Errorf("primary: set called %q times, want 1", calls["set"])
	}
	for i := 1; i < 3; i++ {
		if calls := commandCalls(t, c.Replica(i)); calls["set"] != "" {
			t.Errorf("replica %d received set %s times", i, calls["set"])
		}
	}
	if op := c.Stats().Op("SET"); op.Requests != 0 {
		t.Errorf("the Hedger saw %d SET requests, want 0", op.Requests)
	}
}

// TestSetThenGetWithReplication runs the intended deployment: replicas
// replicating the primary (REPLICAOF). A Set goes to the primary; once the
// replicas have it (WAIT), a hedged Get reads it from any of them. A
// replica refuses writes (READONLY), which is why a write has nowhere to
// be hedged to.
func TestSetThenGetWithReplication(t *testing.T) {
	servers := redistest.Start(t, 3)
	ctx := context.Background()
	primary := redis.NewClient(&redis.Options{Addr: servers[0].Addr})
	defer primary.Close()
	// Full syncs start at once rather than after the default 5 s wait
	// for more replicas.
	if err := primary.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers[1:] {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr})
		defer rc.Close()
		if err := rc.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(servers[0].Port)).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "replica "+s.Addr+" to sync", func() bool {
			info, err := rc.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up")
		})
	}

	c := startClient(t, servers, hedgeNow(), nil)
	if err := c.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT returns once both replicas acknowledged the write; the timeout
	// only bounds a broken replication.
	if n, err := c.Primary().Do(ctx, "WAIT", 2, 60_000).Int(); n != 2 || err != nil {
		t.Fatalf("WAIT = %d, %v; want 2 replicas", n, err)
	}
	for range 20 {
		if v, err := c.Get(ctx, "greeting").Result(); v != "hello" || err != nil {
			t.Fatalf("Get = %q, %v; want hello", v, err)
		}
	}
	if err := c.Replica(1).Set(ctx, "greeting", "bye", 0).Err(); !redis.HasErrorPrefix(err, "READONLY") {
		t.Errorf("a Set sent to a replica: %v, want READONLY", err)
	}
}
