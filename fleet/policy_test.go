package fleet_test

import (
	"errors"
	"strings"
	"testing"

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
