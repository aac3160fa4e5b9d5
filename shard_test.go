package hedge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

func TestShardGrid(t *testing.T) {
	g := hedge.ShardGrid(3, 2)
	want := [][]int{{0, 1}, {2, 3}, {4, 5}}
	if !slices.EqualFunc(g, want, slices.Equal) {
		t.Fatalf("ShardGrid(3, 2) = %v; want %v", g, want)
	}
	// A shard's list is its own: appending to one leaves the next alone.
	_ = append(g[0], 9)
	if g[1][0] != 2 {
		t.Errorf("appending to shard 0 changed shard 1: %v", g)
	}
	for _, c := range [][2]int{{0, 2}, {2, 0}, {-1, 3}} {
		if g := hedge.ShardGrid(c[0], c[1]); g != nil {
			t.Errorf("ShardGrid(%d, %d) = %v; want nil", c[0], c[1], g)
		}
	}
}

func TestShardsConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  hedge.Config
		want string
	}{
		{"empty", hedge.Config{Replicas: 4, Shards: [][]int{}}, "Config.Shards is empty: list the servers of each shard"},
		{"no replicas", hedge.Config{Shards: hedge.ShardGrid(2, 2)}, "Config.Replicas = 0: set Replicas to the number of servers (for hedge.ShardGrid(n, r), n*r)"},
		{"out of range", hedge.Config{Replicas: 3, Shards: hedge.ShardGrid(2, 2)}, "Config.Shards[1][1] = 3 is not a server: use indices in [0, 3)"},
		{"negative", hedge.Config{Replicas: 3, Shards: [][]int{{0, -1}}}, "Config.Shards[0][1] = -1 is not a server"},
		{"duplicate", hedge.Config{Replicas: 3, Shards: [][]int{{0, 1}, {2, 1, 2}}}, "Config.Shards[1] lists server 2 twice: list each server of a shard once"},
		{"no server", hedge.Config{Replicas: 3, Shards: [][]int{{0, 1}, {}}}, "Config.Shards[1] lists no server: give each shard at least one server"},
		{"many", hedge.Config{Replicas: 2, Shards: [][]int{{}, {}, {}, {}, {}}}, "Config.Shards has more mistakes of the same kinds"},
		{"names", hedge.Config{Replicas: 4, Shards: hedge.ShardGrid(2, 2), ReplicaNames: []string{"a:1"}}, "Config.ReplicaNames has 1 names for 4 replicas: give one name per server"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := hedge.New(c.cfg)
			if !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: %v; want an ErrInvalidConfig that says %q", err, c.want)
			}
		})
	}
	// A server may hold several shards, and a shard may have one server.
	if _, err := hedge.New(hedge.Config{Replicas: 3, Shards: [][]int{{0, 1}, {1, 2}, {2}}, ReplicaNames: []string{"a", "b", "c"}}); err != nil {
		t.Errorf("New with shared servers: %v", err)
	}
}

// Do and DoHeld cannot tell which shard serves the request: they send
// nothing, and say what to use instead.
func TestDoRefusesShards(t *testing.T) {
	h := mustNew(t, hedge.Config{Replicas: 4, Shards: hedge.ShardGrid(2, 2)})
	called := false
	fn := func(ctx context.Context, a hedge.Attempt) (int, error) { called = true; return 1, nil }
	_, err := hedge.Do(context.Background(), h, "get", fn)
	_, release, errHeld := hedge.DoHeld(context.Background(), h, "get", fn, nil)
	release()
	for _, err := range []error{err, errHeld} {
		if !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "hedge.DoShard") || !strings.Contains(err.Error(), "hedge.DoFan") {
			t.Errorf("%v; want an ErrInvalidConfig that names DoShard and DoFan", err)
		}
	}
	if called || h.OpStats("get").Requests != 0 {
		t.Error("the attempt ran")
	}
}

