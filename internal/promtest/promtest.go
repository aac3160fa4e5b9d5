// Package promtest starts and stops a real Prometheus server for the tests
// of this module, and reads what it scraped through its HTTP API.
//
// Start launches the prometheus binary (Debian package prometheus, found
// on PATH) on a free loopback port, with a configuration and a storage
// directory of its own in a temporary directory, scraping the given
// targets' /metrics every Options.ScrapeInterval, and returns once the
// server reports itself ready. The server is stopped by its pid: SIGTERM,
// then SIGKILL if it has not exited after Options.StopTimeout, and the
// process is reaped, so its pid is gone when Stop returns; the temporary
// directory is removed. On Linux the server is also killed if the test
// binary dies without stopping it.
//
// Query evaluates PromQL through /api/v1/query, QueryRange through
// /api/v1/query_range. Latest returns the last
// sample Prometheus stored for each series of a selector, with the time
// Prometheus took it: a test that stops its traffic at time T and polls
// Latest until the samples are newer than T knows that the values it
// reads were scraped after the traffic stopped (WaitScrapedAfter does
// exactly that). No test needs to sleep and hope that a scrape happened.
//
// Need decides what a test does when the binary is missing: it skips, or
// fails when HEDGE_REQUIRE_DEPS=1 is set, the rule of package testproc,
// which this package reuses so that the module decides it in one place.
//
// What it is not: a Prometheus client library (it reads the few result
// types the tests use), a way to run Prometheus in production, or a mock.
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge/internal/testproc"
)

// DefaultBinary is the executable looked up on PATH when Options.Binary
// is empty.
const DefaultBinary = "prometheus"

// ErrMissing is matched (errors.Is) by the error of StartServer, and the
// messages of Need, when the prometheus executable is missing.
var ErrMissing = errors.New("prometheus is missing")

// Options configures StartServer. Only Targets is required.
type Options struct {
	// Binary is the prometheus executable: a path, or a name looked up on
	// PATH. Empty means DefaultBinary.
	Binary string
	// Targets are the host:port addresses scraped at /metrics, in one
	// job named "hedge".
	Targets []string
	// ScrapeInterval is how often each target is scraped (the scrape
	// timeout is the same). Zero means 200 ms. Prometheus accepts whole
	// milliseconds.
	ScrapeInterval time.Duration
	// Args are extra command-line arguments, such as
	// "--enable-feature=native-histograms".
	Args []string
	// StartTimeout bounds how long the server may take to report itself
	// ready. Zero means one minute.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before sending
	// SIGKILL. Zero means 10 seconds.
	StopTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Binary == "" {
		o.Binary = DefaultBinary
	}
	if o.ScrapeInterval == 0 {
		o.ScrapeInterval = 200 * time.Millisecond
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = time.Minute
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 10 * time.Second
	}
	return o
}

// Server is one running prometheus process. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:Port".
	URL string
	// Port is the TCP port of its web interface and API.
	Port int
	// Pid is the process id.
	Pid int

	proc        *testproc.Proc
	dir         string
	log         *testproc.Tail
	stopTimeout time.Duration
	client      *http.Client

	stopOnce sync.Once
	stopErr  error
}

// TB is the part of testing.TB that Start and Need use; *testing.T and
// *testing.B implement it.
type TB = testproc.TB

// Need reports whether DefaultBinary is on PATH. If it is not, the test
// is skipped, or fails when testproc.DepsRequired (HEDGE_REQUIRE_DEPS=1);
// either way the message says how to install it.
func Need(tb TB) bool {
	tb.Helper()
	return NeedBinary(tb, DefaultBinary)
}

// NeedBinary is Need for the executable binary (a path or a name on
// PATH).
func NeedBinary(tb TB, binary string) bool {
	tb.Helper()
	_, err := lookBinary(binary)
	return testproc.Need(tb, err)
}

// lookBinary returns the path of binary, or an error matching ErrMissing
// with the command that installs it.
func lookBinary(binary string) (string, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return "", fmt.Errorf("promtest: %w (%w): install it with `apt-get install -y prometheus`", ErrMissing, err)
	}
	return path, nil
}

// Start starts a server with opt and registers its Stop with tb.Cleanup.
// Without the binary it skips or fails the test as Need does (and returns
// nil if tb lets it return); if the server does not start, it fails the
// test.
func Start(tb TB, opt Options) *Server {
	tb.Helper()
	if !NeedBinary(tb, opt.withDefaults().Binary) {
		return nil
	}
	s, err := StartServer(opt)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Fatalf("%v", err)
		}
	})
	return s
}

