package fleet_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
)

const sample = `
service: checkout          # the service whose callers it steers
version: 7
hedgers:
  "*":
    mode: on
    rollout: 0.1
    percentile: 95
    budget: {ratio: 0.1, burst: 10}
    maxAttempts: 2
    maxHedgesPerSecond: 200
    ops:
      get: {mode: shadow}
kill:
  until: 2026-12-07T16:30:00Z
  reason: incident
`

func TestParseSample(t *testing.T) {
	p, err := fleet.Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if p.Service != "checkout" || p.Version != 7 || p.Hedgers["*"].Budget.Burst != 10 || p.Hedgers["*"].Ops["get"].Mode != "shadow" || p.Kill.Reason != "incident" {
		t.Fatalf("parsed %+v", p)
	}
	js, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	q, err := fleet.Parse(js)
	if err != nil {
		t.Fatalf("Parse(Marshal()): %v\n%s", err, js)
	}
	if !q.Kill.Until.Equal(p.Kill.Until) || q.Version != 7 {
		t.Fatalf("round trip: %+v", q)
	}
}

func TestParseRefusesWhole(t *testing.T) {
	doc := `{"service": "", "version": 0, "hedgers": {"*": {"mode": "maybe", "maxAttempts": 9, "percentile": 120, "budget": {"ratio": 0, "burst": 0}}}}`
	_, err := fleet.Parse([]byte(doc))
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, fleet.ErrInvalidDocument) || !errors.Is(err, hedge.ErrInvalidConfig) {
		t.Fatalf("error does not match: %v", err)
	}
	for _, want := range []string{"service: is empty", "version: is 0", `mode: is "maybe"`, "MaxAttempts = 9", "Percentile.P = 120", "budget ratio 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	t.Log(err)
}

// TestRulesMerge checks how rules are merged: a Hedger's own fields over
// those of "*", an operation's over its Hedger's, and operations of "*"
// and of the Hedger together.
func TestRulesMerge(t *testing.T) {
	p, err := fleet.Parse([]byte(`
service: checkout
version: 1
hedgers:
  "*":
    mode: shadow
    maxAttempts: 3
    budget: {ratio: 0.2, burst: 5}
    ops:
      get: {percentile: 90}
      put: {mode: off}
  prices:
    mode: on
    maxHedgesPerSecond: 50
    ops:
      get: {maxAttempts: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := p.Live("prices", "pod-1", time.Time{})
	want := hedge.Live{
		Settings: hedge.Settings{Mode: hedge.On, MaxAttempts: 3, BudgetRatio: 0.2, BudgetBurst: 5, MaxHedgesPerSecond: 50},
		Ops: map[string]hedge.Settings{
			"get": {Mode: hedge.On, Percentile: 90, MaxAttempts: 2, BudgetRatio: 0.2, BudgetBurst: 5, MaxHedgesPerSecond: 50},
			"put": {Mode: hedge.Off, MaxAttempts: 3, BudgetRatio: 0.2, BudgetBurst: 5, MaxHedgesPerSecond: 50},
		},
	}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("prices:\n got %+v\nwant %+v", l, want)
	}
	other := p.Live("inventory", "pod-1", time.Time{})
	if other.Mode != hedge.Shadow || other.MaxHedgesPerSecond != 0 || other.Ops["get"].Percentile != 90 || other.Ops["get"].Mode != hedge.Shadow {
		t.Errorf("a Hedger with no entry of its own: %+v", other)
	}
	// Under a kill switch every Hedger is off, whatever its rules.
	p.Kill = &fleet.Kill{Until: time.Date(2026, 12, 7, 16, 30, 0, 0, time.UTC)}
	if k := p.Live("prices", "pod-1", p.Kill.Until.Add(-time.Second)); k.Mode != hedge.Off || k.Ops != nil {
		t.Errorf("under the kill switch: %+v", k)
	}
	if k := p.Live("prices", "pod-1", p.Kill.Until); !reflect.DeepEqual(k, want) {
		t.Errorf("at the kill switch's end: %+v", k)
	}
}