// DoShard's copies go to the shard's servers only: the primary to one,
// the hedge to the other.
func TestDoShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 6, Shards: hedge.ShardGrid(3, 2), Delay: hedge.Fixed(10 * ms), NoBudget: true})
		for range 20 {
			var got []hedge.Attempt
			var mu sync.Mutex
			v, err := hedge.DoShard(context.Background(), h, "get", 1, func(ctx context.Context, a hedge.Attempt) (int, error) {
				mu.Lock()
				got = append(got, a)
				mu.Unlock()
				if a.Index == 0 {
					<-ctx.Done() // stuck until the hedge wins
					return 0, ctx.Err()
				}
				return a.Replica, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Replica == got[1].Replica || v != got[1].Replica {
				t.Fatalf("copies %+v, value %d; want a primary and a hedge on two servers, the hedge's value", got, v)
			}
			for _, a := range got {
				if a.Shard != 1 || (a.Replica != 2 && a.Replica != 3) {
					t.Errorf("copy %+v; want shard 1, on server 2 or 3", a)
				}
			}
		}
		st := h.OpStats("get")
		want := []hedge.ShardStats{{Shard: 0}, {Shard: 1, Leaves: 20, Hedges: 20, HedgeWins: 20}, {Shard: 2}}
		if !slices.Equal(st.Shards, want) {
			t.Errorf("Stats.Shards = %v; want %v", st.Shards, want)
		}
		settle()
	})
}

func TestDoShardBadShard(t *testing.T) {
	fn := func(ctx context.Context, a hedge.Attempt) (int, error) {
		t.Errorf("copy %+v ran", a)
		return 0, nil
	}
	h := mustNew(t, hedge.Config{Replicas: 4, Shards: hedge.ShardGrid(2, 2)})
	for _, s := range []int{-1, 2} {
		_, err := hedge.DoShard(context.Background(), h, "get", s, fn)
		if !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "is not a shard: use 0 to 1") {
			t.Errorf("DoShard(shard %d): %v; want an ErrInvalidConfig that gives the range", s, err)
		}
	}
	flat := mustNew(t, hedge.Config{Replicas: 2})
	if _, err := hedge.DoShard(context.Background(), flat, "get", 0, fn); !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "without Config.Shards") {
		t.Errorf("DoShard without Shards: %v; want an ErrInvalidConfig", err)
	}
}

// A fan-out's leaf i goes to shard i mod len(Shards), or to FanOut.Shard's
// choice; a leaf whose shard is out of range fails alone, unsent.
func TestDoFanShardMapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 6, Shards: hedge.ShardGrid(3, 2)})
		check := func(f hedge.FanOut, want func(i int) int) hedge.FanResult[int] {
			res, _ := hedge.DoFan(context.Background(), h, "read", 7, f, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
				if a.Shard != want(i) || a.Replica/2 != a.Shard {
					t.Errorf("leaf %d: copy %+v; want shard %d, on one of its servers", i, a, want(i))
				}
				return i, nil
			})
			return res
		}
		res := check(hedge.FanOut{}, func(i int) int { return i % 3 })
		if slices.ContainsFunc(res.Errs, func(err error) bool { return err != nil }) {
			t.Errorf("errors %v", res.Errs)
		}
		rev := func(i int) int { return 2 - i%3 }
		check(hedge.FanOut{Shard: rev}, rev)

		bad := func(i int) int {
			if i == 4 {
				return 3
			}
			return 0
		}
		res = check(hedge.FanOut{Shard: bad, Need: 6}, func(int) int { return 0 })
		for i, err := range res.Errs {
			if i == 4 {
				if !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "FanOut.Shard(4) = 3 is not a shard: use 0 to 2") {
					t.Errorf("leaf 4: %v; want an ErrInvalidConfig that gives the range", err)
				}
			} else if err != nil {
				t.Errorf("leaf %d: %v", i, err)
			}
		}
		_, err := hedge.DoFan(context.Background(), mustNew(t, hedge.Config{Replicas: 2}), "read", 2, hedge.FanOut{Shard: rev}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			t.Errorf("leaf %d ran", i)
			return 0, nil
		})
		if !errors.Is(err, hedge.ErrInvalidConfig) || !strings.Contains(err.Error(), "FanOut.Shard is set on a Hedger without Config.Shards") {
			t.Errorf("FanOut.Shard without Config.Shards: %v; want an ErrInvalidConfig", err)
		}
		settle()
	})
}