// StartServer starts a server on a free loopback port and returns once it
// is ready. The caller must call Stop.
func StartServer(opt Options) (*Server, error) {
	opt = opt.withDefaults()
	var errs []error
	if len(opt.Targets) == 0 {
		errs = append(errs, errors.New("no targets: give the host:port of at least one /metrics endpoint"))
	}
	if opt.ScrapeInterval < time.Millisecond || opt.ScrapeInterval%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("scrape interval %v: use a whole number of milliseconds, at least 1ms", opt.ScrapeInterval))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("promtest: %w", errors.Join(errs...))
	}
	path, err := lookBinary(opt.Binary)
	if err != nil {
		return nil, err
	}
	return testproc.OnFreePort(5, func(port int) (*Server, error) { return launch(path, opt, port) })
}

// config returns the server's configuration file.
func config(opt Options) []byte {
	every := strconv.FormatInt(opt.ScrapeInterval.Milliseconds(), 10) + "ms"
	var b bytes.Buffer
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: 1m\n", every, every)
	b.WriteString("scrape_configs:\n  - job_name: hedge\n    static_configs:\n      - targets:\n")
	for _, t := range opt.Targets {
		fmt.Fprintf(&b, "          - %q\n", t)
	}
	return b.Bytes()
}

func launch(path string, opt Options, port int) (*Server, error) {
	dir, err := os.MkdirTemp("", "promtest-")
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, config(opt), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("promtest: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{
		"--config.file=" + cfgFile,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}
	args = append(args, opt.Args...)
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	log := &testproc.Tail{Max: 16 << 10}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = testproc.SysProcAttr()
	proc, err := testproc.Start(cmd)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("promtest: starting %s: %w", path, err)
	}
	s := &Server{
		URL:         "http://" + addr,
		Port:        port,
		Pid:         proc.Pid,
		proc:        proc,
		dir:         dir,
		log:         log,
		stopTimeout: opt.StopTimeout,
		client:      &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	if err := s.waitReady(opt.StartTimeout); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls /-/ready until the server answers 200, exits or time
// runs out (a bound for a broken system, not a guess of how long it
// takes).
func (s *Server) waitReady(timeout time.Duration) error {
	if err := s.proc.WaitReady(timeout, 20*time.Millisecond, s.ready); err != nil {
		return fmt.Errorf("promtest: prometheus on port %d: %w; its log:\n%s", s.Port, err, s.log.String())
	}
	return nil
}

func (s *Server) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/-/ready answered %s", resp.Status)
	}
	return nil
}

// Stop stops the server: SIGTERM, then SIGKILL if it has not exited after
// the stop timeout. It returns once the process has exited and was reaped,
// and its temporary directory removed. It is idempotent; later calls
// return the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	defer os.RemoveAll(s.dir)
	defer s.client.CloseIdleConnections()
	return s.proc.Stop("promtest", termSignal, s.stopTimeout, nil)
}

// Exited reports whether the process has exited and was reaped.
func (s *Server) Exited() bool { return s.proc.Exited() }

// Log returns the tail of the server's output.
func (s *Server) Log() string { return s.log.String() }

// Sample is one value of one series.
type Sample struct {
	// Labels are the series' labels, __name__ included when the result
	// kept it.
	Labels map[string]string
	// Value is the float value. For a native histogram sample it is NaN,
	// and Histogram is set.
	Value float64
	// Histogram is set for a native histogram sample.
	Histogram *Histogram
	// Time is the sample's timestamp: the evaluation time for Query, the
	// time Prometheus took the sample for Latest.
	Time time.Time
}

// Histogram is the count and sum of a native histogram sample, and its
// buckets as the API reports them.
type Histogram struct {
	Count, Sum float64
	Buckets    int // number of populated buckets
}

// Query evaluates expr at time at (the server's latest data when at is
// zero) and returns its samples, sorted by their labels. An instant vector
// gives one sample per series; a scalar gives one sample without labels.
func (s *Server) Query(ctx context.Context, expr string, at time.Time) ([]Sample, error) {
	v := url.Values{"query": {expr}}
	if !at.IsZero() {
		v.Set("time", formatTime(at))
	}
	res, err := s.api(ctx, v)
	if err != nil {
		return nil, fmt.Errorf("promtest: query %q: %w", expr, err)
	}
	out, err := res.samples()
	if err != nil {
		return nil, fmt.Errorf("promtest: query %q: %w", expr, err)
	}
	return out, nil
}

