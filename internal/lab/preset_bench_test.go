//go:build unix

package lab

import (
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// presetQueries are the explorer's preset buttons (PRESETS in
// static/js/explorer.js) as the page sends them, at the page's opening
// simulation size (2 runs of 100,000 requests, seed 1).
var presetQueries = []struct{ name, query string }{
	{"default", "world=lognormal&sigma=1&load=0.5&routing=pool&strategy=percentile&p=95&calib=quiet&cancel=true&tied=false"},
	{"collapse", "world=lognormal&sigma=1&load=0.85&routing=pool&strategy=percentile&p=95&calib=quiet&cancel=false&tied=false"},
	{"stalls", "world=stalls&load=0.5&routing=two-choice&strategy=percentile&p=95&calib=quiet&cancel=true&tied=false"},
	{"budget", "world=lognormal&sigma=1&load=0.85&routing=pool&strategy=budget&budget=5&p=95&calib=quiet&cancel=false&tied=false"},
}

// BenchmarkPreset times the answer to each preset of the explorer from a
// cold cache (a new Server for every iteration), over a loopback HTTP
// connection: what the page waits for when a preset is clicked for the
// first time. Besides the wall time it reports cpu-ms/op, the process's
// CPU time per answer (user and system), which a machine shared with
// other work inflates far less than the wall time.
func BenchmarkPreset(b *testing.B) {
	for _, p := range presetQueries {
		b.Run(p.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				s, err := New(Options{})
				if err != nil {
					b.Fatal(err)
				}
				ts := httptest.NewServer(s)
				b.StartTimer()
				cpu0 := cpuTime()
				resp, err := ts.Client().Get(ts.URL + "/api/explore?runs=2&requests=100000&seed=1&" + p.query)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				cpu += cpuTime() - cpu0
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: status %d: %s", p.name, resp.StatusCode, body)
				}
				b.StopTimer()
				ts.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
