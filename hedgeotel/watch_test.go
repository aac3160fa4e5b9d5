package hedgeotel_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/hedgewatch"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// fakeWatcher reports the state the test sets.
type fakeWatcher struct {
	mu sync.Mutex
	s  hedgewatch.State
}

func (f *fakeWatcher) State() hedgewatch.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s
}

func (f *fakeWatcher) set(s hedgewatch.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s = s
}

// TestRegisterWatchers reads two watchers' states through the gauges,
// before and after one raises its alarm and shadows its Hedger, and stops
// reading them after Unregister.
func TestRegisterWatchers(t *testing.T) {
	r := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)).Meter("test")
	items, orders := &fakeWatcher{}, &fakeWatcher{}
	items.set(hedgewatch.State{Rate: 0.05, BaselineRate: 0.04})
	reg, err := hedgeotel.RegisterWatchers(meter, map[string]hedgeotel.Watcher{"items": items, "orders": orders})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step, hedger string, alarmed, shadowed, rate, baseline float64) {
		t.Helper()
		got := collect(t, r)
		for name, want := range map[string]float64{
			"hedge.watch.alarmed": alarmed, "hedge.watch.shadowed": shadowed,
			"hedge.watch.hedge_rate": rate, "hedge.watch.baseline_rate": baseline,
		} {
			p, ok := got[key(name, "hedger="+hedger)]
			if !ok || p.value != want || p.kind != "gauge" {
				t.Errorf("%s: %s{hedger=%s} = %+v (present %v); want gauge %v", step, name, hedger, p, ok, want)
			}
		}
	}
	check("healthy", "items", 0, 0, 0.05, 0.04)
	check("healthy", "orders", 0, 0, 0, 0)
	items.set(hedgewatch.State{Alarmed: true, Shadowed: true, Reason: "jump", Rate: 0.4, BaselineRate: 0.04})
	check("alarm", "items", 1, 1, 0.4, 0.04)
	check("alarm", "orders", 0, 0, 0, 0)
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, r); len(got) != 0 {
		t.Errorf("after Unregister: %v", got)
	}
}

func TestRegisterWatchersValidates(t *testing.T) {
	r := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)).Meter("test")
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil meter", func() error {
			_, err := hedgeotel.RegisterWatchers(nil, map[string]hedgeotel.Watcher{"a": &fakeWatcher{}})
			return err
		}(), "meter is nil"},
		{"none", func() error { _, err := hedgeotel.RegisterWatchers(meter, nil); return err }(), "no watchers"},
		{"nil watcher", func() error {
			_, err := hedgeotel.RegisterWatchers(meter, map[string]hedgeotel.Watcher{"a": nil})
			return err
		}(), `watcher "a" is nil`},
		{"empty name", func() error {
			_, err := hedgeotel.RegisterWatchers(meter, map[string]hedgeotel.Watcher{"": &fakeWatcher{}})
			return err
		}(), "empty name"},
	} {
		if !errors.Is(c.err, hedgeotel.ErrInvalid) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrInvalid saying %q", c.name, c.err, c.want)
		}
	}
}
