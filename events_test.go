package hedge_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// recorder collects events; OnEvent may run on several goroutines.
type recorder struct {
	mu  sync.Mutex
	evs []hedge.Event
}

func (r *recorder) on(e hedge.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		out = append(out, e.String())
	}
	return out
}

// TestEvents checks what OnEvent is told, in order, for a hedge that wins,
// a hedge the budget refuses, a shadow hedge, a panic and a mode change.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		var rec recorder
		b, _ := hedge.NewBudget(0.1, 1)
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), Replicas: 3, Budget: b, OnEvent: rec.on, PayoffWinRate: -1})
		slowPrimary := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 5 * ms, val: 2})
		hedge.Do(context.Background(), h, "get", slowPrimary.attempt) // the one token: hedge sent, wins
		again := newScript(behaviour{after: 50 * ms, val: 1}, behaviour{after: 5 * ms, val: 2})
		hedge.Do(context.Background(), h, "get", again.attempt) // no token left: refused
		if err := h.SetMode(hedge.Shadow); err != nil {
			t.Fatal(err)
		}
		b2 := newScript(behaviour{after: 50 * ms, val: 1})
		hedge.Do(context.Background(), h, "get", b2.attempt) // shadow: budget twin is full
		func() {
			defer func() { recover() }()
			_ = h.SetMode(hedge.On)
			boom := newScript(behaviour{after: 1 * ms, panic: "kaboom"})
			hedge.Do(context.Background(), h, "put", boom.attempt)
		}()
		got := rec.lines()
		want := []string{
			"get: hedge 1 sent to replica ",
			"get: hedge 1 on replica ",
			"get: hedge refused (budget) after 10ms",
			"mode changed to shadow",
			"get: shadow hedge 1 after 10ms",
			"mode changed to on",
			"put: copy 0 panicked after 1ms: kaboom",
		}
		if len(got) != len(want) {
			t.Fatalf("events:\n%s\nwant %d of them", strings.Join(got, "\n"), len(want))
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("event %d: %q, want it to start with %q", i, got[i], want[i])
			}
		}
		if e := rec.evs[1]; e.Kind != hedge.HedgeWon || e.Elapsed != 15*ms || e.Replica != rec.evs[0].Replica {
			t.Errorf("the win: %+v, want the hedge sent at 10ms winning at 15ms on its replica", e)
		}
	})
}

// TestLogEvents checks the slog adapter's levels and attributes.
func TestLogEvents(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	log := hedge.LogEvents(l)
	log(hedge.Event{Kind: hedge.HedgeSent, Op: "get", Copy: 1, Replica: 2, Elapsed: 10 * time.Millisecond})
	log(hedge.Event{Kind: hedge.ModeChanged, Mode: hedge.Off})
	log(hedge.Event{Kind: hedge.CopyPanicked, Op: "put", Panic: &hedge.PanicError{Value: "kaboom"}})
	out := buf.String()
	if strings.Contains(out, "hedge sent") {
		t.Errorf("a Debug event was written at level Warn:\n%s", out)
	}
	for _, want := range []string{"level=WARN", "mode=off", "level=ERROR", "op=put", "panic=kaboom"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