// Leaves that FanOut.Need did not need, cancelled or never sent, are
// counted in Stats.NotNeeded and never in Stats.Failures.
func TestDoFanNotNeededIsNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 60, Shards: hedge.ShardGrid(30, 2), Delay: hedge.Fixed(time.Hour)})
		// 27 of 30: the last three leaves are cancelled each time.
		for range 10 {
			_, err := hedge.DoFan(context.Background(), h, "read", 30, hedge.FanOut{Need: 27}, sleepLeaf(func(i int, _ hedge.Attempt) time.Duration {
				return time.Duration(i+1) * ms
			}))
			if err != nil {
				t.Fatal(err)
			}
		}
		// Two canaries that are all the fan-out needs: 28 leaves never go.
		if _, err := hedge.DoFan(context.Background(), h, "read", 30, hedge.FanOut{Need: 2, Canaries: 2}, sleepLeaf(func(int, hedge.Attempt) time.Duration { return ms })); err != nil {
			t.Fatal(err)
		}
		st := h.OpStats("read")
		if st.NotNeeded != 10*3+28 || st.Failures != 0 || st.Fan.NotNeeded != 30 {
			t.Errorf("NotNeeded %d (of which cancelled %d), Failures %d; want 58 (30), 0", st.NotNeeded, st.Fan.NotNeeded, st.Failures)
		}
		for _, sh := range st.Shards {
			if sh.Failures != 0 {
				t.Errorf("%v; want no failure", sh)
			}
		}
		settle()
	})
}

// Stats.Shards shows which shard holds the requests up, and which fails.
func TestShardStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 8, Shards: hedge.ShardGrid(4, 2), Delay: hedge.Fixed(time.Hour), ReplicaNames: []string{"a", "b", "c", "d", "e", "f", "g", "h"}})
		errDown := errors.New("down")
		for k := range 10 {
			hedge.DoFan(context.Background(), h, "read", 8, hedge.FanOut{Straggle: -1}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
				switch {
				case i == 2 && k < 3:
					return 0, hedge.Permanent(errDown) // shard 2 fails three times
				case i == 7:
					time.Sleep(5 * ms) // shard 3 answers last
				default:
					time.Sleep(ms)
				}
				return i, nil
			})
		}
		st := h.OpStats("read")
		want := []hedge.ShardStats{
			{Shard: 0, Leaves: 20},
			{Shard: 1, Leaves: 20},
			{Shard: 2, Leaves: 20, Failures: 3},
			{Shard: 3, Leaves: 20, Stragglers: 7},
		}
		if !slices.Equal(st.Shards, want) {
			t.Errorf("Stats.Shards = %v; want %v", st.Shards, want)
		}
		if s := st.String(); !strings.Contains(s, "4 shards, most stragglers: shard 3: 20 leaves") {
			t.Errorf("Stats.String() = %q; want the shard with most stragglers", s)
		}
		rs := h.ReplicaStats()
		if rs[5].Name != "f" || !strings.HasPrefix(rs[5].String(), "replica f: 0 in flight") {
			t.Errorf("ReplicaStats[5]: name %q, %q", rs[5].Name, rs[5].String())
		}
		settle()
	})
}

