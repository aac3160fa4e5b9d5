package try

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tailcut/hedge/internal/drill"
	"github.com/tailcut/hedge/internal/redistest"
)

// startRedis starts n redis-server replicas holding the same keys, and
// returns their addresses (the first as a redis:// URL) and the keys.
func startRedis(t *testing.T, n int) ([]*redistest.Server, []string, []string) {
	t.Helper()
	servers := redistest.Start(t, n)
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("item:%d", i))
	}
	var addrs []string
	for i, s := range servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
		for _, k := range keys {
			if err := rc.Set(context.Background(), k, strings.Repeat("v", 100), 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
		addr := s.Addr
		if i == 0 {
			addr = "redis://" + addr + "/0"
		}
		addrs = append(addrs, addr)
	}
	return servers, addrs, keys
}

func redisOptions(addrs, keys []string, a []Arm) Options {
	return Options{
		Replicas: addrs, Arms: a, Redis: &RedisOptions{Keys: keys},
		Rate: 200, Ramp: 500 * time.Millisecond, Warmup: 1500 * time.Millisecond, Duration: 2500 * time.Millisecond,
		Timeout: 5 * time.Second, Seed: 13, Resamples: 1000,
	}
}

// stallOnSchedule makes srv sleep (DEBUG SLEEP, from a connection of its
// own) for stall every period until the returned function is called.
func stallOnSchedule(t *testing.T, srv *redistest.Server, stall, period time.Duration) (stop func()) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true, ReadTimeout: 5 * time.Second})
	stopTicks := onSchedule(period, func() bool {
		if err := rc.Do(context.Background(), "DEBUG", "SLEEP", fmt.Sprintf("%g", stall.Seconds())).Err(); err != nil {
			t.Errorf("DEBUG SLEEP: %v", err)
			return false
		}
		return true
	})
	return func() { stopTicks(); rc.Close() }
}

// One replica of three sleeps 120 ms every 250 ms. The default picker
// steers reads away from a replica busy with a read, so in each arm
// about one read a sleep is caught, and waits up to 120 ms: the unhedged
// arm's p99 lands in the sleeps. The fixed delay hedges such a read from
// the first one on (after 30 ms: a read alone on its replica waits three
// delays, the head wait of hedge.Config.PayoffWinRate), cutting the p99
// about threefold.
func TestRedisStallsTailCut(t *testing.T) {
	servers, addrs, keys := startRedis(t, 3)
	o := redisOptions(addrs, keys, arms(t, "none,fixed:10ms"))
	o.Rate, o.MaxRate, o.AllowHighRate, o.Duration = 250, 250, true, 8*time.Second // 1,000 reads an arm: a p99 of ten, whose interval is sure of the cut
	res := carried(t, []int{0, 1}, 30*time.Millisecond, func() *Result {
		stop := stallOnSchedule(t, servers[2], 120*time.Millisecond, 250*time.Millisecond)
		res, err := Run(context.Background(), o)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		return res
	})
	logSummary(t, res)
	none, fixed := armByName(t, res, "none"), armByName(t, res, "fixed:10ms")
	t.Logf("Redis: fixed:10ms p99 ratio %.2f (%.2f-%.2f)", fixed.P99.Ratio, fixed.P99.RatioLo, fixed.P99.RatioHi)
	if fixed.Verdict != drill.TailCut {
		t.Errorf("fixed: verdict %s (%s), want %s", fixed.Verdict, fixed.Why, drill.TailCut)
	}
	if fixed.Hedges == 0 || fixed.HedgeWins == 0 || none.Hedges != 0 {
		t.Errorf("fixed: %d hedges, %d wins; none: %d hedges; want some, some, none", fixed.Hedges, fixed.HedgeWins, none.Hedges)
	}
	if none.Errors != 0 || none.Statuses["OK"] != none.Requests {
		t.Errorf("none: %d errors, statuses %v of %d requests; want every read answered", none.Errors, none.Statuses, none.Requests)
	}
	if res.Protocol != ProtocolRedis || res.Methods["GET"] != len(keys) {
		t.Errorf("protocol %q, methods %v", res.Protocol, res.Methods)
	}
}

// Without stalls, MGET of 5 keys: never TAIL CUT, and every key read.
func TestRedisNoStallsNoTailCut(t *testing.T) {
	servers, addrs, keys := startRedis(t, 3)
	o := redisOptions(addrs, keys, arms(t, "none,default"))
	o.Redis.MGet = 5
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	logSummary(t, res)
	if def := armByName(t, res, "default"); def.Verdict == drill.TailCut {
		t.Errorf("default: verdict %s (%s) without stalls", def.Verdict, def.Why)
	}
	// try only reads: no key was written, none added.
	for _, s := range servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
		info, err := rc.Info(context.Background(), "commandstats").Result()
		n, _ := rc.DBSize(context.Background()).Result()
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "cmdstat_mget:") || n != int64(len(keys)) {
			t.Errorf("%s: %d keys (want %d), commandstats:\n%s", s.Addr, n, len(keys), info)
		}
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "cmdstat_") && !strings.HasPrefix(line, "cmdstat_mget:") && !strings.HasPrefix(line, "cmdstat_set:") &&
				!strings.HasPrefix(line, "cmdstat_ping:") && !strings.HasPrefix(line, "cmdstat_info:") && !strings.HasPrefix(line, "cmdstat_hello:") && !strings.HasPrefix(line, "cmdstat_client|") {
				t.Errorf("%s: a command other than reads: %s", s.Addr, line)
			}
		}
	}
}

func TestRedisOptionsValidate(t *testing.T) {
	a := arms(t, "none,default")
	two := []string{"127.0.0.1:1", "redis://127.0.0.1:2/3"}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"no keys", Options{Replicas: two, Arms: a, Redis: &RedisOptions{}}},
		{"credentials in the URL", Options{Replicas: []string{"redis://u:hunter2@127.0.0.1:1", two[1]}, Arms: a, Redis: &RedisOptions{Keys: []string{"k"}}}},
		{"http replica", Options{Replicas: []string{"http://127.0.0.1:1", two[1]}, Arms: a, Redis: &RedisOptions{Keys: []string{"k"}}}},
		{"same replica twice", Options{Replicas: []string{"127.0.0.1:1", "redis://127.0.0.1:1"}, Arms: a, Redis: &RedisOptions{Keys: []string{"k"}}}},
		{"headers", Options{Replicas: two, Arms: a, Redis: &RedisOptions{Keys: []string{"k"}}, Header: map[string][]string{"X": {"1"}}}},
		{"mget too big", Options{Replicas: two, Arms: a, Redis: &RedisOptions{Keys: []string{"k"}, MGet: MaxMGet + 1}}},
		{"gRPC too", Options{Replicas: two, Arms: a, Redis: &RedisOptions{Keys: []string{"k"}}, GRPC: &GRPCOptions{}}},
	} {
		err := tc.o.Defaults().Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error echoes the password: %v", tc.name, err)
		}
	}
	ok := Options{Replicas: two, Arms: a, Redis: &RedisOptions{Keys: []string{"k"}, MGet: 3}}
	if err := ok.Defaults().Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
