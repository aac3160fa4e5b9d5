package hedgerueidis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
)

// The allow-list and its lookup are tested in internal/rediscmd; here,
// that this package answers with them.
func TestIsRead(t *testing.T) {
	for name, want := range map[string]bool{"GeT": true, "zrange": true, "set": false, "": false} {
		if IsRead(name) != want {
			t.Errorf("IsRead(%q) = %v, want %v", name, !want, want)
		}
	}
	if !slices.Contains(ReadCommands(), "GET") {
		t.Errorf("ReadCommands() = %v, without GET", ReadCommands())
	}
}

// values returns n keys and values of different lengths, so that a reply
// given to the wrong command would be seen.
func values(n int) (keys []string, kv []string) {
	for i := range n {
		k := fmt.Sprintf("key:%d", i)
		keys = append(keys, k)
		kv = append(kv, k, strings.Repeat(fmt.Sprintf("value-%d;", i), 1+i%7))
	}
	return keys, kv
}

// TestStalledReplica stalls one of three servers (the process stopped
// until the test releases it) and reads through the Client, by the typed
// Get, by Do and by MGet, until reads have sent several copies to it.
// Every read returns its own value while the server is stalled, and
// returns with no copy left running: the copies sent to the stalled
// server were hedged, lost, and returned on cancellation, although their
// commands were on the wire. After the release, every key read from every
// replica's own connection is its own: cancelled copies left no reply out
// of step.
func TestStalledReplica(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := startClient(t, servers, hedgeNow())
	keys, kv := values(20)
	seed(t, c, kv...)
	want := wantOf(kv)
	ctx := context.Background()
	st := stall(t, servers[0])
	readUntilStalledCopies(t, c, keys, want, true, func(n int) {
		for _, r := range c.Stats().Replicas {
			if r.InFlight != 0 {
				t.Fatalf("after read %d, %d copies still run on replica %d", n, r.InFlight, r.Index)
			}
		}
	})
	s := c.Stats()
	r0 := s.Replicas[0]
	if r0.Wins != 0 || r0.Cancelled != r0.Copies {
		t.Fatalf("stalled replica: %d copies, %d cancelled, %d wins; want every copy cancelled, no win", r0.Copies, r0.Cancelled, r0.Wins)
	}
	if h := s.Op("GET").Hedges + s.Op("MGET").Hedges; h < r0.Copies {
		t.Fatalf("%d hedges for %d copies held by the stalled replica", h, r0.Copies)
	}
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
	for i := range c.Len() {
		rc := c.Replica(i)
		for _, k := range keys {
			got, err := rc.Do(ctx, rc.B().Get().Key(k).Build()).ToString()
			if err != nil || got != want[k] {
				t.Fatalf("after the stall, replica %d: GET %s = %q, %v; want %q", i, k, got, err, want[k])
			}
		}
	}
	for _, k := range keys {
		if got, err := c.Get(ctx, k).ToString(); err != nil || got != want[k] {
			t.Fatalf("after the stall: GET %s = %q, %v", k, got, err)
		}
	}
}

