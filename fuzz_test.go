package hedge_test

import (
	"context"
	"errors"
	"math"
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