// A server that holds two shards is one server: the load of one shard's
// requests there keeps the other shard's copies off it, for the picker
// and for the spare-capacity rule.
func TestShardsShareAServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Server 1 holds shards 0 and 1.
		h := mustNew(t, hedge.Config{Replicas: 3, Shards: [][]int{{0, 1}, {1, 2}}, Delay: hedge.Fixed(10 * ms), PayoffWinRate: -1})
		// Two requests of shard 1 hold its servers, 1 and 2.
		release := make(chan struct{})
		var held sync.WaitGroup
		var on [3]atomic.Int32
		for range 2 {
			held.Go(func() {
				hedge.DoShard(context.Background(), h, "b", 1, func(ctx context.Context, a hedge.Attempt) (int, error) {
					on[a.Replica].Add(1)
					<-release
					return 0, nil
				})
			})
		}
		synctest.Wait()
		if on[1].Load() != 1 || on[2].Load() != 1 {
			t.Errorf("shard 1's requests on servers 1 and 2: %d, %d; want one each", on[1].Load(), on[2].Load())
			close(release)
			held.Wait()
			settle()
			return
		}
		// Shard 0's primaries all go to server 0, the idle one.
		for range 20 {
			hedge.DoShard(context.Background(), h, "a", 0, func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Replica != 0 {
					t.Errorf("shard 0's primary on server %d; want server 0, since server 1 is busy with shard 1", a.Replica)
				}
				return 0, nil
			})
		}
		// A stuck one's hedge would go to server 1, still busy: refused.
		start := time.Now()
		done := make(chan hedge.Attempt)
		go func() {
			var won hedge.Attempt
			hedge.DoShard(context.Background(), h, "a", 0, func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Index == 0 {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				won = a
				return 0, nil
			})
			done <- won
		}()
		time.Sleep(25 * ms)
		if st := h.OpStats("a"); st.Hedges != 0 || st.Refused[hedge.RefusedBusy] == 0 {
			t.Errorf("while server 1 is busy: %d hedges, %d refused as busy; want none sent, refused as busy", st.Hedges, st.Refused[hedge.RefusedBusy])
		}
		close(release) // server 1 is free: the next try goes
		won := <-done
		if won.Replica != 1 || won.Index != 1 {
			t.Errorf("the hedge: %+v; want copy 1 on server 1", won)
		}
		if took := time.Since(start); took != 30*ms {
			t.Errorf("the stuck request took %v; want 30ms: the hedge refused at 10 and 20ms, sent at 30ms", took)
		}
		held.Wait()
		settle()
	})
}

// The sibling trigger's mark counts the share of the leaves one stuck
// server holds, as the flat mark counts 1/replicas. Over 30 shards of 2
// servers one holds 1/60 of the leaves, and the mark is three quarters,
// as over 60 replicas; with every leaf on shard 0, of 2 servers, one
// holds half of them, and the mark is half the leaves (1 - 1.5/2,
// raised to 0.5). Leaf i takes i+1 ms, and leaf 29's primary is stuck:
// the 23rd (or 15th) answer comes at 23 (15) ms, so leaf 29 is a
// straggler at 69 (45) ms, and its copy answers 30 ms later.
func TestDoFanShardsMark(t *testing.T) {
	for _, c := range []struct {
		name  string
		shard func(int) int
		want  time.Duration
	}{
		{"grid", nil, 99 * ms},
		{"one shard", func(int) int { return 0 }, 75 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := mustNew(t, hedge.Config{Replicas: 60, Shards: hedge.ShardGrid(30, 2), Delay: hedge.Fixed(time.Hour), PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad})
				start := time.Now()
				_, err := hedge.DoFan(context.Background(), h, "read", 30, hedge.FanOut{Shard: c.shard}, sleepLeaf(func(i int, a hedge.Attempt) time.Duration {
					if i == 29 && a.Index == 0 {
						return time.Hour
					}
					return time.Duration(i+1) * ms
				}))
				if took := time.Since(start); err != nil || took != c.want {
					t.Errorf("took %v, %v; want %v", took, err, c.want)
				}
				settle()
			})
		})
	}
}

