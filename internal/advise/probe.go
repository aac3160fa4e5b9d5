package advise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Probe limits: the probe is a gentle sampler, not a load generator.
const (
	// MaxProbeRate is the highest probe rate, requests per second.
	MaxProbeRate = 50
	// MaxProbeCount is the most requests one probe sends.
	MaxProbeCount = 100_000
	// MaxProbeDuration is the longest a probe runs.
	MaxProbeDuration = time.Hour
	// maxProbeAddrs is the most resolved addresses a probe spreads over.
	maxProbeAddrs = 32
	// maxProbeInFlight is the most probe requests outstanding at once;
	// a request due while that many are waiting is skipped, not queued.
	maxProbeInFlight = 64
	// maxProbeBody is how much of a response body is read.
	maxProbeBody = 1 << 20
)

// ProbeOptions configure Probe. Zero fields take the defaults named.
type ProbeOptions struct {
	// URL is what to request: http or https.
	URL string
	// Method is GET (the default) or HEAD; nothing else is ever sent.
	Method string
	// Rate is requests per second, at most MaxProbeRate (default 5). The
	// requests go at fixed intervals whatever the answers do (open loop).
	Rate float64
	// Count is how many latencies to record, at most MaxProbeCount
	// (default MinSample).
	Count int
	// Duration bounds the probe, warm-ups included, at most
	// MaxProbeDuration (default: as long as Count and a warm-up for each of
	// up to 32 addresses need at Rate, plus a tenth and 5 s).
	Duration time.Duration
	// Timeout bounds each request (default 10 s).
	Timeout time.Duration
	// Resolve returns the addresses of a host name; nil means
	// net.DefaultResolver.LookupHost.
	Resolve func(ctx context.Context, host string) ([]string, error)
	// Progress, if set, is told what the probe is doing.
	Progress io.Writer

	// transport, if set, replaces each address's HTTP transport (tests).
	transport func(target string) http.RoundTripper
}

// ErrProbe is wrapped by the errors of invalid ProbeOptions.
var ErrProbe = errors.New("invalid probe")

// Defaults returns o with zero fields given their defaults.
func (o ProbeOptions) Defaults() ProbeOptions {
	if o.Method == "" {
		o.Method = http.MethodGet
	}
	if o.Rate == 0 {
		o.Rate = 5
	}
	if o.Count == 0 {
		o.Count = MinSample
	}
	if o.Duration == 0 && o.Rate > 0 {
		// Room for a warm-up per address too, as many as a probe spreads over.
		o.Duration = min(MaxProbeDuration, time.Duration(float64(o.Count+maxProbeAddrs)/o.Rate*1.1*float64(time.Second))+5*time.Second)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return o
}

// Validate reports every mistake in o (after Defaults).
func (o ProbeOptions) Validate() error {
	var errs []error
	u, err := url.Parse(o.URL)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("URL %q: %v: give an http:// or https:// URL", o.URL, err))
	case u.Scheme != "http" && u.Scheme != "https":
		errs = append(errs, fmt.Errorf("URL %q: scheme %q: give an http:// or https:// URL", o.URL, u.Scheme))
	case u.Hostname() == "":
		errs = append(errs, fmt.Errorf("URL %q has no host", o.URL))
	}
	if o.Method != http.MethodGet && o.Method != http.MethodHead {
		errs = append(errs, fmt.Errorf("method %q: the probe sends only GET or HEAD, read-only requests that are safe to repeat", o.Method))
	}
	if !(o.Rate > 0 && o.Rate <= MaxProbeRate) {
		errs = append(errs, fmt.Errorf("rate %v: use more than 0 and at most %d requests per second", o.Rate, MaxProbeRate))
	}
	if o.Count < 1 || o.Count > MaxProbeCount {
		errs = append(errs, fmt.Errorf("count %d: use 1 to %d requests", o.Count, MaxProbeCount))
	}
	if o.Duration <= 0 || o.Duration > MaxProbeDuration {
		errs = append(errs, fmt.Errorf("duration %v: use more than 0 and at most %v", o.Duration, MaxProbeDuration))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout %v: use a positive duration", o.Timeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrProbe, errors.Join(errs...))
	}
	return nil
}

