package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func tinyStudy(dir string, workers int) StudyOptions {
	return StudyOptions{Seed: 7, Workers: workers, OutDir: dir, Runs: 2, Requests: 3000, Loads: []float64{0.5, 0.9}}
}

// The study's results depend on the seed only, not on the number of
// workers or the order in which runs finish.
func TestStudyDeterministicAcrossWorkers(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	r1, err := RunStudy(context.Background(), tinyStudy(d1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RunStudy(context.Background(), tinyStudy(d2, 3)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "table.md", "ratio-stalls.svg", "stall-length.svg"} {
		a, err1 := os.ReadFile(filepath.Join(d1, f))
		b, err2 := os.ReadFile(filepath.Join(d2, f))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", f, err1, err2)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between 1 and 3 workers", f)
		}
	}
	var parsed []map[string]any
	data, _ := os.ReadFile(filepath.Join(d1, "results.json"))
	if err := json.Unmarshal(data, &parsed); err != nil {
		t.Fatal(err)
	}
	if len(parsed) != len(r1) {
		t.Fatalf("results.json has %d points, RunStudy returned %d", len(parsed), len(r1))
	}
	names := map[string]bool{}
	for _, p := range parsed {
		names[p["strategy"].(string)] = true
		for _, k := range []string{"world", "routing", "strategy", "load", "runs", "requests", "mean", "p50", "p95", "p99", "p999",
			"mean_se", "p99_se", "p999_se", "ratio_p99", "ratio_p999", "hedged_fraction", "extra_work", "utilisation", "delay"} {
			if _, ok := p[k]; !ok {
				t.Fatalf("point %v lacks %q", p, k)
			}
		}
	}
	for _, s := range []string{"none", "hedge-p95-per-load", "hedge-p95-quiet", "hedge-p95-live", "hedge-quiet-budget", "tied"} {
		if !names[s] {
			t.Errorf("no point with strategy %q", s)
		}
	}
	table, _ := os.ReadFile(filepath.Join(d1, "table.md"))
	for _, want := range []string{"## noise world: p99", "## stalls world: p99.9", "## bigjobs world", "## mixed world", "random versus two-choice", "budget", "Stall length", "Tied requests",
		"## Fan-out requests", "| 100 | 0.9 |", "## Many clients", "| 100 | 40 | 0.5 |"} {
		if !strings.Contains(string(table), want) {
			t.Errorf("table.md lacks %q", want)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(d1, "ratio-noise.svg"))
	for _, want := range []string{"<svg", "load (arrival rate", "ratio to none (log scale)", "hedge-p95-live", "</svg>"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("ratio-noise.svg lacks %q", want)
		}
	}
}

// cancelAfterFirstPoint is a study's progress writer that cancels the
// study at the first progress line written after results.json appeared.
// RunStudy writes progress lines (one per tenth of the runs on anything but
// a terminal) and results.json (at the first finished point, then at
// most every two seconds) on its own
// goroutine, so the check and the cancellation happen at a definite point
// of the study, whatever the workers' timing.
type cancelAfterFirstPoint struct {
	dir    string
	cancel context.CancelFunc
	lines  int // progress lines seen when it cancelled; 0 before
	seen   int
}

func (w *cancelAfterFirstPoint) Write(p []byte) (int, error) {
	w.seen++
	if w.lines == 0 {
		if _, err := os.Stat(filepath.Join(w.dir, "results.json")); err == nil {
			w.cancel()
			w.lines = w.seen
		}
	}
	return len(p), nil
}

