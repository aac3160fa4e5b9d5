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

// TestStalledReplicaIsHedged stalls one replica and reads until a copy
// sent there is held and a hedge has won. The callers get their answers
// while the loser is still held by the stalled server
// (hedge.Config.ReapInBackground), and the loser returns once the test
// releases the stall.
//
// On a loaded machine a read from a running replica may also outlast the
// 5 ms delay and be hedged, with either copy winning; the assertions hold
// whichever reads that happens to.
func TestStalledReplicaIsHedged(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := startClient(t, servers, hedgeNow(), nil)
	seed(t, c, func(ctx context.Context, rc *redis.Client) error {
		return rc.Set(ctx, "k", "v", 0).Err()
	})
	ctx := context.Background()
	const stalled = 1
	st := stall(t, servers[stalled])

	// Until a copy lands on the stalled replica (a read's primary does
	// with probability 1/3 while the replicas are equally loaded) and a
	// hedge has won. A copy there cannot be answered before the release,
	// so its call is answered by the other copy, sent to a running
	// replica.
	for i := 0; c.Stats().Replicas[stalled].InFlight == 0 || c.Stats().Op("GET").HedgeWins == 0; i++ {
		if i == 200 {
			t.Fatal("200 reads, and no copy held by the stalled replica or no hedge won")
		}
		if v, err := c.Get(ctx, "k").Result(); v != "v" || err != nil {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	s := c.Stats()
	if r := s.Replicas[stalled]; r.Wins != 0 {
		t.Errorf("stalled replica: %d wins; want 0", r.Wins)
	}

	release(t, st)
	waitFor(t, "the losers to return", func() bool { return idle(c) })
	// A loser that ignored its cancellation and answered after the
	// release is recorded as a primary at its whole latency (not as a
	// censored lower bound): every primary ends up in the distribution.
	waitFor(t, "the losers' latencies to be recorded", func() bool {
		g := c.Stats().Op("GET")
		return g.Primary.Count == g.Requests
	})
	s = c.Stats()
	r := s.Replicas[stalled]
	if r.Wins != 0 || r.Failed != 0 || r.Copies <= r.Cancelled {
		t.Errorf("stalled replica: %d copies, %d wins, %d failed, %d cancelled; want no win, no failure, and a loser that read its reply", r.Copies, r.Wins, r.Failed, r.Cancelled)
	}
	// Only a copy that never reached a server (cancelled while waiting
	// for a connection) can leave a censored primary.
	var cancelled int64
	for _, r := range s.Replicas {
		cancelled += r.Cancelled
	}
	if g := s.Op("GET"); g.PrimaryCensored > cancelled {
		t.Errorf("GET: %d censored primaries, but only %d copies were cancelled before reaching a server", g.PrimaryCensored, cancelled)
	}
	if v, err := c.Get(ctx, "k").Result(); v != "v" || err != nil {
		t.Fatalf("Get after the stall = %q, %v", v, err)
	}
}

// TestWritesGoToThePrimaryOnce stalls the primary and sends a write while
// it is stalled: the write waits for the primary past the moment a hedge
// would have gone out (it cannot return before the release) and is applied
// exactly once, and no write command ever reaches the other replicas (INFO
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

	st := stall(t, servers[0])
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.Do(ctx, "INCR", "w:counter").Int64()
		done <- result{n, err}
	}()
	waitFor(t, "the write to be sent", func() bool { return c.Stats().Replicas[0].Writes == 1 })
	// Were writes hedged, a copy would go out 5 ms after the write was
	// sent and be answered by a running replica. Reads started after the
	// write show when that time has passed, whatever the scheduling: read
	// until one of them was hedged (one sent to the stalled primary is).
	for i := 0; c.Stats().Op("GET").Hedges == 0; i++ {
		if i == 200 {
			t.Fatal("200 reads and none hedged")
		}
		if v, err := c.Get(ctx, "w:counter").Result(); v != "41" || err != nil {
			t.Fatalf("Get from a replica = %q, %v; want 41", v, err)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("the write returned (%d, %v) while the primary was stalled", r.n, r.err)
	default:
	}
	for _, op := range c.Stats().Ops {
		if op.Op != "GET" {
			t.Errorf("the Hedger saw %s while a write was running; want GET alone", op.Op)
		}
	}
	release(t, st)
	if r := <-done; r.err != nil || r.n != 42 {
		t.Fatalf("INCR while the primary is stalled = %d, %v; want 42", r.n, r.err)
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
// held by a stalled replica, and returns only after the release; one made
// by NewFromOptions ends the loser by closing its clients, stall or not.
// Either way nothing runs after Close, and calls after Close fail with
// ErrClosed.
func TestCloseWaitsForLosers(t *testing.T) {
	servers := redistest.Start(t, 2)
	for _, owned := range []bool{false, true} {
		t.Run(fmt.Sprintf("owned=%v", owned), func(t *testing.T) {
			opts := []*redis.Options{patient(&redis.Options{Addr: servers[0].Addr}), patient(&redis.Options{Addr: servers[1].Addr})}
			var c *Client
			var err error
			if owned {
				c, err = NewFromOptions(opts, hedgeNow())
			} else {
				rcs := []*redis.Client{redis.NewClient(opts[0]), redis.NewClient(opts[1])}
				defer closeAll(rcs)
				c, err = New(rcs, hedgeNow())
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			seed(t, c, func(ctx context.Context, rc *redis.Client) error { return rc.Set(ctx, "c:k", "v", 0).Err() })
			st := stall(t, servers[1])
			for i := 0; c.Stats().Replicas[1].InFlight == 0; i++ {
				if i == 200 {
					t.Fatal("200 reads and none sent to the stalled replica")
				}
				if v, err := c.Get(ctx, "c:k").Result(); v != "v" || err != nil {
					t.Fatalf("Get = %q, %v", v, err)
				}
			}
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			if owned {
				// Closing the clients ends the loser's read: Close
				// returns with the server still stalled.
				if err := <-closed; err != nil {
					t.Logf("Close: %v", err)
				}
				if !idle(c) {
					t.Errorf("copies still running after Close: %+v", c.Stats().Replicas)
				}
				release(t, st)
			} else {
				waitFor(t, "Close to begin", c.gate.Closed)
				select {
				case err := <-closed:
					t.Fatalf("Close returned (%v) while a loser was held by the stalled replica", err)
				default:
				}
				release(t, st)
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
				if !idle(c) {
					t.Errorf("copies still running after Close: %+v", c.Stats().Replicas)
				}
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
		})
	}
}