// TestDeadlineDoesNotHoldLosers is TestStalledReplica with a caller's
// context that has a deadline (an hour away) on fresh connections. rueidis
// reads such a command synchronously, deaf to cancellation, when nothing
// else is in flight on its connection; the Client hides the deadline from
// it, so that a loser on the stalled server returns as soon as the hedge
// wins. Were it not so, the read would wait out the hour (the test would
// time out, not pass; with rueidis's default ConnWriteTimeout it would
// wait 10 s, then lose the connection).
func TestDeadlineDoesNotHoldLosers(t *testing.T) {
	servers := redistest.Start(t, 2)
	opts := []rueidis.ClientOption{options(servers[0]), options(servers[1])}
	for i := range opts {
		// rueidis bounds a synchronous read by this too (10 s by
		// default): an hour leaves only the caller's deadline.
		opts[i].ConnWriteTimeout = time.Hour
	}
	c, err := NewFromOptions(opts, hedgeNow())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seed(t, c, "k", "v")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	st := stall(t, servers[0])
	for n := 0; c.Stats().Replicas[0].Copies < 3; n++ {
		if n > 100000 {
			t.Fatal("no copy went to the stalled replica in 100,000 reads")
		}
		if got, err := c.Get(ctx, "k").ToString(); err != nil || got != "v" {
			t.Fatalf("GET k = %q, %v", got, err)
		}
	}
	r0 := c.Stats().Replicas[0]
	if r0.InFlight != 0 || r0.Cancelled != r0.Copies {
		t.Fatalf("stalled replica: %d copies, %d cancelled, %d in flight", r0.Copies, r0.Cancelled, r0.InFlight)
	}
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestWritesGoToThePrimaryOnce sends writes, one with an idempotency key,
// through a Client whose primary is replica 1 and which hedges everything
// after 5 ms, and counts the commands each server ran.
func TestWritesGoToThePrimaryOnce(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := hedgeNow()
	cfg.Primary = 1
	c := startClient(t, servers, cfg)
	ctx := context.Background()
	keyed := hedge.WithIdempotencyKey(ctx, "order-1")
	if err := c.Set(keyed, "a", "1", time.Hour).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetNX(ctx, "b", "2", 0).Error(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.SetNX(ctx, "b", "3", 0).ToString(); !rueidis.IsRedisNil(err) {
		t.Fatalf("SETNX of an existing key = %q, %v; want a nil reply", got, err)
	}
	if n, err := c.Do(keyed, c.B().Incr().Key("n").Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("INCR = %d, %v", n, err)
	}
	if n, err := c.Del(ctx, "a", "b").AsInt64(); err != nil || n != 2 {
		t.Fatalf("DEL = %d, %v", n, err)
	}
	for i, s := range servers {
		calls := commandCalls(t, s)
		want := map[string]string{}
		if i == 1 {
			want = map[string]string{"set": "3", "incr": "1", "del": "1"}
		}
		for _, cmd := range []string{"set", "incr", "del"} {
			if calls[cmd] != want[cmd] {
				t.Errorf("server %d ran %s %q times; want %q", i, cmd, calls[cmd], want[cmd])
			}
		}
	}
	st := c.Stats()
	if w := st.Replicas[1].Writes; w != 5 || st.Replicas[0].Writes != 0 || st.Replicas[2].Writes != 0 {
		t.Errorf("writes counted %d on the primary, %d and %d elsewhere; want 5, 0, 0", w, st.Replicas[0].Writes, st.Replicas[2].Writes)
	}
	if len(st.Ops) != 0 {
		t.Errorf("writes went through the Hedger: %v", st.Ops)
	}
}

// TestAnswersAreNotHedged checks that a server's error replies end a read
// like a value: a missing key (a nil reply) and WRONGTYPE.
func TestAnswersAreNotHedged(t *testing.T) {
	servers := redistest.Start(t, 2)
	c := startClient(t, servers, Config{})
	ctx := context.Background()
	for i := range c.Len() {
		rc := c.Replica(i)
		if err := rc.Do(ctx, rc.B().Lpush().Key("list").Element("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Get(ctx, "missing").Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("GET missing: %v; want a nil reply", err)
	}
	err := c.Get(ctx, "list").Error()
	if re, ok := rueidis.IsRedisErr(err); !ok || !strings.HasPrefix(re.Error(), "WRONGTYPE") {
		t.Fatalf("GET of a list: %v; want WRONGTYPE", err)
	}
	if got, err := c.LRange(ctx, "list", 0, -1).AsStrSlice(); err != nil || !slices.Equal(got, []string{"x"}) {
		t.Fatalf("LRANGE = %q, %v", got, err)
	}
	st := c.Stats()
	if f := st.Op("GET").Failures; f != 0 {
		t.Fatalf("%d GET failures; answers are not failures", f)
	}
	for _, r := range st.Replicas {
		if r.Failed != 0 {
			t.Fatalf("replica %d: %d failed copies", r.Index, r.Failed)
		}
	}
}

// TestEveryCopyFails stops both servers: each copy fails at once, the next
// goes at once, and the read returns an error naming each replica.
func TestEveryCopyFails(t *testing.T) {
	servers := redistest.Start(t, 2)
	opts := []rueidis.ClientOption{options(servers[0]), options(servers[1])}
	for i := range opts {
		opts[i].DisableRetry = true
	}
	c, err := NewFromOptions(opts, Config{Hedge: hedge.Config{Delay: hedge.Fixed(time.Hour), NoBudget: true, PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := redistest.StopAll(servers); err != nil {
		t.Fatal(err)
	}
	err = c.Get(context.Background(), "k").Error()
	var ae *hedge.AttemptsError
	if !errors.As(err, &ae) || len(ae.Errs) != 2 {
		t.Fatalf("GET with both servers down: %v; want an AttemptsError of two copies", err)
	}
	for _, a := range servers {
		if !strings.Contains(err.Error(), a.Addr) {
			t.Errorf("the error does not name %s: %v", a.Addr, err)
		}
	}
	st := c.Stats()
	if st.Replicas[0].Failed != 1 || st.Replicas[1].Failed != 1 {
		t.Fatalf("failed copies %d and %d; want 1 and 1", st.Replicas[0].Failed, st.Replicas[1].Failed)
	}
}

func TestClosed(t *testing.T) {
	servers := redistest.Start(t, 2)
	c := startClient(t, servers, Config{})
	c.Close()
	c.Close()
	ctx := context.Background()
	for name, err := range map[string]error{
		"Get": c.Get(ctx, "k").Error(),
		"Do":  c.Do(ctx, c.B().Get().Key("k").Build()).Error(),
		"Set": c.Set(ctx, "k", "v", 0).Error(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v; want ErrClosed", name, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	servers := redistest.Start(t, 2)
	mk := func(addr string) rueidis.Client {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		return rc
	}
	a, b := mk(servers[0].Addr), mk(servers[1].Addr)
	a2 := mk(servers[0].Addr) // another client of the same server
	for _, tc := range []struct {
		name    string
		clients []rueidis.Client
		cfg     Config
		want    string
		hedge   bool // the mistake is hedge.New's
	}{
		{"none", nil, Config{}, "clients is empty", false},
		{"one", []rueidis.Client{a}, Config{}, "single entry", false},
		{"nil", []rueidis.Client{a, nil}, Config{}, "clients[1] is nil", false},
		{"twice", []rueidis.Client{a, a}, Config{}, "same rueidis.Client", false},
		{"same server", []rueidis.Client{a, b, a2}, Config{}, "are the same server", false},
		{"primary", []rueidis.Client{a, b}, Config{Primary: 2}, "Config.Primary = 2", false},
		{"replicas", []rueidis.Client{a, b}, Config{Hedge: hedge.Config{Replicas: 3}}, "Config.Hedge.Replicas = 3", false},
		{"hedge", []rueidis.Client{a, b}, Config{Hedge: hedge.Config{MaxAttempts: 9}}, "Config.Hedge", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.clients, tc.cfg)
			if c != nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want ErrInvalidConfig mentioning %q", err, tc.want)
			}
			if tc.hedge && !errors.Is(err, hedge.ErrInvalidConfig) {
				t.Fatalf("New: %v; want hedge.ErrInvalidConfig reachable", err)
			}
		})
	}
}

func TestServerKey(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"127.0.0.1:6379", "127.0.0.1:06379"},
		{"LocalHost.:6379", "localhost:6379"},
		{"[::ffff:127.0.0.1]:6379", "127.0.0.1:6379"},
		{"[::1]:7000", "[0:0::1]:7000"},
		{"redis", "redis:6379"},
	} {
		if serverKey(tc.a) != serverKey(tc.b) {
			t.Errorf("serverKey(%q) = %q, serverKey(%q) = %q; want equal", tc.a, serverKey(tc.a), tc.b, serverKey(tc.b))
		}
	}
	if serverKey("localhost:6379") == serverKey("127.0.0.1:6379") {
		t.Errorf("localhost and 127.0.0.1 were taken for the same server")
	}
}
