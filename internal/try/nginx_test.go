//go:build unix

package try

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailcut/hedge/internal/drill"
	"github.com/tailcut/hedge/internal/redistest"
	"github.com/tailcut/hedge/internal/testproc"
)

var nginxLong = flag.Bool("try.nginx-long", false, "run the nginx test for 20 s measured instead of 2.5 s")

// nginxBinary is Debian's nginx.
const nginxBinary = "/usr/sbin/nginx"

// startNginx starts one nginx serving a static file on a loopback port,
// with a prefix and configuration of its own under dir, in one process
// (master_process off), so that SIGSTOP to its pid stalls the server
// that answers. It is stopped by pid when the test ends.
func startNginx(t *testing.T, dir string) (*testproc.Proc, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	www := filepath.Join(dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(www, "item.txt"), []byte(strings.Repeat("hedge\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:%[2]d;
    root %[1]s/www;
  }
}
`, dir, port)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginxBinary, "-p", dir, "-c", cf)
	out := &testproc.Tail{Max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := testproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop("nginx", syscall.SIGTERM, 5*time.Second, func() { _ = p.Signal(syscall.SIGCONT) }); err != nil {
			t.Error(err)
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); ; { // bounds a hang; nginx starts in milliseconds
		resp, err := c.Get(base + "/item.txt")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, base
			}
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("nginx on port %d did not serve: %v\n%s", port, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three nginx servers; one is stopped (SIGSTOP) now and then, on a schedule.
// The unhedged arm's p99 lands in those stalls; the default's hedges go
// around them.
func TestNginxStalledReplica(t *testing.T) {
	if _, err := os.Stat(nginxBinary); err != nil {
		msg := fmt.Sprintf("nginx is missing at %s: install it with `apt-get install -y nginx`", nginxBinary)
		if redistest.DepsRequired() {
			t.Fatalf("%s (%s is set)", msg, redistest.RequireDepsEnv)
		}
		t.Skipf("%s (skipped; set %s=1 to make this a failure)", msg, redistest.RequireDepsEnv)
	}
	var urls []string
	var stalled *testproc.Proc
	for i := range 3 {
		p, u := startNginx(t, t.TempDir())
		urls = append(urls, u)
		if i == 2 {
			stalled = p
		}
	}
	o := Options{Replicas: urls, Targets: gets("/item.txt"), Arms: arms(t, "none,default"),
		Rate: 200, Ramp: 500 * time.Millisecond, Warmup: 1500 * time.Millisecond, Duration: 2500 * time.Millisecond,
		Timeout: 5 * time.Second, Seed: 7, Resamples: 1000}
	if *nginxLong {
		o.Duration = 20 * time.Second
	}
	// The stall schedule: 50 ms stopped every 250 ms, so that even the
	// short form meets about ten stalls.
	stall, every := 50*time.Millisecond, 250*time.Millisecond
	res := carried(t, []int{0, 1}, stall/4, func() *Result {
		stop := onSchedule(every, func() bool {
			_ = stalled.Signal(syscall.SIGSTOP)
			time.Sleep(stall) // the stall's length: the workload, not a wait for an outcome
			_ = stalled.Signal(syscall.SIGCONT)
			return true
		})
		res, err := Run(context.Background(), o)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		return res
	})
	logSummary(t, res)
	def := armByName(t, res, "default")
	t.Logf("nginx: default p99 ratio %.2f (%.2f-%.2f), p99.9 ratio %.2f (%.2f-%.2f)", def.P99.Ratio, def.P99.RatioLo, def.P99.RatioHi, def.P999.Ratio, def.P999.RatioLo, def.P999.RatioHi)
	// A replica stopped a fifth of the time is a tail hedging cuts; how
	// surely a few seconds show it depends on the machine, so the test
	// refuses only a wrong answer.
	if def.Verdict != drill.TailCut && def.Verdict != NotSignificant && def.Verdict != FewHedges {
		t.Errorf("default: verdict %s (%s), want %s (or %s or %s on a loaded machine)", def.Verdict, def.Why, drill.TailCut, NotSignificant, FewHedges)
	}
}
