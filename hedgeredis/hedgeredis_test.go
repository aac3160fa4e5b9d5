package hedgeredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		args []any
		op   string
		read bool
	}{
		{[]any{"get", "k"}, "GET", true},
		{[]any{"GeT", "k"}, "GET", true},
		{[]any{[]byte("hgetall"), "k"}, "HGETALL", true},
		{[]any{"ZRANGE", "k", 0, -1}, "ZRANGE", true},
		{[]any{"set", "k", "v"}, "", false},
		{[]any{"incr", "k"}, "", false},
		{[]any{"pfcount", "k"}, "", false}, // may rewrite the HLL's cache
		{[]any{"touch", "k"}, "", false},   // its point is a side effect
		{[]any{"scan", 0}, "", false},      // cursors belong to one server
		{[]any{"blpop", "k", 0}, "", false},
		{[]any{"get-but-much-longer-than-any-command", "k"}, "", false},
		{[]any{""}, "", false},
		{[]any{42}, "", false},
		{nil, "", false},
	} {
		op, read := classify(tc.args)
		if op != tc.op || read != tc.read {
			t.Errorf("classify(%v) = %q, %v; want %q, %v", tc.args, op, read, tc.op, tc.read)
		}
	}
	if !IsRead("lrange") || IsRead("lpush") {
		t.Errorf("IsRead is wrong about lrange or lpush")
	}
	got := ReadCommands()
	got[0] = "SET" // a copy: the allow-list is not changed
	if IsRead("SET") {
		t.Errorf("ReadCommands returned the allow-list itself")
	}
}

// TestAllowListIsReadOnly asks a real Redis about every command on the
// allow-list: each must exist, be flagged readonly and not write or
// blocking, and touch its keys read-only (no RW, OW, UPDATE, INSERT or
// DELETE key spec; PFCOUNT, for one, has an RW key spec).
func TestAllowListIsReadOnly(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rc.Close()
	ctx := context.Background()
	for _, name := range ReadCommands() {
		info, err := rc.Do(ctx, "COMMAND", "INFO", name).Slice()
		if err != nil || len(info) != 1 || info[0] == nil {
			t.Errorf("COMMAND INFO %s: %v %v", name, info, err)
			continue
		}
		words := map[string]bool{}
		collect(info[0], words)
		if !words["readonly"] || words["write"] || words["blocking"] {
			t.Errorf("%s is not a plain read-only command: flags %v", name, words)
		}
		for _, w := range []string{"RW", "OW", "UPDATE", "INSERT", "DELETE"} {
			if words[w] {
				t.Errorf("%s has a %s key spec", name, w)
			}
		}
	}
	// The check can fail: PFCOUNT is flagged readonly, but its key is RW.
	info, _ := rc.Do(ctx, "COMMAND", "INFO", "pfcount").Slice()
	words := map[string]bool{}
	collect(info, words)
	if !words["RW"] {
		t.Errorf("PFCOUNT shows no RW key spec: %v", words)
	}
}

// collect gathers every string in a nested RESP reply.
func collect(v any, into map[string]bool) {
	switch v := v.(type) {
	case string:
		into[v] = true
	case []any:
		for _, e := range v {
			collect(e, into)
		}
	case map[any]any:
		for k, e := range v {
			collect(k, into)
			collect(e, into)
		}
	}
}

