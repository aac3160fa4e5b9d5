package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGate(t *testing.T) {
	var g Gate
	ctx := context.Background()
	g.Wait(ctx) // open: returns at once
	done := make(chan time.Duration)
	go func() {
		for !g.Stalled() {
			time.Sleep(100 * time.Microsecond)
		}
		t0 := time.Now()
		g.Wait(ctx)
		done <- time.Since(t0)
	}()
	if err := g.Stall(ctx, 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d <= 0 {
		t.Fatalf("a waiter during the stall waited %v", d)
	}
	if g.Stalled() {
		t.Fatal("still stalled after Stall returned")
	}
	// Ending the context ends the stall at once.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	t0 := time.Now()
	if err := g.Stall(cctx, time.Hour); err == nil {
		t.Fatal("want the context's error")
	}
	if time.Since(t0) > 10*time.Second {
		t.Fatal("the stall outlived its context")
	}
	// Close releases a stall in progress and refuses new ones.
	go func() {
		for !g.Stalled() {
			time.Sleep(100 * time.Microsecond)
		}
		g.Close()
	}()
	if err := g.Stall(ctx, time.Hour); err != ErrGateClosed {
		t.Fatalf("stall ended by Close: %v", err)
	}
	if err := g.Stall(ctx, time.Millisecond); err != ErrGateClosed {
		t.Fatalf("stall after Close: %v", err)
	}
}

// A tiny comparison on HTTP replicas: both configurations see the same
// stalls, the servers answered every request, the hedged one sent hedges,
// the unhedged one none, and the report files are written and parse.
func TestRunHTTP(t *testing.T) {
	b, err := StartHTTP(HTTPOptions{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := Scenario{
		Rate: 400, Duration: 600 * time.Millisecond, Warmup: 150 * time.Millisecond,
		StallLength: 20 * time.Millisecond, StallShare: 0.1, Repeats: 2, Seed: 5,
		MaxReruns: -1, MaxTotalReruns: -1, Settle: 10 * time.Millisecond,
	}
	var cs []Contender
	for _, n := range []string{"none-random", "hedge-fixed-nobudget"} {
		st, err := LookupStrategy(n)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, StrategyContender(st, StrategyOptions{FixedDelay: 2 * time.Millisecond}, false))
	}
	var progress bytes.Buffer
	res, err := Run(context.Background(), b, s, cs, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4 || len(res.Configs) != 2 {
		t.Fatalf("%d runs, %d configs; progress:\n%s", len(res.Runs), len(res.Configs), progress.String())
	}
	stalls := map[int]int{}
	for _, r := range res.Runs {
		if r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s repeat %d: %d requests, %d errors (%s)", r.Config, r.Repeat, r.Requests, r.Errors, r.FirstError)
		}
		if r.Stalls == 0 {
			t.Errorf("%s repeat %d: no stall happened", r.Config, r.Repeat)
		}
		if prev, ok := stalls[r.Repeat]; ok && prev != r.Stalls {
			t.Errorf("repeat %d: %d stalls in one configuration, %d in the other: the schedule must be shared", r.Repeat, prev, r.Stalls)
		}
		stalls[r.Repeat] = r.Stalls
		switch r.Config {
		case "none-random":
			// The servers' count is a cross-check, not exact: requests of
			// the warm-up still in flight when measuring starts land in it,
			// more so on a loaded machine. Duplication would show as tens
			// of percent.
			if r.ExtraPct != 0 || r.ServerExtraPct > 20 {
				t.Errorf("unhedged run sent extra copies: client %v%%, servers %v%%", r.ExtraPct, r.ServerExtraPct)
			}
		case "hedge-fixed-nobudget":
			if r.ExtraPct <= 0 {
				t.Errorf("hedged run sent no hedge (stalls %d)", r.Stalls)
			}
		}
		if r.Dials <= 0 {
			t.Errorf("%s: %d dials counted", r.Config, r.Dials)
		}
	}
	if !strings.Contains(progress.String(), "hedge-fixed-nobudget") {
		t.Errorf("progress output: %q", progress.String())
	}
	t.Log("\n" + progress.String())

	dir := t.TempDir()
	rep := NewReport("test")
	rep.Backends = append(rep.Backends, res)
	if _, err := WriteReport(dir, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	data, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Backends) != 1 || len(back.Backends[0].Configs) != 2 || len(back.Backends[0].Configs[0].CCDF) == 0 {
		t.Fatalf("JSON round trip lost results: %+v", back)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportMarkdown))
	if err != nil || !strings.Contains(string(md), "| hedge-fixed-nobudget |") {
		t.Fatalf("markdown: %v\n%s", err, md)
	}
	if fi, err := os.Stat(filepath.Join(dir, CCDFFile("http"))); err != nil || fi.Size() == 0 {
		t.Fatalf("CCDF plot: %v", err)
	}
}

func TestScenarioValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Scenario
		want string
	}{
		{Scenario{Rate: -1}, "rate"},
		{Scenario{StallShare: 0.7}, "stall share"},
		{Scenario{Repeats: -2}, "repeats"},
		{Scenario{Rate: 1e6, Duration: time.Hour}, "requests per run"},
	} {
		err := tc.s.Defaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
	if err := (Scenario{}).Defaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestStrategies(t *testing.T) {
	for _, n := range StrategyNames() {
		s, _ := LookupStrategy(n)
		if _, err := s.Config(StrategyOptions{FixedDelay: time.Millisecond}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if s.Doc == "" {
			t.Errorf("%s has no doc", n)
		}
	}
	for _, n := range DefaultStrategies {
		if _, err := LookupStrategy(n); err != nil {
			t.Error(err)
		}
	}
	if _, err := LookupStrategy("hope"); err == nil || !strings.Contains(err.Error(), "hedge-live") {
		t.Errorf("unknown name: %v", err)
	}
}
