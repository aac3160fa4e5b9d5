package hedge_test

import (
	"context"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

// BenchmarkDoLive measures a call that is not hedged under live settings
// (Hedger.SetLive): none, settings for every class, and settings of its
// own class among others.
func BenchmarkDoLive(b *testing.B) {
	for _, tc := range []struct {
		name string
		live hedge.Live
	}{
		{"none", hedge.Live{}},
		{"settings", hedge.Live{Settings: hedge.Settings{MaxAttempts: 3, BudgetRatio: 0.2, BudgetBurst: 5, MaxHedgesPerSecond: 100}}},
		{"ops", hedge.Live{Ops: map[string]hedge.Settings{"op": {MaxAttempts: 3}, "scan": {Mode: hedge.Shadow}}}},
	} {
		h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.SetLive(tc.live); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hedge.Do(context.Background(), h, "op", trivial)
			}
		})
	}
}
