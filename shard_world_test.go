package hedge_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// shardWorld is a fan-out over 30 shards of 2 servers each, on synctest's
// clock: a request reads one leaf per shard, and needs every one. A new
// request starts every millisecond on average. A server runs its requests side by side.
// A leaf takes 0.3 to 0.5 ms, and one in ten 1.8 ms (by request and
// leaf, never by draw: a copy of a slow leaf is as slow): a request waits for its slowest leaves, about 2
// ms, so that the requests overlap, while each server is idle most of the
// time. Server 0, one of shard 0's two, stalls for 50 ms every 150 ms: a
// request there that meets a stall waits it out.
type shardWorld struct {
	requests int
	every    time.Duration
	period   time.Duration // server 0 stalls once in every period...
	stall    time.Duration // for this long
}

var tailWorld = shardWorld{requests: 3000, every: ms, period: 150 * ms, stall: 50 * ms}

// The world's load and stalls can be changed from the command line, to
// see where the default's gain ends (docs/fanout.md).
var (
	worldEvery  = flag.Duration("world.every", tailWorld.every, "TestShardsHedgeTheStalledServer: the mean time between requests")
	worldPeriod = flag.Duration("world.period", tailWorld.period, "TestShardsHedgeTheStalledServer: server 0 stalls once in every period")
)

const worldShards, worldReplicas = 30, 2

// serve is server's answer to copy a of leaf i of request k, sent at
// since the world began.
func (w shardWorld) serve(k, i int, a hedge.Attempt, server int, at time.Duration) time.Duration {
	x := splitmix(uint64(k)<<16 | uint64(i))
	d := 300*time.Microsecond + time.Duration(x%5)*50*time.Microsecond
	if x%10 == 9 {
		d = ms
	}
	if server != 0 {
		return d
	}
	// The stall of the period the request arrives in, or of the next.
	for p := at / w.period * w.period; p <= at+d; p += w.period {
		start := p + w.period/2
		if at < start+w.stall && at+d > start {
			return max(start+w.stall-at, 0) + d
		}
	}
	return d
}

// splitmix is SplitMix64's finaliser: a well-spread hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// shardWorldResult is what a run of a shardWorld saw.
type shardWorldResult struct {
	lat   []time.Duration // each request's, sorted
	stats hedge.Stats
}

func (r shardWorldResult) quantile(q float64) time.Duration {
	return r.lat[min(int(q*float64(len(r.lat))), len(r.lat)-1)]
}

// run sends w's requests through h. server maps a leaf's shard and its
// copy's Attempt to the server that serves it.
func (w shardWorld) run(t *testing.T, h *hedge.Hedger, server func(shard int, a hedge.Attempt) int) shardWorldResult {
	var res shardWorldResult
	begin := time.Now()
	arrivals := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := range w.requests {
		wg.Go(func() {
			start := time.Now()
			_, err := hedge.DoFan(context.Background(), h, "search", worldShards, hedge.FanOut{}, func(ctx context.Context, i int, a hedge.Attempt) (int, error) {
				d := w.serve(k, i, a, server(i, a), time.Since(begin))
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
					return i, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			})
			if err != nil {
				t.Errorf("request %d: %v", k, err)
			}
			mu.Lock()
			res.lat = append(res.lat, time.Since(start))
			mu.Unlock()
		})
		// Poisson arrivals, by a fixed seed: requests that came at fixed
		// steps would meet a hedge's retries (a delay apart) in step.
		time.Sleep(time.Duration(arrivals.ExpFloat64() * float64(w.every)))
	}
	wg.Wait()
	res.stats = h.OpStats("search")
	slices.Sort(res.lat)
	time.Sleep(time.Second) // the Hedger's timer goroutine lingers
	return res
}

