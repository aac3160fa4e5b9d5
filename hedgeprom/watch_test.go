package hedgeprom_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/hedgewatch"
)

// watchPhase runs n calls one after another; slow of them have a primary
// stuck for 50 ms, which a hedge sent at 10 ms rescues.
func watchPhase(h *hedge.Hedger, n, slow int) {
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

// TestWatcherGauges drives a real hedgewatch.Watcher with AutoShadow
// through a healthy baseline, a jump of the hedge rate that raises the
// alarm and shadows the Hedger, and the healthy intervals that clear it,
// and reads the watcher's gauges after each step.
func TestWatcherGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer time.Sleep(time.Second) // the Hedger's timer goroutine lingers
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		w, err := hedgewatch.New(h, hedgewatch.Config{AutoShadow: true, Clear: 2})
		if err != nil {
			t.Fatal(err)
		}
		c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h}, hedgeprom.WithWatcher("items", w))
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		// The rates are the watcher's own, as it computed them (a mean of
		// three 0.05 is 0.05000000000000001); the test of the watcher
		// checks them, this one that the gauges carry them.
		check := func(step string, alarmed, shadowed float64) {
			t.Helper()
			rate, baseline := w.State().Rate, w.State().BaselineRate
			want := `
# HELP hedge_watch_alarmed 1 while hedgewatch's alarm is raised for the Hedger (hedge rate far above its baseline, or hedges slower than primaries), else 0.
# TYPE hedge_watch_alarmed gauge
hedge_watch_alarmed{hedger="items"} ` + fmtFloat(alarmed) + `
# HELP hedge_watch_baseline_rate Mean hedge rate of the recent healthy intervals that hedgewatch compares each interval with.
# TYPE hedge_watch_baseline_rate gauge
hedge_watch_baseline_rate{hedger="items"} ` + fmtFloat(baseline) + `
# HELP hedge_watch_hedge_rate Hedges decided (sent, or counted in Shadow) per request in the last interval hedgewatch judged.
# TYPE hedge_watch_hedge_rate gauge
hedge_watch_hedge_rate{hedger="items"} ` + fmtFloat(rate) + `
# HELP hedge_watch_shadowed 1 while hedgewatch holds the Hedger in Shadow because of the alarm (AutoShadow): no hedge is sent, hedges are only counted. Else 0.
# TYPE hedge_watch_shadowed gauge
hedge_watch_shadowed{hedger="items"} ` + fmtFloat(shadowed) + `
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
				"hedge_watch_alarmed", "hedge_watch_shadowed", "hedge_watch_hedge_rate", "hedge_watch_baseline_rate"); err != nil {
				t.Errorf("%s: %v", step, err)
			}
		}
		w.Check()
		check("before any interval", 0, 0)
		for range 3 {
			watchPhase(h, 200, 10) // 5%
			w.Check()
		}
		check("healthy", 0, 0)
		watchPhase(h, 200, 80) // 40%
		w.Check()
		check("alarm", 1, 1)
		if s := w.State(); s.Rate != 0.4 {
			t.Fatalf("alarm interval judged %v; want a rate of 0.4", s)
		}
		if h.Mode() != hedge.Shadow {
			t.Fatalf("mode %v while alarmed with AutoShadow", h.Mode())
		}
		watchPhase(h, 200, 10)
		w.Check()
		check("first healthy interval of the alarm", 1, 1)
		watchPhase(h, 200, 10)
		w.Check()
		check("cleared", 0, 0)
	})
}

// fmtFloat formats v as the text exposition does.
func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// TestWithWatcherValidates: a watcher under a name that is no Hedger's, or
// a nil one, is refused with ErrInvalid and a message naming it.
func TestWithWatcherValidates(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	w, err := hedgewatch.New(h, hedgewatch.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h},
		hedgeprom.WithWatcher("orders", w), hedgeprom.WithWatcher("items", nil))
	if !errors.Is(err, hedgeprom.ErrInvalid) || !strings.Contains(err.Error(), `no Hedger is named "orders"`) ||
		!strings.Contains(err.Error(), `WithWatcher("items", nil)`) {
		t.Fatalf("New with bad watchers: %v", err)
	}
}