func TestNewRejectsMistakes(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rc.Close()
	two := []*redis.Client{rc, rc}
	for _, tc := range []struct {
		name    string
		clients []*redis.Client
		cfg     Config
		want    string
	}{
		{"no clients", nil, Config{}, "no clients"},
		{"nil client", []*redis.Client{rc, nil}, Config{}, "client 1 of 2 is nil"},
		{"primary out of range", two, Config{Primary: 2}, "Config.Primary = 2"},
		{"replicas mismatch", two, Config{Hedge: hedge.Config{Replicas: 3}}, "Replicas = 3 but there are 2 clients"},
		{"bad hedge config", two, Config{Hedge: hedge.Config{MaxAttempts: 9}}, "MaxAttempts = 9"},
	} {
		_, err := New(tc.clients, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewFromOptions([]*redis.Options{{Addr: "127.0.0.1:1"}, nil}, Config{}); err == nil {
		t.Errorf("NewFromOptions accepted nil options")
	}
}

// TestReads checks that every typed read and Do return what go-redis
// returns, that a missing key and an error reply are answers (not
// failures that send another copy), and that the operation classes are
// the upper-case command names.
func TestReads(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := startClient(t, servers, Config{}, nil)
	seed(t, c, func(ctx context.Context, rc *redis.Client) error {
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "r:s", "hello", 0)
			p.Set(ctx, "r:t", "world", time.Hour)
			p.HSet(ctx, "r:h", "a", "1", "b", "2")
			p.RPush(ctx, "r:l", "x", "y", "z")
			p.SAdd(ctx, "r:set", "m1", "m2")
			p.ZAdd(ctx, "r:z", redis.Z{Score: 1, Member: "one"}, redis.Z{Score: 2, Member: "two"})
			return nil
		})
		return err
	})
	ctx := context.Background()
	check := func(what string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	s, err := c.Get(ctx, "r:s").Result()
	check("Get", s, "hello", err)
	sl, err := c.MGet(ctx, "r:s", "r:missing", "r:t").Result()
	check("MGet", sl, []any{"hello", nil, "world"}, err)
	n, err := c.StrLen(ctx, "r:s").Result()
	check("StrLen", n, 5, err)
	s, err = c.GetRange(ctx, "r:s", 1, 3).Result()
	check("GetRange", s, "ell", err)
	n, err = c.Exists(ctx, "r:s", "r:missing", "r:h").Result()
	check("Exists", n, 2, err)
	d, err := c.TTL(ctx, "r:t").Result()
	if err != nil || d <= 0 || d > time.Hour {
		t.Errorf("TTL = %v, %v; want (0, 1h]", d, err)
	}
	s, err = c.Type(ctx, "r:l").Result()
	check("Type", s, "list", err)
	s, err = c.HGet(ctx, "r:h", "b").Result()
	check("HGet", s, "2", err)
	sl, err = c.HMGet(ctx, "r:h", "a", "nope", "b").Result()
	check("HMGet", sl, []any{"1", nil, "2"}, err)
	m, err := c.HGetAll(ctx, "r:h").Result()
	check("HGetAll", m, map[string]string{"a": "1", "b": "2"}, err)
	ok, err := c.HExists(ctx, "r:h", "a").Result()
	check("HExists", ok, true, err)
	n, err = c.HLen(ctx, "r:h").Result()
	check("HLen", n, 2, err)
	ss, err := c.LRange(ctx, "r:l", 0, -1).Result()
	check("LRange", ss, []string{"x", "y", "z"}, err)
	n, err = c.LLen(ctx, "r:l").Result()
	check("LLen", n, 3, err)
	s, err = c.LIndex(ctx, "r:l", 1).Result()
	check("LIndex", s, "y", err)
	ss, err = c.SMembers(ctx, "r:set").Result()
	slices.Sort(ss)
	check("SMembers", ss, []string{"m1", "m2"}, err)
	ok, err = c.SIsMember(ctx, "r:set", "m2").Result()
	check("SIsMember", ok, true, err)
	n, err = c.SCard(ctx, "r:set").Result()
	check("SCard", n, 2, err)
	ss, err = c.ZRange(ctx, "r:z", 0, -1).Result()
	check("ZRange", ss, []string{"one", "two"}, err)
	f, err := c.ZScore(ctx, "r:z", "two").Result()
	check("ZScore", f, 2, err)
	n, err = c.ZCard(ctx, "r:z").Result()
	check("ZCard", n, 2, err)
	n, err = c.ZRank(ctx, "r:z", "two").Result()
	check("ZRank", n, 1, err)
	v, err := c.Do(ctx, "lrange", "r:l", 0, 0).Result()
	check("Do lrange", v, []any{"x"}, err)

	if err := c.Do(ctx).Err(); err == nil || !strings.Contains(err.Error(), "command name") {
		t.Errorf("Do without arguments: %v", err)
	}

	// A missing key is an answer: redis.Nil, from one copy.
	if err := c.Get(ctx, "r:missing").Err(); err != redis.Nil {
		t.Errorf("Get of a missing key: %v, want redis.Nil", err)
	}
	if err := c.Do(ctx, "GET", "r:missing").Err(); err != redis.Nil {
		t.Errorf("Do GET of a missing key: %v, want redis.Nil", err)
	}
	// So is an error reply that every replica would give.
	if err := c.Get(ctx, "r:h").Err(); !redis.HasErrorPrefix(err, "WRONGTYPE") {
		t.Errorf("Get of a hash: %v, want WRONGTYPE", err)
	}

	st := c.Stats()
	g := st.Op("GET")
	if g.Requests != 4 || g.Failures != 0 || g.Hedges != 0 {
		t.Errorf("GET stats: %d requests, %d failures, %d hedges; want 4, 0, 0 (Nil and WRONGTYPE are answers)", g.Requests, g.Failures, g.Hedges)
	}
	if lr := st.Op("LRANGE"); lr.Requests != 2 {
		t.Errorf("LRANGE: %d requests, want 2 (typed and Do share the class)", lr.Requests)
	}
	var copies, wins, failed, writes int64
	for _, r := range st.Replicas {
		copies += r.Copies
		wins += r.Wins
		failed += r.Failed
		writes += r.Writes
	}
	if copies != wins || failed != 0 || writes != 0 {
		t.Errorf("replicas: %d copies, %d wins, %d failed, %d writes; want copies == wins, no failures, no writes", copies, wins, failed, writes)
	}
}