// An interrupted study keeps the points it finished, in a valid
// results.json, and still writes the table.
//
// The cancellation comes from the progress writer, at the first tenth of
// the runs by which a point has certainly finished: with W workers, runs
// are sent in plan order (calibrations first) and at most W+1 of them are
// sent but not yet accounted for, so once the calibrations and the runs of
// W+2 points are accounted for, one of those points is complete. That
// tenth is checked to be at most half the study. So at least half the runs
// are still to be sent when ctx is cancelled, and RunStudy, whose select
// picks uniformly among at most three ready cases one of which is now
// ctx.Done(), reaches the end without seeing it with probability below
// (2/3)^(number of runs left): never, in practice, however the workers are
// scheduled.
func TestStudyInterrupted(t *testing.T) {
	dir := t.TempDir()
	const workers = 2
	o := tinyStudy(dir, workers)
	p := planStudy(o)
	total, runs := StudySize(o)
	// The progress line (one per tenth) by which a point has certainly
	// finished: it is written on receiving run number need, when the
	// runs before it have been accounted for.
	need := len(p.calibs) + p.runs*(workers+2) + 1
	tenth := (10*need + runs - 1) / runs
	if tenth > 5 {
		t.Fatalf("the tiny study has %d runs, %d of them calibrations: too few to interrupt half-way", runs, len(p.calibs))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelAfterFirstPoint{dir: dir, cancel: cancel}
	o.Progress = w
	res, err := RunStudy(ctx, o)
	if w.lines == 0 {
		t.Fatalf("no results.json by the end of the progress lines (%d)", w.seen)
	}
	if w.lines > tenth {
		t.Errorf("results.json appeared only at progress line %d, want by line %d", w.lines, tenth)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	var parsed []PointResult
	data, rerr := os.ReadFile(filepath.Join(dir, "results.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err := json.Unmarshal(data, &parsed); err != nil {
		t.Fatalf("results.json after interruption: %v", err)
	}
	if len(parsed) != len(res) || len(res) == 0 || len(res) >= total {
		t.Fatalf("kept %d points in the file, %d returned, of %d", len(parsed), len(res), total)
	}
	for i, pr := range res {
		if pr.Runs != p.runs {
			t.Errorf("point %d kept with %d runs, want %d", i, pr.Runs, p.runs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "table.md")); err != nil {
		t.Fatal(err)
	}
	t.Logf("cancelled at progress line %d; kept %d of %d points", w.lines, len(res), total)
}

// The fan-out and clients groups: each point is compared with not hedging
// at its own clients, width and need, runs the same number of leaves
// whatever its width, and is never read by the other groups' tables.
func TestStudyManyGroups(t *testing.T) {
	res, err := RunStudy(context.Background(), StudyOptions{Seed: 7, Workers: 2, Runs: 2, Requests: 4000, Loads: []float64{0.3}})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]*PointResult{}
	key := func(r *PointResult, strategy string) string {
		return fmt.Sprint(r.World, strategy, r.Load, max(r.Clients, 1), max(r.Fanout, 1), r.FanoutNeed, r.Requests)
	}
	for i := range res {
		r := &res[i]
		if r.Strategy == "none" {
			byKey[key(r, "none")] = r
		}
	}
	var fan, clients, canaries, firstK, lowPriority int
	for i := range res {
		r := &res[i]
		inFan, inClients := slices.Contains(r.Groups, GroupFanOut), slices.Contains(r.Groups, GroupClients)
		if !inFan && !inClients {
			continue
		}
		if inFan {
			fan++
		}
		if inClients {
			clients++
		}
		if w := max(r.Fanout, 1); r.Requests != max(4000/w, 100) {
			t.Errorf("%s width %d: %d requests, want %d", r.World, w, r.Requests, max(4000/w, 100))
		}
		if r.Fanout > 1 && (r.Copies < float64(r.Fanout) || r.LeafP99 <= 0) {
			t.Errorf("%s width %d %s: copies %v, leaf p99 %v", r.World, r.Fanout, r.Strategy, r.Copies, r.LeafP99)
		}
		if r.Strategy == "none" {
			if r.FanCall || r.LowPriorityCopies {
				t.Errorf("not hedging with the fan-out call or the servers' help: %+v", r)
			}
			continue
		}
		if byKey[key(r, "none")] == nil || r.RatioP50 == nil || r.RatioP999 == nil {
			t.Errorf("%s %s clients %d width %d need %d: no none to compare with", r.World, r.Strategy, r.Clients, r.Fanout, r.FanoutNeed)
		}
		if r.FanCanaries > 0 {
			canaries++
		}
		if r.FanoutNeed > 0 {
			firstK++
		}
		if r.LowPriorityCopies {
			lowPriority++
		}
	}
	if fan == 0 || clients == 0 || canaries == 0 || firstK == 0 || lowPriority == 0 {
		t.Errorf("points: %d fan-out, %d clients, %d with canaries, %d first-k, %d low-priority: want some of each", fan, clients, canaries, firstK, lowPriority)
	}
	// The main tables read the main group's points, never a fan-out's or
	// a client's of the same world, strategy and load.
	ix := indexResults(res)
	for _, w := range []World{Noise, Stalls} {
		r := ix.get(w, TwoChoice, Default, 0.3, nil)
		if r == nil || r.Fanout > 1 || r.Clients > 1 || r.Requests != 4000 || !slices.Contains(r.Groups, groupOf(w)) {
			t.Errorf("%s default at 0.3: the index finds %+v, want the main group's point", w, r)
		}
	}
}
