package hedge_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/quantile"
)

// FuzzConfig builds configurations from arbitrary numbers. New must either
// refuse them with an error or return a Hedger whose Do works; values
// outside the documented ranges must always be refused; and nothing may
// panic.
func FuzzConfig(f *testing.F) {
	f.Add(95.0, 1000, 100, int64(0), int64(0), int64(0), 2, 0, 3, 0.1, 10.0, false, "on", 1.0)
	f.Add(40.0, 10, 11, int64(-1), int64(5), int64(1), 9, -1, -1, 2.0, 0.5, true, "shadow", 0.0)
	f.Add(math.NaN(), 0, 0, int64(math.MaxInt64), int64(0), int64(0), 5, 1, 64, 1e-9, 1e12, false, "off", math.Inf(1))
	f.Fuzz(func(t *testing.T, p float64, window, minSamples int, warmup, floor, ceiling int64,
		maxAttempts, inFlight, replicas int, ratio, burst float64, forceLow bool, mode string, rollout float64) {
		cfg := hedge.Config{
			Delay: hedge.Percentile{P: p, Window: window, MinSamples: minSamples, Warmup: time.Duration(warmup),
				Floor: time.Duration(floor), Ceiling: time.Duration(ceiling), AllowBelowMedian: forceLow},
			MaxAttempts: maxAttempts, MaxHedgesInFlight: inFlight, Replicas: replicas, Rollout: rollout,
		}
		b, berr := hedge.NewBudget(ratio, burst)
		if berr == nil {
			cfg.Budget = b
		} else if ratio > 0 && ratio <= 1 && burst >= 1 && burst <= 1e9 && ratio >= 0.001 {
			t.Fatalf("NewBudget(%v, %v) refused valid values: %v", ratio, burst, berr)
		}
		m, merr := hedge.ParseMode(mode)
		if merr == nil {
			cfg.Mode = m
		}
		h, err := hedge.New(cfg)
		mustFail := maxAttempts < 0 || maxAttempts > hedge.HardMaxAttempts || inFlight < 0 || replicas < 0 ||
			!(rollout >= 0 && rollout <= 1) || warmup < 0 || floor < 0 || ceiling < 0 ||
			(p != 0 && !(p > 0 && p < 100)) || (p != 0 && p < 50 && !forceLow) || window < 0 || window > 1<<24 ||
			(replicas == 1 && maxAttempts != 1) || int64(quantile.WindowBytes(window))*101 > hedge.MaxEstimatorMemory
		if mustFail && err == nil {
			t.Fatalf("New accepted an invalid config: %+v", cfg)
		}
		if err != nil && !mustFail && window > 0 && window <= 1<<24 && strings.Contains(err.Error(), "latency windows") {
			t.Fatalf("window %d refused for its memory, under the limit: %v", window, err)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if replicas > 64 {
			return // a valid but large config; Do below needs no replicas
		}
		v, err := hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
			if a.Index >= hedge.HardMaxAttempts || (replicas > 0 && (a.Replica < 0 || a.Replica >= replicas)) {
				return 0, hedge.Permanent(errors.New("bad attempt"))
			}
			return a.Index + 1, nil
		})
		if err != nil || v < 1 {
			t.Fatalf("Do = %d, %v", v, err)
		}
	})
}

// FuzzShards builds shard layouts from arbitrary bytes: each byte is a
// server of the current shard, and 0xff starts the next shard. New must
// refuse a layout that breaks Config.Shards' rules, with an error that
// matches ErrInvalidConfig, and accept every other. On an accepted one,
// every copy DoShard sends goes to a server of its shard that holds no
// other copy of the request, until the shard has none left.
func FuzzShards(f *testing.F) {
	f.Add(uint8(6), []byte{0, 1, 0xff, 2, 3, 0xff, 4, 5}, uint8(3))
	f.Add(uint8(3), []byte{0, 1, 0xff, 1, 2, 0xff, 2}, uint8(5))
	f.Add(uint8(2), []byte{0, 0xff, 0xff, 1}, uint8(2))
	f.Add(uint8(4), []byte{0, 1, 1, 0xff, 7}, uint8(1))
	f.Fuzz(func(t *testing.T, servers uint8, layout []byte, attempts uint8) {
		shards := [][]int{{}}
		for _, b := range layout {
			if b == 0xff {
				shards = append(shards, []int{})
				continue
			}
			shards[len(shards)-1] = append(shards[len(shards)-1], int(b))
		}
		valid := servers > 0 && (servers != 1 || attempts%hedge.HardMaxAttempts == 0)
		for _, s := range shards {
			valid = valid && len(s) > 0
			for j, v := range s {
				valid = valid && v < int(servers) && !slices.Contains(s[:j], v)
			}
		}
		maxAttempts := 1 + int(attempts)%hedge.HardMaxAttempts
		h, err := hedge.New(hedge.Config{Replicas: int(servers), Shards: shards, MaxAttempts: maxAttempts, NoBudget: true, Delay: hedge.Fixed(time.Hour)})
		if valid != (err == nil) {
			t.Fatalf("layout %v over %d servers: New = %v; want valid %v", shards, servers, err, valid)
		}
		if err != nil {
			if !errors.Is(err, hedge.ErrInvalidConfig) {
				t.Fatalf("error %v does not match ErrInvalidConfig", err)
			}
			return
		}
		errDown := errors.New("down")
		for s, servers := range shards {
			var used []int
			hedge.DoShard(context.Background(), h, "op", s, func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Shard != s || !slices.Contains(servers, a.Replica) || slices.Contains(used, a.Replica) {
					t.Errorf("shard %d (servers %v): copy %+v after copies on %v", s, servers, a, used)
				}
				used = append(used, a.Replica)
				return 0, errDown // the next copy goes at once
			})
			if want := min(len(servers), maxAttempts); len(used) != want {
				t.Errorf("shard %d (servers %v): copies on %v; want %d, one per server up to MaxAttempts", s, servers, used, want)
			}
		}
	})
}
