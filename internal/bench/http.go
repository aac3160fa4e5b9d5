package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgehttp"
)

// Keys is the number of distinct keys the workload reads: request i reads
// key i mod Keys.
const Keys = 1000

// ValueSize is the size in bytes of every value the replicas serve.
const ValueSize = 64

// HTTPOptions configures StartHTTP.
type HTTPOptions struct {
	// Replicas is the number of servers. Zero means 3.
	Replicas int
	// H2C serves and sends HTTP/2 without TLS (prior knowledge) instead
	// of HTTP/1.1. Over HTTP/1.1 a cancelled copy's connection is closed,
	// and the next request to that replica pays a new dial; over HTTP/2
	// the cancel is a stream reset and the connection stays.
	H2C bool
}

// HTTPBackend is a set of in-process HTTP replicas, each a net/http server
// on its own 127.0.0.1 port, serving GET /item?k=N with a value of
// ValueSize bytes. A stall of a replica blocks every one of its handlers
// until it ends (Gate), before and after reading the request, like a
// process paused by a stop-the-world collection.
type HTTPBackend struct {
	h2c     bool
	urls    []string
	servers []*http.Server
	gates   []*Gate
	served  []atomic.Int64
	serveWG sync.WaitGroup // Serve loops
	once    sync.Once
	errs    []error

	mu      sync.Mutex
	closing bool
	handlWG sync.WaitGroup // running handlers; Add only under mu, before closing
}

// StartHTTP starts the replicas on free loopback ports.
func StartHTTP(o HTTPOptions) (*HTTPBackend, error) {
	n := o.Replicas
	if n == 0 {
		n = 3
	}
	if n < 2 || n > 64 {
		return nil, fmt.Errorf("bench: %d HTTP replicas: use 2 to 64", n)
	}
	b := &HTTPBackend{served: make([]atomic.Int64, n), h2c: o.H2C}
	value := ItemValue()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("bench: HTTP replica %d: %w", i, err)
		}
		g := &Gate{}
		srv := &http.Server{
			Handler:           b.handler(i, g, value),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       60 * time.Second,
			ErrorLog:          nil,
		}
		if o.H2C {
			srv.Protocols = new(http.Protocols)
			srv.Protocols.SetHTTP1(true)
			srv.Protocols.SetUnencryptedHTTP2(true)
		}
		b.gates = append(b.gates, g)
		b.servers = append(b.servers, srv)
		b.urls = append(b.urls, "http://"+l.Addr().String())
		b.serveWG.Add(1)
		go func() {
			defer b.serveWG.Done()
			_ = srv.Serve(l)
		}()
	}
	return b, nil
}

func (b *HTTPBackend) handler(i int, g *Gate, value []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		if b.closing {
			b.mu.Unlock()
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		b.handlWG.Add(1)
		b.mu.Unlock()
		defer b.handlWG.Done()
		b.served[i].Add(1)
		g.Wait(r.Context())
		if !ItemRequest(w, r) {
			return
		}
		g.Wait(r.Context())
		WriteItem(w, value)
	})
}

// ItemValue returns the value an HTTP bench server answers: ValueSize
// bytes of the alphabet, over and over.
func ItemValue() []byte {
	v := make([]byte, ValueSize)
	for i := range v {
		v[i] = 'a' + byte(i%26)
	}
	return v
}

// ItemRequest reports whether r is GET /item?k=N, the read of an HTTP
// bench server. If it is not, it answers 404 or 400 on w and returns
// false.
func ItemRequest(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/item" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return false
	}
	if _, err := strconv.Atoi(r.URL.Query().Get("k")); err != nil {
		http.Error(w, "k must be a number", http.StatusBadRequest)
		return false
	}
	return true
}

// WriteItem answers an item read with value.
func WriteItem(w http.ResponseWriter, value []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(value)))
	_, _ = w.Write(value)
}

// Name returns "http".
func (b *HTTPBackend) Name() string { return "http" }

// Replicas returns the number of replicas.
func (b *HTTPBackend) Replicas() int { return len(b.urls) }