// The fan-out's budget of extra copies counts the leaves one stuck server
// holds, by the shards it holds: 30 keys that all live on shard 0, of 2
// servers, put about 15 leaves on each; the default budget, twice 15,
// lets every leaf stuck on server 0 be hedged, where counting 30 leaves
// over 60 servers would allow 2.
func TestDoFanShardsHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 60, Shards: hedge.ShardGrid(30, 2), Delay: hedge.Fixed(time.Hour), NoBudget: true, PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
		defer cancel()
		var stuck atomic.Int64
		_, err := hedge.DoFan(ctx, h, "mget", 30, hedge.FanOut{Shard: func(int) int { return 0 }, Mark: 0.3}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
			if a.Replica == 0 && a.Index == 0 {
				stuck.Add(1)
				<-ctx.Done()
				return 0, ctx.Err()
			}
			time.Sleep(ms)
			return i, nil
		})
		st := h.OpStats("mget")
		if err != nil || st.Fan.Extra != stuck.Load() || st.Refused[hedge.RefusedFanOut] != 0 {
			t.Errorf("%v: %d extra copies for %d leaves stuck on server 0, %d refused by the fan-out's budget; want each stuck leaf hedged", err, st.Fan.Extra, stuck.Load(), st.Refused[hedge.RefusedFanOut])
		}
		settle()
	})
}

// When the server the Picker chose for a hedge says it is busy, Place
// asks the Picker again, leaving it out: the next choice is another
// server of the same shard, never one of another shard.
func TestDoShardPlaceSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 20 {
			// A Hedger of its own each time: the stuck primary of the
			// last, cancelled, would count as load on its server.
			h := mustNew(t, hedge.Config{Replicas: 6, Shards: [][]int{{0, 1, 2}, {3, 4, 5}}, Delay: hedge.Fixed(10 * ms), PayoffWinRate: -1})
			var free atomic.Int64 // the server of shard 0 that has room
			v, err := hedge.DoShard(context.Background(), h, "get", 0, func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Index > 0 {
					return a.Replica, nil
				}
				// The primary is stuck. Of the other two servers, the
				// first says it is busy; the second says nothing.
				others := slices.DeleteFunc([]int{0, 1, 2}, func(v int) bool { return v == a.Replica })
				h.ReportLoad(others[0], hedge.Load{Running: 4, Workers: 1})
				free.Store(int64(others[1]))
				<-ctx.Done()
				return 0, ctx.Err()
			})
			if err != nil || int64(v) != free.Load() {
				t.Errorf("the hedge went to server %d, %v; want server %d, the one of shard 0 with room", v, err, free.Load())
			}
			if st := h.OpStats("get"); st.Hedges != 1 || st.Refused[hedge.RefusedBusy] != 0 {
				t.Errorf("%d hedges, %d refused as busy; want 1, none", st.Hedges, st.Refused[hedge.RefusedBusy])
			}
			settle()
		}
	})
}

// Probation is per server: a server that fails the copies of one shard
// is out of the picks of every shard it holds.
func TestShardsProbationPerServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Server 1 holds shards 0 and 1.
		h := mustNew(t, hedge.Config{Replicas: 3, Shards: [][]int{{0, 1}, {1, 2}}, Delay: hedge.Fixed(10 * ms), NoBudget: true})
		errDown := errors.New("connection reset")
		for i := 0; !h.ReplicaStats()[1].Probation; i++ {
			if i == 100 {
				t.Fatalf("server 1 not on probation after 100 requests: %v", h.ReplicaStats()[1])
			}
			hedge.DoShard(context.Background(), h, "a", 0, func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Replica == 1 {
					return 0, errDown
				}
				return 0, nil
			})
		}
		for range 20 {
			hedge.DoShard(context.Background(), h, "b", 1, func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Replica != 2 {
					t.Errorf("shard 1's copy on server %d; want 2, while server 1 is on probation", a.Replica)
				}
				return 0, nil
			})
		}
		settle()
	})
}

