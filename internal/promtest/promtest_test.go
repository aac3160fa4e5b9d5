package promtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pidGone reports whether no process has the pid any more.
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// target serves /metrics with one gauge whose value the test sets, and
// stops when the test ends.
func target(t *testing.T) (addr string, value *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	value = new(atomic.Int64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "# TYPE promtest_value gauge\npromtest_value{kind=\"set\"} %d\n", value.Load())
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return l.Addr().String(), value
}

// TestScrapeAndQuery starts a real server, changes the target's value,
// waits for a scrape newer than the change, and reads the new value back
// through Latest and Query; then Stop leaves no process behind.
func TestScrapeAndQuery(t *testing.T) {
	Need(t)
	addr, value := target(t)
	value.Store(7)
	s := Start(t, Options{Targets: []string{addr}, ScrapeInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	defer cancel()

	if _, err := s.WaitScrapedAfter(ctx, "promtest_value", time.Time{}); err != nil {
		t.Fatal(err)
	}
	value.Store(42)
	changed := time.Now()
	got, err := s.WaitScrapedAfter(ctx, `promtest_value{kind="set"}`, changed)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Value != 42 || got[0].Labels["job"] != "hedge" || got[0].Labels["instance"] != addr {
		t.Fatalf("latest sample %v; want one of 42 with job hedge, instance %s", got, addr)
	}
	q, err := s.Query(ctx, "promtest_value * 2", got[0].Time)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].Value != 84 || !q[0].Time.Equal(got[0].Time) {
		t.Fatalf("query at %v: %v; want 84 at that time", got[0].Time, q)
	}
	sc, err := s.Query(ctx, "scalar(promtest_value) + 1", got[0].Time)
	if err != nil || len(sc) != 1 || sc[0].Value != 43 {
		t.Fatalf("scalar query: %v, %v; want 43", sc, err)
	}
	rs, err := s.QueryRange(ctx, "promtest_value", got[0].Time.Add(-time.Second), got[0].Time, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || len(rs[0].Points) == 0 || rs[0].Points[len(rs[0].Points)-1].Value != 42 || !rs[0].Points[len(rs[0].Points)-1].Time.Equal(got[0].Time) {
		t.Fatalf("range query ending at %v: %+v; want a series ending with 42 then", got[0].Time, rs)
	}
	targets, err := s.Targets(ctx)
	if err != nil || targets[addr] != "up" {
		t.Fatalf("targets %v, %v; want %s up", targets, err, addr)
	}
	if _, err := s.Query(ctx, "promtest_value{", time.Time{}); err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Errorf("a malformed query returned %v; want the API's bad_data error", err)
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !s.Exited() || !pidGone(s.Pid) {
		t.Errorf("pid %d still exists after Stop", s.Pid)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := StartServer(Options{Binary: "/nonexistent/prometheus", Targets: []string{"127.0.0.1:1"}})
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "apt-get install -y prometheus") {
		t.Fatalf("StartServer with a missing binary: %v; want ErrMissing with the install command", err)
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, o := range []Options{
		{},
		{Targets: []string{"127.0.0.1:1"}, ScrapeInterval: 1500 * time.Microsecond},
	} {
		if _, err := StartServer(o); err == nil {
			t.Errorf("StartServer(%+v) = nil error", o)
		}
	}
}

// fakeTB records what Need does.
type fakeTB struct{ skipped, failed bool }

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }
func (f *fakeTB) Skipf(string, ...any)  { f.skipped = true }
func (f *fakeTB) Cleanup(func())        {}

func TestNeedSkipsOrFails(t *testing.T) {
	for _, c := range []struct {
		env          string
		skip, failed bool
	}{{"", true, false}, {"0", true, false}, {"1", false, true}} {
		t.Setenv("HEDGE_REQUIRE_DEPS", c.env)
		var f fakeTB
		if NeedBinary(&f, "/nonexistent/prometheus") {
			t.Errorf("HEDGE_REQUIRE_DEPS=%q: NeedBinary of a missing binary returned true", c.env)
		}
		if f.skipped != c.skip || f.failed != c.failed {
			t.Errorf("HEDGE_REQUIRE_DEPS=%q: skipped %v, failed %v; want %v, %v", c.env, f.skipped, f.failed, c.skip, c.failed)
		}
	}
}