// URLs returns the base URL of each replica ("http://127.0.0.1:PORT").
func (b *HTTPBackend) URLs() []string { return append([]string(nil), b.urls...) }

// Served returns how many requests each replica has received.
func (b *HTTPBackend) Served() []int64 {
	out := make([]int64, len(b.served))
	for i := range b.served {
		out[i] = b.served[i].Load()
	}
	return out
}

// Stall blocks every handler of replica i for d.
func (b *HTTPBackend) Stall(ctx context.Context, i int, d time.Duration) error {
	return b.gates[i].Stall(ctx, d)
}

// Close ends stalls, closes the servers and their connections, and waits
// for their goroutines.
func (b *HTTPBackend) Close() error {
	b.once.Do(func() {
		b.mu.Lock()
		b.closing = true
		b.mu.Unlock()
		for _, g := range b.gates {
			g.Close()
		}
		for _, s := range b.servers {
			if err := s.Close(); err != nil {
				b.errs = append(b.errs, err)
			}
		}
		b.serveWG.Wait()
		b.handlWG.Wait()
	})
	return errors.Join(b.errs...)
}

// NewClient returns a client that sends GET /item?k=N through a
// hedgehttp.Transport over the replicas, hedging as cfg says.
func (b *HTTPBackend) NewClient(cfg hedge.Config) (Client, error) {
	h, err := hedge.New(cfg)
	if err != nil {
		return nil, err
	}
	base, dials := NewCountingTransport()
	if b.h2c {
		base.Protocols = new(http.Protocols)
		base.Protocols.SetUnencryptedHTTP2(true)
	}
	t, err := hedgehttp.New(base, h, hedgehttp.Config{Replicas: b.URLs()})
	if err != nil {
		return nil, err
	}
	urls := ItemURLs(b.urls[0])
	return ClientFuncs{
		DoFunc: func(ctx context.Context, i int) error {
			return HTTPGet(ctx, t, urls[i%Keys])
		},
		StatsFunc: func() ClientStats {
			s := HedgerStats(h.OpStats(http.MethodGet))
			s.Dials = dials.Load()
			return s
		},
		CloseFunc: func() error {
			t.CloseIdleConnections()
			return nil
		},
	}, nil
}

// ItemURLs returns the URL of every key on the replica at base.
func ItemURLs(base string) []string {
	out := make([]string, Keys)
	for k := range out {
		out[k] = base + "/item?k=" + strconv.Itoa(k)
	}
	return out
}

// NewCountingTransport returns an *http.Transport for the workload (keep-
// alive, no compression, idle connections kept for every request in
// flight) and the count of connections it has dialled.
func NewCountingTransport() (*http.Transport, *atomic.Int64) {
	dials := &atomic.Int64{}
	d := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}, dials
}

// HTTPGet sends GET url through rt, reads the body to the end and closes
// it. A status other than 200 is an error.
func HTTPGet(ctx context.Context, rt http.RoundTripper, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// RoundRobin is an http.RoundTripper that sends each request (each copy,
// when a hedging library sends copies through it) to the next replica in
// turn, replacing the URL's scheme and host: the client-side balancing a
// user of a single-host hedging library would put under it.
type RoundRobin struct {
	// Base sends the requests.
	Base http.RoundTripper
	// Hosts are the replicas' host:port.
	Hosts []string
	next  atomic.Uint64
}

// NewRoundRobin returns a RoundRobin over the base URLs of b's replicas.
func NewRoundRobin(base http.RoundTripper, b *HTTPBackend) *RoundRobin {
	hosts := make([]string, len(b.urls))
	for i, u := range b.urls {
		hosts[i] = u[len("http://"):]
	}
	return &RoundRobin{Base: base, Hosts: hosts}
}

// RoundTrip sends a shallow copy of req, aimed at the next replica.
func (rr *RoundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	i := (rr.next.Add(1) - 1) % uint64(len(rr.Hosts))
	r := *req
	u := *req.URL
	u.Host = rr.Hosts[i]
	r.URL = &u
	r.Host = ""
	return rr.Base.RoundTrip(&r)
}
