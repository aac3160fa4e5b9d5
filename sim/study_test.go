package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	for _, want := range []string{"## noise world: p99", "## stalls world: p99.9", "## bigjobs world", "## mixed world", "random versus two-choice", "budget", "Stall length", "Tied requests"} {
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

// An interrupted study keeps the points it finished, in a valid
// results.json, and still writes the table.
func TestStudyInterrupted(t *testing.T) {
	dir := t.TempDir()
	o := tinyStudy(dir, 2)
	o.Requests = 20000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel as soon as the first point has been written.
		for {
			if _, err := os.Stat(filepath.Join(dir, "results.json")); err == nil {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	res, err := RunStudy(ctx, o)
	total, _ := StudySize(o)
	if err == nil {
		t.Skip("the study finished before the cancellation took effect")
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
	if _, err := os.Stat(filepath.Join(dir, "table.md")); err != nil {
		t.Fatal(err)
	}
	t.Logf("kept %d of %d points", len(res), total)
}