// Probe measures the latency of o.URL by sending read-only requests (GET
// or HEAD, nothing else) at a low fixed rate, spread round-robin over the
// addresses the host resolves to, one HTTP client per address. Each
// address first gets one request that is not recorded (it opens the
// connection); the warm-ups go at the rate too, one at a time. A latency runs from sending the request to the end of its
// body (read up to 1 MiB); requests that fail or answer 5xx are counted
// and not recorded. The sample names each latency's address and send time.
// It returns when Count latencies are recorded, Duration has passed or ctx
// ends, after every request it sent has returned.
func Probe(ctx context.Context, o ProbeOptions) (*Sample, error) {
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(o.URL)
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		resolve := o.Resolve
		if resolve == nil {
			resolve = net.DefaultResolver.LookupHost
		}
		var err error
		if addrs, err = resolve(ctx, host); err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		slices.Sort(addrs)
		addrs = slices.Compact(addrs)
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolving %s: no addresses", host)
		}
		if len(addrs) > maxProbeAddrs {
			addrs = addrs[:maxProbeAddrs]
		}
	}
	clients := make([]*http.Client, len(addrs))
	names := make([]string, len(addrs))
	for i, a := range addrs {
		target := net.JoinHostPort(a, port)
		names[i] = target
		var d net.Dialer
		tr := &http.Transport{
			// Every connection of this client goes to one address; the
			// URL (and so the Host header and TLS server name) is kept.
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, target)
			},
			MaxIdleConnsPerHost: maxProbeInFlight,
			ForceAttemptHTTP2:   true,
		}
		var rt http.RoundTripper = tr
		if o.transport != nil {
			rt = o.transport(target)
		}
		clients[i] = &http.Client{
			Transport: rt,
			Timeout:   o.Timeout,
			// A redirect is answered, not followed: it could lead
			// anywhere, and the probe measures this URL.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "probe: %s %s at %g/s over %d address(es) (%s), up to %d requests or %v; only %s requests are sent\n",
		o.Method, o.URL, o.Rate, len(addrs), strings.Join(names, ", "), o.Count, o.Duration, o.Method)

	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	interval := time.Duration(float64(time.Second) / o.Rate)
	// One unrecorded request per address opens its connection, each at
	// least an interval after the one before: the rate holds for every
	// request sent, the warm-ups included.
	next := time.Now()
	for i := range clients {
		if !sleepUntil(ctx, next) {
			break
		}
		next = time.Now().Add(interval)
		_, _, _ = probeOnce(ctx, clients[i], o.Method, o.URL)
	}

	var (
		mu                sync.Mutex
		s                 = &Sample{Replicas: []string{}, Times: []time.Time{}}
		failed, server5xx int
		skipped           int
		firstErr          string
		wg                sync.WaitGroup
		inFlight          = make(chan struct{}, maxProbeInFlight)
		start             = next // an interval after the last warm-up
		sent              int
	)
	timer := time.NewTimer(time.Until(start))
	defer timer.Stop()
loop:
	for k := 0; ; k++ {
		// Stop when the requests sent, less those that failed, are
		// enough, or when failures have used up their allowance.
		mu.Lock()
		done := sent-failed-server5xx >= o.Count
		mu.Unlock()
		if done || sent >= o.Count+skippedBudget(o.Count) {
			break
		}
		select {
		case <-ctx.Done():
			break loop
		case <-timer.C:
		}
		timer.Reset(time.Until(start.Add(time.Duration(k+1) * interval)))
		select {
		case inFlight <- struct{}{}:
		default:
			skipped++
			continue
		}
		i := k % len(clients)
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-inFlight }()
			at := time.Now()
			lat, status, err := probeOnce(ctx, clients[i], o.Method, o.URL)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if ctx.Err() == nil {
					failed++
					if firstErr == "" {
						firstErr = err.Error()
					}
				}
			case status >= 500:
				server5xx++
			case len(s.Latencies) < o.Count:
				s.Latencies = append(s.Latencies, lat)
				s.Replicas = append(s.Replicas, names[i])
				s.Times = append(s.Times, at)
			}
		}()
	}
	wg.Wait()
	s.Source = fmt.Sprintf("probe: %s %s, %d address(es)", o.Method, o.URL, len(addrs))
	s.Notes = append(s.Notes, fmt.Sprintf("The probe sent only %s requests: %d at %g/s over %v, %d recorded, %d failed, %d answered 5xx, %d skipped (%d already in flight).",
		o.Method, sent, o.Rate, time.Since(start).Round(time.Second), len(s.Latencies), failed, server5xx, skipped, maxProbeInFlight))
	if firstErr != "" {
		s.Notes = append(s.Notes, "First probe error: "+firstErr)
	}
	if len(s.Latencies) == 0 {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the probe recorded no latency (%d failed, %d answered 5xx; first error: %s)", ErrEmpty, failed, server5xx, firstErr)
	}
	return s, nil
}

// sleepUntil waits until t, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// skippedBudget is how many requests beyond count a probe may send to
// make up for failures, so that a failing server is not probed for ever.
func skippedBudget(count int) int { return count/10 + 10 }

// probeOnce sends one request and returns its latency to the end of the
// body (read up to maxProbeBody) and the status.
func probeOnce(ctx context.Context, c *http.Client, method, target string) (time.Duration, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	lat := time.Since(start)
	resp.Body.Close()
	if err != nil {
		return 0, resp.StatusCode, fmt.Errorf("reading the body: %w", err)
	}
	return lat, resp.StatusCode, nil
}
