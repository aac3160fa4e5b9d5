package hedgewatch_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgewatch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ms = time.Millisecond

// phase runs n calls one after another; slow of them have a primary stuck
// for 50 ms, which a hedge sent at 10 ms rescues.
func phase(h *hedge.Hedger, n, slow int) {
	for i := range n {
		stuck := i < slow
		hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
			d := ms
			if a.Index == 0 && stuck {
				d = 50 * ms
			}
			select {
			case <-time.After(d):
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
	}
}

// TestRateAlarmShadowsAndClears: a hedge rate eight times its baseline
// raises the alarm and shadows the Hedger; the alarm holds while the rate
// stays high (counted in Shadow), and clears, back to On, after Clear
// healthy intervals.
func TestRateAlarmShadowsAndClears(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer time.Sleep(time.Second) // the Hedger's timer goroutine lingers
		h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		if err != nil {
			t.Fatal(err)
		}
		var changes []hedgewatch.State
		w, err := hedgewatch.New(h, hedgewatch.Config{AutoShadow: true, Clear: 3, OnChange: func(s hedgewatch.State) { changes = append(changes, s) }})
		if err != nil {
			t.Fatal(err)
		}
		w.Check()
		for range 5 {
			phase(h, 200, 10) // 5%
			if s := w.Check(); s.Alarmed || s.Rate != 0.05 {
				t.Fatalf("healthy interval judged %v", s)
			}
		}
		phase(h, 200, 80) // 40%
		s := w.Check()
		if !s.Alarmed || !s.Shadowed || h.Mode() != hedge.Shadow || !strings.Contains(s.Reason, "8.0 times its baseline 0.05") {
			t.Fatalf("after a jump to 40%%: %v (shadowed %v, mode %v)", s, s.Shadowed, h.Mode())
		}
		phase(h, 200, 80) // still 40%, counted in Shadow
		if s := w.Check(); !s.Alarmed || s.Rate != 0.4 {
			t.Fatalf("in Shadow at 40%%: %v", s)
		}
		for i := range 3 {
			phase(h, 200, 10)
			s := w.Check()
			if cleared := i == 2; s.Alarmed == cleared {
				t.Fatalf("healthy interval %d after the alarm: %v", i+1, s)
			}
		}
		if h.Mode() != hedge.On || len(changes) != 2 || !changes[0].Alarmed || changes[1].Alarmed {
			t.Fatalf("mode %v, changes %v: want back On after one alarm and one clear", h.Mode(), changes)
		}
		// Shadowed from the alarm to the third healthy interval's check:
		// the 40% interval and the three healthy ones ran in Shadow.
		if st := h.OpStats("get"); st.ShadowHedges != 80+3*10 {
			t.Fatalf("%d shadow hedges, want the 110 decided while shadowed", st.ShadowHedges)
		}
	})
}

// TestSlowHedgesAlarm: hedges whose successes are far slower than the
// primaries raise the alarm without shadowing when AutoShadow is off.
func TestSlowHedgesAlarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer time.Sleep(time.Second)
		h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true, ReapInBackground: true})
		if err != nil {
			t.Fatal(err)
		}
		w, _ := hedgewatch.New(h, hedgewatch.Config{MinRequests: 50})
		w.Check()
		for i := range 100 {
			hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Index > 0 {
					time.Sleep(200 * ms) // a slow hedge path that ignores cancellation
					return 2, nil
				}
				if i%10 == 0 {
					time.Sleep(30 * ms)
				}
				return 1, nil
			})
		}
		time.Sleep(time.Second) // the hedges finish in the background
		s := w.Check()
		if !s.Alarmed || !strings.Contains(s.Reason, "slower than primaries") || s.Shadowed || h.Mode() != hedge.On {
			t.Fatalf("%v (hedge mean %v, primary mean %v, mode %v)", s, s.HedgeMean, s.PrimaryMean, h.Mode())
		}
	})
}

// TestRunChecksEveryInterval: Run samples at each interval and stops with
// its context.
func TestRunChecksEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer time.Sleep(time.Second)
		h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		w, _ := hedgewatch.New(h, hedgewatch.Config{Interval: time.Minute, MinRequests: 10})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		synctest.Wait()
		phase(h, 20, 2)
		time.Sleep(time.Minute)
		synctest.Wait()
		if s := w.State(); s.Rate != 0.1 {
			t.Fatalf("after one interval: %v", s)
		}
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestNewReportsEveryMistake(t *testing.T) {
	_, err := hedgewatch.New(nil, hedgewatch.Config{RateFactor: 0.5, MinRate: 2, SlowFactor: 0.5})
	for _, want := range []string{"New(nil)", "RateFactor", "MinRate", "SlowFactor"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}