// Latest returns the most recent sample stored for each series selector
// matches (a metric name with optional label matchers), within the last
// five minutes, each with the time Prometheus took it.
func (s *Server) Latest(ctx context.Context, selector string) ([]Sample, error) {
	v := url.Values{"query": {selector + "[5m]"}}
	res, err := s.api(ctx, v)
	if err != nil {
		return nil, fmt.Errorf("promtest: latest %q: %w", selector, err)
	}
	out, err := res.samples()
	if err != nil {
		return nil, fmt.Errorf("promtest: latest %q: %w", selector, err)
	}
	return out, nil
}

// Series is one series of a range query: its labels and its points in
// time order.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Point is one value of a Series.
type Point struct {
	Time  time.Time
	Value float64
}

// QueryRange evaluates expr at every step from start to end through
// /api/v1/query_range and returns its series, sorted by their labels.
// Native histogram points are left out.
func (s *Server) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	v := url.Values{"query": {expr}, "start": {formatTime(start)}, "end": {formatTime(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/query_range", strings.NewReader(v.Encode()))
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var body struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values []point           `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := s.getJSON(req, &body); err != nil {
		return nil, fmt.Errorf("promtest: query_range %q: %w", expr, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("promtest: query_range %q: %s: %s", expr, body.ErrorType, body.Error)
	}
	var out []Series
	for _, r := range body.Data.Result {
		sr := Series{Labels: r.Metric}
		for _, p := range r.Values {
			t, v, err := p.parse()
			if err != nil {
				return nil, fmt.Errorf("promtest: query_range %q: %w", expr, err)
			}
			sr.Points = append(sr.Points, Point{t, v})
		}
		out = append(out, sr)
	}
	slices.SortFunc(out, func(a, b Series) int { return strings.Compare(labelString(a.Labels), labelString(b.Labels)) })
	return out, nil
}

// WaitScrapedAfter polls Latest until selector matches at least one
// series and the latest sample of every series it matches was taken after
// t, and returns those samples. It polls every 50 ms until ctx ends; the
// error then says what was last seen.
func (s *Server) WaitScrapedAfter(ctx context.Context, selector string, t time.Time) ([]Sample, error) {
	var last []Sample
	var lastErr error
	for {
		got, err := s.Latest(ctx, selector)
		if err == nil && len(got) > 0 && !slices.ContainsFunc(got, func(x Sample) bool { return !x.Time.After(t) }) {
			return got, nil
		}
		last, lastErr = got, err
		if s.Exited() {
			return nil, fmt.Errorf("promtest: prometheus exited (%v); its log:\n%s", s.proc.Err(), s.Log())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("promtest: no sample of %s newer than %s: %w (last seen: %v, error %v)",
				selector, t.Format(time.RFC3339Nano), ctx.Err(), last, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Targets returns the health ("up", "down" or "unknown") of each scrape
// target, keyed by its address, with the last scrape error if any.
func (s *Server) Targets(ctx context.Context) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/targets?state=active", nil)
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	var body struct {
		Status string `json:"status"`
		Data   struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := s.getJSON(req, &body); err != nil {
		return nil, fmt.Errorf("promtest: targets: %w", err)
	}
	out := map[string]string{}
	for _, t := range body.Data.ActiveTargets {
		h := t.Health
		if t.LastError != "" {
			h += ": " + t.LastError
		}
		out[t.Labels["instance"]] = h
	}
	return out, nil
}

// result is the data of an /api/v1/query answer.
type result struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

func (s *Server) api(ctx context.Context, v url.Values) (*result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/query", strings.NewReader(v.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var body struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      result `json:"data"`
	}
	if err := s.getJSON(req, &body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", body.ErrorType, body.Error)
	}
	return &body.Data, nil
}

// getJSON sends req and decodes the answer's JSON body into v, whatever
// the status (the API answers errors in JSON too).
func (s *Server) getJSON(req *http.Request, v any) error {
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w (body %.200q)", resp.Status, err, data)
	}
	return nil
}

// point is a [time, value] pair of the API: seconds as a number, the value
// as a string ("NaN", "+Inf" included).
type point [2]json.RawMessage

func (p point) parse() (time.Time, float64, error) {
	var ts float64
	if err := json.Unmarshal(p[0], &ts); err != nil {
		return time.Time{}, 0, fmt.Errorf("timestamp %s: %w", p[0], err)
	}
	var vs string
	if err := json.Unmarshal(p[1], &vs); err != nil {
		return time.Time{}, 0, fmt.Errorf("value %s: %w", p[1], err)
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("value %q: %w", vs, err)
	}
	return parseTime(ts), v, nil
}

// histPoint is a [time, histogram] pair of the API.
type histPoint [2]json.RawMessage

func (p histPoint) parse() (time.Time, *Histogram, error) {
	var ts float64
	if err := json.Unmarshal(p[0], &ts); err != nil {
		return time.Time{}, nil, fmt.Errorf("timestamp %s: %w", p[0], err)
	}
	var h struct {
		Count   string            `json:"count"`
		Sum     string            `json:"sum"`
		Buckets []json.RawMessage `json:"buckets"`
	}
	if err := json.Unmarshal(p[1], &h); err != nil {
		return time.Time{}, nil, fmt.Errorf("histogram %s: %w", p[1], err)
	}
	count, err1 := strconv.ParseFloat(h.Count, 64)
	sum, err2 := strconv.ParseFloat(h.Sum, 64)
	if err := errors.Join(err1, err2); err != nil {
		return time.Time{}, nil, fmt.Errorf("histogram %s: %w", p[1], err)
	}
	return parseTime(ts), &Histogram{Count: count, Sum: sum, Buckets: len(h.Buckets)}, nil
}

func (r *result) samples() ([]Sample, error) {
	var out []Sample
	switch r.ResultType {
	case "scalar":
		var p point
		if err := json.Unmarshal(r.Result, &p); err != nil {
			return nil, err
		}
		t, v, err := p.parse()
		if err != nil {
			return nil, err
		}
		return []Sample{{Labels: map[string]string{}, Value: v, Time: t}}, nil
	case "vector":
		var vec []struct {
			Metric    map[string]string `json:"metric"`
			Value     *point            `json:"value"`
			Histogram *histPoint        `json:"histogram"`
		}
		if err := json.Unmarshal(r.Result, &vec); err != nil {
			return nil, err
		}
		for _, e := range vec {
			smp := Sample{Labels: e.Metric, Value: math.NaN()}
			var err error
			switch {
			case e.Value != nil:
				smp.Time, smp.Value, err = e.Value.parse()
			case e.Histogram != nil:
				smp.Time, smp.Histogram, err = e.Histogram.parse()
			}
			if err != nil {
				return nil, err
			}
			out = append(out, smp)
		}
	case "matrix":
		var mat []struct {
			Metric     map[string]string `json:"metric"`
			Values     []point           `json:"values"`
			Histograms []histPoint       `json:"histograms"`
		}
		if err := json.Unmarshal(r.Result, &mat); err != nil {
			return nil, err
		}
		for _, e := range mat {
			smp := Sample{Labels: e.Metric, Value: math.NaN()}
			var err error
			// The last point is the latest: the API lists them in time
			// order.
			if n := len(e.Values); n > 0 {
				smp.Time, smp.Value, err = e.Values[n-1].parse()
			}
			if n := len(e.Histograms); err == nil && n > 0 {
				var t time.Time
				var h *Histogram
				if t, h, err = e.Histograms[n-1].parse(); err == nil && t.After(smp.Time) {
					smp.Time, smp.Value, smp.Histogram = t, math.NaN(), h
				}
			}
			if err != nil {
				return nil, err
			}
			out = append(out, smp)
		}
	default:
		return nil, fmt.Errorf("result type %q is not read by promtest", r.ResultType)
	}
	slices.SortFunc(out, func(a, b Sample) int { return strings.Compare(labelString(a.Labels), labelString(b.Labels)) })
	return out, nil
}

// labelString writes labels in a fixed order, for sorting and messages.
func labelString(ls map[string]string) string {
	keys := make([]string, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, ls[k])
	}
	b.WriteByte('}')
	return b.String()
}

// String prints the sample as labels, value and time.
func (s Sample) String() string {
	v := strconv.FormatFloat(s.Value, 'g', -1, 64)
	if s.Histogram != nil {
		v = fmt.Sprintf("histogram{count=%v,sum=%v,buckets=%d}", s.Histogram.Count, s.Histogram.Sum, s.Histogram.Buckets)
	}
	return labelString(s.Labels) + " " + v + " @" + s.Time.Format("15:04:05.000")
}

// parseTime converts the API's seconds, with millisecond precision, to a
// time.
func parseTime(sec float64) time.Time { return time.UnixMilli(int64(math.Round(sec * 1000))) }

// formatTime writes t as the API's seconds, to the millisecond.
func formatTime(t time.Time) string {
	ms := t.UnixMilli()
	return strconv.FormatInt(ms/1000, 10) + "." + fmt.Sprintf("%03d", ms%1000)
}