// TestStalledReplicaIsHedged stalls one replica and reads until a read
// whose primary copy went there is answered by another replica. The caller
// gets that answer while the loser is still waiting for the stalled server
// (hedge.Config.ReapInBackground), and the loser returns once the stall
// ends.
func TestStalledReplicaIsHedged(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := startClient(t, servers, hedgeNow(), nil)
	seed(t, c, func(ctx context.Context, rc *redis.Client) error {
		return rc.Set(ctx, "k", "v", 0).Err()
	})
	ctx := context.Background()
	const stalled = 1
	st := stall(t, servers[stalled], 800*time.Millisecond)

	// Until a read's primary lands on the stalled replica (each does with
	// probability 1/3 while the replicas are equally loaded).
	for i := 0; c.Stats().Op("GET").HedgeWins == 0; i++ {
		if i == 200 {
			t.Fatal("200 reads and none hedged")
		}
		if v, err := c.Get(ctx, "k").Result(); v != "v" || err != nil {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	s := c.Stats()
	if r := s.Replicas[stalled]; r.Wins != 0 || r.InFlight < 1 {
		t.Errorf("stalled replica: %d wins, %d copies in flight; want 0 wins and the loser still running", r.Wins, r.InFlight)
	}
	if g := s.Op("GET"); g.Hedges < 1 || g.HedgeWins < 1 {
		t.Errorf("GET: %d hedges, %d hedge wins; want at least 1 each", g.Hedges, g.HedgeWins)
	}

	if err := st.Wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loser to return", func() bool { return idle(c) })
	s = c.Stats()
	if r := s.Replicas[stalled]; r.Copies < 1 || r.Wins != 0 || r.Failed != 0 || r.Cancelled != 0 {
		t.Errorf("stalled replica: %d copies, %d wins, %d failed, %d cancelled; want >= 1, 0, 0, 0 (the loser read its reply)", r.Copies, r.Wins, r.Failed, r.Cancelled)
	}
	// The loser ignored its cancellation and answered when the stall
	// ended, so the Hedger recorded its whole latency as a primary's (not
	// a censored lower bound): every primary is in the distribution.
	if g := s.Op("GET"); g.Primary.Count != g.Requests || g.PrimaryCensored != 0 {
		t.Errorf("GET: %d primaries recorded (%d censored) for %d requests; want all, uncensored", g.Primary.Count, g.PrimaryCensored, g.Requests)
	}
	if v, err := c.Get(ctx, "k").Result(); v != "v" || err != nil {
		t.Fatalf("Get after the stall = %q, %v", v, err)
	}
}

// TestWritesGoToThePrimaryOnce stalls the primary and sends a write while
// it sleeps: the write waits for the primary and is applied exactly once,
// and no write command ever reaches the other replicas (INFO
// commandstats).
func TestWritesGoToThePrimaryOnce(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := hedgeNow()
	cfg.Primary = 0
	c := startClient(t, servers, cfg, nil)
	ctx := context.Background()
	seed(t, c, func(ctx context.Context, rc *redis.Client) error {
		if err := rc.Set(ctx, "w:counter", 41, 0).Err(); err != nil {
			return err
		}
		return rc.ConfigResetStat(ctx).Err()
	})

	st := stall(t, servers[0], 500*time.Millisecond)
	n, err := c.Do(ctx, "INCR", "w:counter").Int64()
	if err != nil || n != 42 {
		t.Fatalf("INCR while the primary is stalled = %d, %v; want 42", n, err)
	}
	if err := st.Wait(); err != nil {
		t.Fatal(err)
	}
	writes := [][]any{
		{"set", "w:a", "1"},
		{[]byte("SET"), "w:b", "2"},
		{"expire", "w:a", 100},
		{"pfadd", "w:hll", "x"},
		{"pfcount", "w:hll"}, // not on the allow-list: the primary's
		{"del", "w:b"},
	}
	for _, args := range writes {
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("Do%v: %v", args, err)
		}
	}
	if got, err := c.Replica(0).Get(ctx, "w:counter").Int(); got != 42 || err != nil {
		t.Errorf("counter on the primary = %d, %v; want 42", got, err)
	}

	primary := commandCalls(t, c.Replica(0))
	for cmd, want := range map[string]string{"incr": "1", "set": "2", "expire": "1", "pfadd": "1", "pfcount": "1", "del": "1"} {
		if primary[cmd] != want {
			t.Errorf("primary: %s called %q times, want %s", cmd, primary[cmd], want)
		}
	}
	for i := 1; i < 3; i++ {
		calls := commandCalls(t, c.Replica(i))
		for _, cmd := range []string{"incr", "set", "expire", "pfadd", "pfcount", "del"} {
			if calls[cmd] != "" {
				t.Errorf("replica %d received %s %s times", i, cmd, calls[cmd])
			}
		}
		if got, _ := c.Replica(i).Get(ctx, "w:counter").Int(); got != 41 {
			t.Errorf("counter on replica %d = %d, want 41 (untouched)", i, got)
		}
	}
	s := c.Stats()
	for _, r := range s.Replicas {
		want := int64(0)
		if r.Primary {
			want = int64(1 + len(writes))
		}
		if r.Writes != want {
			t.Errorf("replica %d: %d writes, want %d", r.Index, r.Writes, want)
		}
	}
	for _, op := range s.Ops {
		if !IsRead(op.Op) {
			t.Errorf("the Hedger saw %s, which is not a read", op.Op)
		}
	}
}

// TestCloseWaitsForLosers: a Client made by New waits in Close for a loser
// blocked on a stalled replica; one made by NewFromOptions ends the loser
// by closing its clients. Either way nothing runs after Close, and calls
// after Close fail with ErrClosed.
func TestCloseWaitsForLosers(t *testing.T) {
	servers := redistest.Start(t, 2)
	for _, owned := range []bool{false, true} {
		t.Run(fmt.Sprintf("owned=%v", owned), func(t *testing.T) {
			var c *Client
			var err error
			if owned {
				c, err = NewFromOptions([]*redis.Options{{Addr: servers[0].Addr}, {Addr: servers[1].Addr}}, hedgeNow())
			} else {
				rcs := []*redis.Client{redis.NewClient(&redis.Options{Addr: servers[0].Addr}), redis.NewClient(&redis.Options{Addr: servers[1].Addr})}
				defer closeAll(rcs)
				c, err = New(rcs, hedgeNow())
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			seed(t, c, func(ctx context.Context, rc *redis.Client) error { return rc.Set(ctx, "c:k", "v", 0).Err() })
			st := stall(t, servers[1], 400*time.Millisecond)
			for i := 0; c.Stats().Replicas[1].InFlight == 0; i++ {
				if i == 200 {
					t.Fatal("200 reads and none sent to the stalled replica")
				}
				if v, err := c.Get(ctx, "c:k").Result(); v != "v" || err != nil {
					t.Fatalf("Get = %q, %v", v, err)
				}
			}
			if err := c.Close(); err != nil && !owned {
				t.Fatal(err)
			}
			if !idle(c) {
				t.Errorf("copies still running after Close: %+v", c.Stats().Replicas)
			}
			if err := c.Get(ctx, "c:k").Err(); !errors.Is(err, ErrClosed) {
				t.Errorf("Get after Close: %v, want ErrClosed", err)
			}
			if err := c.Do(ctx, "set", "c:k", "w").Err(); !errors.Is(err, ErrClosed) {
				t.Errorf("Do after Close: %v, want ErrClosed", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if err := st.Wait(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