// A shard of one server has no other for a hedge nor for a retry: the
// copy is refused (RefusedReplicas), and never sent to another shard's
// server.
func TestDoShardOneServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Replicas: 3, Shards: [][]int{{0, 1}, {2}}, Delay: hedge.Fixed(10 * ms), NoBudget: true, PayoffWinRate: -1})
		errDown := errors.New("connection reset")
		for _, fail := range []error{errDown, hedge.NotSent(errDown), nil} {
			copies := 0
			_, err := hedge.DoShard(context.Background(), h, "get", 1, func(ctx context.Context, a hedge.Attempt) (int, error) {
				copies++
				if a.Replica != 2 {
					t.Errorf("copy on server %d; want 2, shard 1's only server", a.Replica)
				}
				if fail == nil {
					time.Sleep(50 * ms) // slow: a hedge is due at 10ms
				}
				return 0, fail
			})
			if copies != 1 || !errors.Is(err, fail) {
				t.Errorf("failing with %v: %d copies, %v; want one copy and its error", fail, copies, err)
			}
		}
		if st := h.OpStats("get"); st.Refused[hedge.RefusedReplicas] < 2 || st.Hedges != 0 || st.Failovers != 0 {
			t.Errorf("%d hedges, %d failovers, %d refused for want of a server; want none, none, at least 2", st.Hedges, st.Failovers, st.Refused[hedge.RefusedReplicas])
		}
		settle()
	})
}

// Picker.Zones names each server's zone; a shard's Picker reads its own
// servers' zones, and sends a hedge to another zone when the shard has
// one.
func TestDoShardZones(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		zones := []string{"a", "a", "b", "b", "a", "a"}
		h := mustNew(t, hedge.Config{Replicas: 6, Shards: [][]int{{0, 1, 2}, {3, 4, 5}}, Picker: hedge.Picker{Zones: zones}, Delay: hedge.Fixed(10 * ms), NoBudget: true, PayoffWinRate: -1, MaxReplicaLoad: hedge.AnyReplicaLoad})
		for k := range 40 {
			shard := k % 2
			var copies [2]int
			hedge.DoShard(context.Background(), h, "get", shard, func(ctx context.Context, a hedge.Attempt) (int, error) {
				copies[a.Index] = a.Replica
				if a.Index == 0 {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return 0, nil
			})
			if copies[0]/3 != shard || copies[1]/3 != shard || zones[copies[0]] == zones[copies[1]] {
				t.Errorf("shard %d: copies on servers %v, zones %s and %s; want two zones of the shard", shard, copies, zones[copies[0]], zones[copies[1]])
			}
		}
		settle()
	})
}

// TestDoFanShardsAllocations: a sharded DoFan in the default layout (leaf
// i on shard i mod the shards) allocates no more than a flat one over as
// many replicas: its defaults depend only on the number of leaves, and
// are kept from one call to the next.
func TestDoFanShardsAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocations")
	}
	const n = 40
	leaf := func(_ context.Context, i int, _ hedge.Attempt) (int, error) { return i, nil }
	flat := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 40})
	sharded := mustNew(t, hedge.Config{Delay: hedge.Fixed(time.Hour), Replicas: 40, Shards: hedge.ShardGrid(20, 2)})
	allocs := func(h *hedge.Hedger) float64 {
		return testing.AllocsPerRun(200, func() {
			if _, err := hedge.DoFan(context.Background(), h, "leaf", n, hedge.FanOut{}, leaf); err != nil {
				t.Fatal(err)
			}
		})
	}
	if f, s := allocs(flat), allocs(sharded); s > f+0.5 {
		t.Errorf("a sharded DoFan of %d leaves allocates %.1f times, a flat one %.1f; want no more", n, s, f)
	}
}
