package fleetbench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge/internal/etcdtest"
	"github.com/tailcut/hedge/internal/fleetbench"
)

// TestMain runs the test binary as a worker when Run starts it as one.
func TestMain(m *testing.M) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	fleetbench.MaybeRunWorker(ctx)
	stop()
	goleak.VerifyTestMain(m)
}

// tiny is the tiny form: a few watchers in one worker process.
func tiny(t *testing.T, source string) fleetbench.Options {
	var progress bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("progress:\n%s", progress.String())
		}
	})
	return fleetbench.Options{
		Watchers: 3,
		Procs:    1,
		Rate:     50,
		Pushes:   2,
		Hold:     200 * time.Millisecond,
		// A hang guard: every assertion below is about counts, and the
		// run waits for every watcher, however long the machine takes.
		Bound:    2 * time.Minute,
		Sources:  []string{source},
		Seed:     1,
		Command:  func() *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") },
		Progress: &progress,
	}
}

// check asserts what must hold of every run, whatever the machine's
// speed: every watcher applied every valid push, none applied an invalid
// document, each refused every invalid one, and none was left behind.
func check(t *testing.T, o fleetbench.Options, res *fleetbench.Result, want []string) {
	t.Helper()
	var got []string
	for _, r := range res.Rows {
		got = append(got, r.Scenario)
		if r.Invalid != nil {
			if *r.InvalidApplied != 0 {
				t.Errorf("%s: %d applies of invalid documents, want 0", r.Scenario, *r.InvalidApplied)
			}
			if want := *r.Invalid * o.Watchers; *r.Refusals != want {
				t.Errorf("%s: %d refusals, want %d (every watcher refuses every invalid document)", r.Scenario, *r.Refusals, want)
			}
		} else {
			if r.Missed != 0 || r.Applies != r.Pushes*o.Watchers {
				t.Errorf("%s: %d applies and %d misses of %d pushes to %d watchers", r.Scenario, r.Applies, r.Missed, r.Pushes, o.Watchers)
			}
			if r.Max < r.P99 || r.P99 < r.P50 || r.P50 < 0 {
				t.Errorf("%s: p50 %v, p99 %v, max %v are out of order", r.Scenario, r.P50, r.P99, r.Max)
			}
		}
		if r.Scenario == fleetbench.ScenarioStoreReturn && (r.Listed == nil || *r.Listed != o.Watchers) {
			t.Errorf("%s: the store lists %v pods on the latest version, want %d", r.Scenario, r.Listed, o.Watchers)
		}
		if r.Behind != nil && *r.Behind != 0 {
			t.Errorf("%s: %d watchers left behind, want 0", r.Scenario, *r.Behind)
		}
		if r.Scenario == fleetbench.ScenarioKill {
			if r.HedgesAfterOff == nil || *r.CallsAfterOff < int64(o.Watchers) {
				t.Errorf("%s: fewer calls after off than watchers: the count of hedges after it proves little", r.Scenario)
			}
			// Once a watcher applied "off", its Hedger sends no hedge:
			// neither for a call that begins after, nor for one in
			// flight whose hedge was not sent yet.
			switch {
			case r.HedgesAfterOff == nil || r.HedgesBegunAfterOff == nil:
				t.Errorf("%s: the hedges after off were not counted", r.Scenario)
			case *r.HedgesAfterOff != 0:
				t.Errorf("%s: %d hedges after off, %d of calls begun after it; want 0", r.Scenario, *r.HedgesAfterOff, *r.HedgesBegunAfterOff)
			}
		}
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("rows %q, want %q", got, want)
	}
	var table, js bytes.Buffer
	if err := fleetbench.WriteTable(&table, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range want {
		if !strings.Contains(table.String(), "| "+s+" |") {
			t.Errorf("the table has no row %q:\n%s", s, table.String())
		}
	}
	if err := fleetbench.WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	var back fleetbench.Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rows) != len(res.Rows) {
		t.Errorf("the JSON does not read back: %v, %d rows", err, len(back.Rows))
	}
	t.Logf("\n%s", table.String())
}

func TestRunFile(t *testing.T) {
	o := tiny(t, fleetbench.SourceFile)
	res, err := fleetbench.Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	check(t, o, res, []string{fleetbench.ScenarioPush, fleetbench.ScenarioKill, fleetbench.ScenarioInvalid})
}

func TestRunEtcd(t *testing.T) {
	if !etcdtest.Need(t) {
		return
	}
	o := tiny(t, fleetbench.SourceEtcd)
	o.Pushes = 1
	res, err := fleetbench.Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	check(t, o, res, []string{
		fleetbench.ScenarioPush, fleetbench.ScenarioFollower, fleetbench.ScenarioLeader,
		fleetbench.ScenarioKill, fleetbench.ScenarioInvalid, fleetbench.ScenarioStoreReturn,
	})
}

func TestOptionsValidate(t *testing.T) {
	d := fleetbench.Options{}.Defaults()
	d.Command = func() *exec.Cmd { return nil }
	if err := d.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	bad := d
	bad.Watchers, bad.Procs, bad.Sources = 2, 3, []string{"zookeeper"}
	err := bad.Validate()
	if err == nil {
		t.Fatal("no error for 3 processes for 2 watchers and a source that does not exist")
	}
	for _, want := range []string{"procs = 3", `source "zookeeper"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