// TestShardsHedgeTheStalledServer runs the world three ways: the
// default over Config.Shards, the same with hedging Off (the same
// per-shard balancing, no copies), and the pattern the docs used to
// give, one Hedger with Replicas: 2 whose leaf i goes to
// shards[i][a.Replica]. There, "replica 1" is 30 servers, which always
// hold some request's leaves: the spare-capacity rule refuses nearly
// every hedge as busy. With Shards, the rule reads each real server, the
// stalled leaves are hedged to their shard's other server, and the tail
// falls.
func TestShardsHedgeTheStalledServer(t *testing.T) {
	grid := hedge.ShardGrid(worldShards, worldReplicas)
	w := tailWorld
	w.every, w.period = *worldEvery, *worldPeriod
	run := func(cfg hedge.Config, server func(shard int, a hedge.Attempt) int) (r shardWorldResult) {
		synctest.Test(t, func(t *testing.T) {
			r = w.run(t, mustNew(t, cfg), server)
		})
		return r
	}
	byServer := func(_ int, a hedge.Attempt) int { return a.Replica }
	sharded := hedge.Config{Replicas: worldShards * worldReplicas, Shards: grid}
	def := run(sharded, byServer)
	sharded.Mode = hedge.Off
	off := run(sharded, byServer)
	old := run(hedge.Config{Replicas: worldReplicas}, func(shard int, a hedge.Attempt) int { return grid[shard][a.Replica] })

	leaves := float64(def.stats.Requests)
	for _, c := range []struct {
		name string
		r    shardWorldResult
	}{{"default", def}, {"off", off}, {"docs' pattern", old}} {
		s := c.r.stats
		t.Logf("%-13s p50 %v p99 %v p99.9 %v; %d hedges (%.2f%% of leaves), %d won; refused busy %d, head %d, payoff %d, fan-out %d",
			c.name, c.r.quantile(0.5), c.r.quantile(0.99), c.r.quantile(0.999), s.Hedges, 100*float64(s.Hedges)/leaves, s.HedgeWins,
			s.Refused[hedge.RefusedBusy], s.Refused[hedge.RefusedHead], s.Refused[hedge.RefusedPayoff], s.Refused[hedge.RefusedFanOut])
	}
	ratio := float64(def.quantile(0.99)) / float64(off.quantile(0.99))
	t.Logf("default against off: p99 %.2fx, p99.9 %.2fx; %v", ratio, float64(def.quantile(0.999))/float64(off.quantile(0.999)), def.stats.Shards[0])

	if ratio > 0.5 {
		t.Errorf("default p99 %v against %v with hedging off: want at most half", def.quantile(0.99), off.quantile(0.99))
	}
	if def.quantile(0.999)*2 > off.quantile(0.999) {
		t.Errorf("default p99.9 %v against %v with hedging off: want at most half", def.quantile(0.999), off.quantile(0.999))
	}
	if got := float64(def.stats.Hedges) / leaves; got > 0.05 {
		t.Errorf("default sent %.1f%% extra leaves: want at most 5%%", 100*got)
	}
	if p50 := def.quantile(0.5); p50 > off.quantile(0.5)*21/20 {
		t.Errorf("default p50 %v against %v with hedging off: want within 5%%", p50, off.quantile(0.5))
	}
	// The stalled server's leaves are shard 0's: the hedges that won are
	// there.
	if w := def.stats.Shards[0].HedgeWins; w == 0 || w*10 < def.stats.HedgeWins*9 {
		t.Errorf("shard 0: %v, of %d hedge wins in all; want nine in ten of them", def.stats.Shards[0], def.stats.HedgeWins)
	}
	// The docs' pattern: the spare-capacity rule reads 30 servers as one.
	if busyOld, busyDef := old.stats.Refused[hedge.RefusedBusy], def.stats.Refused[hedge.RefusedBusy]; busyOld < 5*max(busyDef, 1) {
		t.Errorf("refused as busy: %d with the docs' pattern, %d with Shards; want the docs' pattern to refuse at least five times as many", busyOld, busyDef)
	}
	if old.quantile(0.99) < 2*def.quantile(0.99) {
		t.Errorf("p99 %v with the docs' pattern, %v with Shards; want the docs' pattern at least twice as slow", old.quantile(0.99), def.quantile(0.99))
	}
}
