package lab

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

//go:embed static
var staticFS embed.FS

// Default limits; see Options.
const (
	DefaultMaxConcurrent = 2                      // simulating requests at once
	DefaultQueueWait     = 500 * time.Millisecond // wait for a slot before 503
	DefaultTimeout       = 10 * time.Second       // per explorer request
	DefaultMaxRequests   = 200_000                // simulated requests per run
	DefaultMaxWork       = 400_000                // runs x requests per point
	DefaultMaxMemory     = 160 << 20              // bytes one request's simulations hold at once
)

// runBytesPerRequest bounds the memory a simulated run holds at its peak,
// per request it simulates. A stable queue needs almost none of it (the
// latencies, 8 bytes a request); an unstable one (hedges without
// cancellation near capacity) holds nearly every request in flight at the
// end of the run: the request table, its queue entries, its hedge timers
// and the latencies, with the old and new arrays both alive while one
// grows. The worst measured (200,000 requests at load 0.95, the live p50
// without cancellation, every world and routing, 20,000 to 200,000
// requests) was 680 bytes; this keeps a margin of a sixth. A fan-out's
// leaf counts as a request: the same point with 200,000 leaves (widths
// 10, 40 and 100, the lognormal pool at sigma 3) peaked at 720 bytes a
// leaf. Measure it again when the simulator's engine changes: the peak
// HeapAlloc of single runs of such points, sampled while they run under
// a low GOGC.
const runBytesPerRequest = 800

// trimAbove is how much memory the process may hold from the operating
// system once the last simulation has finished: above it the server
// collects and returns its free memory at once rather than leaving it to
// the runtime's gradual scavenger.
const trimAbove = 64 << 20

// Options configure a Server. A zero Options consists entirely of default
// values.
type Options struct {
	// MaxConcurrent is the most explorer simulations (and advise
	// analyses) running at once; further requests wait up to QueueWait
	// for a slot and then get 503. Zero means DefaultMaxConcurrent (2).
	MaxConcurrent int
	// QueueWait is how long a simulation request waits for a free slot.
	// Zero means DefaultQueueWait; negative means do not wait at all.
	QueueWait time.Duration
	// Timeout bounds one explorer request's simulations, and one advise
	// request's analysis. Zero means DefaultTimeout. When it expires the
	// work stops where it is (the simulator checks its context every few
	// thousand events, advise in each of its loops), the slot is given
	// back and the request gets 503.
	Timeout time.Duration
	// MaxRequests is the most simulated requests per run a client may ask
	// for, and MaxWork the most runs x requests per simulated point. A
	// fan-out's request counts once per leaf in both (see
	// ExploreParams.Runs). Zero means DefaultMaxRequests and
	// DefaultMaxWork.
	MaxRequests, MaxWork int
	// MaxMemory bounds the memory one explorer request's simulations hold
	// at once, in bytes, by a worst-case estimate (runBytesPerRequest per
	// simulated request of each run in progress). The runs of a point run
	// in parallel only as far as it allows; a request whose single run
	// would exceed it gets 413. Zero means DefaultMaxMemory (160 MiB),
	// which admits one run of MaxRequests, or two of 100,000 in parallel.
	MaxMemory int64
	// Study is the content of a results.json written by "hedge study".
	// Nil means the copy embedded at build time (study.json, a copy of
	// docs/study/results.json).
	Study []byte
	// Workers is the parallel runs per simulated point. Zero means
	// GOMAXPROCS.
	Workers int
	// DefaultRequests is the page's opening "requests per run" and the
	// API's default, which a fan-out lowers to fit MaxRequests and
	// MaxWork. Zero means 100,000 (or MaxRequests if smaller); tests use
	// fewer.
	DefaultRequests int
}

// Server is the lab's HTTP handler: the embedded page and the JSON API.
// It is safe for concurrent use.
type Server struct {
	o     Options
	mux   *http.ServeMux
	sem   chan struct{}
	study []byte // validated results.json
	index []byte // index.html with the opening simulation size
	cache *cache // explorer results and the summaries they are built from
	// trimAbove is the memory held from the operating system above which
	// the last simulation to finish returns free memory (see trim).
	trimAbove uint64
	// testHook, if set, is called while a simulation slot is held, with
	// the context the request's simulations run under (tests).
	testHook func(ctx context.Context)
	// testWaiting, if set, is called when a request starts waiting for a
	// simulation slot (tests).
	testWaiting func()
}

// New returns a Server with o's limits. It fails if o.Study is not a
// results.json array.
func New(o Options) (*Server, error) {
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.QueueWait == 0 {
		o.QueueWait = DefaultQueueWait
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = DefaultMaxRequests
	}
	if o.MaxWork <= 0 {
		o.MaxWork = DefaultMaxWork
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.DefaultRequests <= 0 {
		o.DefaultRequests = DefaultExploreParams().Requests
	}
	o.DefaultRequests = min(max(o.DefaultRequests, minRequests), o.MaxRequests, o.MaxWork/DefaultExploreParams().Runs,
		int(min(o.MaxMemory/runBytesPerRequest, math.MaxInt32)))
	study := o.Study
	if study == nil {
		study = embeddedStudy
	}
	if err := checkStudy(study); err != nil {
		return nil, err
	}
	s := &Server{o: o, sem: make(chan struct{}, o.MaxConcurrent), study: study,
		cache: newCache(cacheEntries, cacheBytes), trimAbove: trimAbove}
	page, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		return nil, err
	}
	// The page's opening size, and the limits it fits a fan-out's
	// requests to.
	s.index = bytes.Replace(page, []byte(`data-requests="100000"`), []byte(`data-requests="`+strconv.Itoa(o.DefaultRequests)+`"`), 1)
	s.index = bytes.Replace(s.index, []byte(`data-max-requests="200000"`), []byte(`data-max-requests="`+strconv.Itoa(o.MaxRequests)+`"`), 1)
	s.index = bytes.Replace(s.index, []byte(`data-max-work="400000"`), []byte(`data-max-work="`+strconv.Itoa(o.MaxWork)+`"`), 1)
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	static, _ := fs.Sub(staticFS, "static")
	files := http.FileServerFS(static)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /api/explore", s.handleExplore)
	s.mux.HandleFunc("GET /api/drill", s.handleDrill)
	s.mux.HandleFunc("GET /api/study", s.handleStudy)
	s.mux.HandleFunc("POST /api/advise", s.handleAdvise)
	// "GET /api/advise" would conflict with "/api/": both catch-alls
	// answer /api/advise's other methods themselves.
	s.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/advise" {
			adviseMethodNotAllowed(w, r)
			return
		}
		writeError(w, http.StatusNotFound, "no such endpoint: use GET /api/explore, /api/drill or /api/study, or POST /api/advise", nil)
	})
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/advise" {
			adviseMethodNotAllowed(w, r)
			return
		}
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: this endpoint is read-only, use GET (only /api/advise takes a POST)", nil)
	})
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		b, _ := staticFS.ReadFile("static/favicon.svg")
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Write(b)
	})
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(s.index)
	})
}

// ServeHTTP serves the page at /, its files under /static/, and the API:
// GET /api/explore, GET /api/drill, GET /api/study and POST /api/advise
// (see the package doc). A POST (or any method but GET, HEAD and OPTIONS)
// from a page of another origin gets 403.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-cache")
	if err := crossOrigin.Check(r); err != nil {
		writeError(w, http.StatusForbidden, fmt.Sprintf(
			"refused: this %s came from a page of another site (Sec-Fetch-Site %q, Origin %q), and the lab's API answers only its own page, at http://%s/, and tools that send no Origin, such as curl",
			r.Method, clip(r.Header.Get("Sec-Fetch-Site")), clip(r.Header.Get("Origin")), clip(r.Host)), nil)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// crossOrigin refuses requests other than GET, HEAD and OPTIONS that a
// browser sends from a page of another origin: a page anywhere on the web
// may POST a text body to 127.0.0.1 without asking first (a no-cors
// fetch needs no preflight), and /api/advise would spend a simulation
// slot on it. The browser's Sec-Fetch-Site must say same-origin or none
// (typed or bookmarked); without it, an Origin must name the request's
// Host; a request with neither, from a tool rather than a page, passes.
var crossOrigin = http.NewCrossOriginProtection()

// adviseMethodNotAllowed answers /api/advise with a method other than
// POST.
func adviseMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: POST the file of latencies as the request body", nil)
}

// errBusy is returned by acquire when no simulation slot frees in time.
var errBusy = errors.New("busy")

// acquire takes a simulation slot, waiting up to QueueWait, and returns
// the function that gives it back.
func (s *Server) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	default:
	}
	if s.o.QueueWait < 0 {
		return nil, errBusy
	}
	if s.testWaiting != nil {
		s.testWaiting()
	}
	t := time.NewTimer(s.o.QueueWait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	case <-t.C:
		return nil, errBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// MemoryBudget returns the most memory, in bytes, that the server's
// simulations and cache are meant to hold at once: MaxConcurrent requests
// of MaxMemory each, plus the cache's limit. "hedge lab" sets the
// process's soft memory limit (debug.SetMemoryLimit) a little above it.
func (s *Server) MemoryBudget() int64 {
	return int64(s.o.MaxConcurrent)*s.o.MaxMemory + cacheBytes
}

// runWorkers returns how many runs of a point with the given requests per
// run (leaves, with a fan-out: a leaf holds what a request does) may
// simulate in parallel within MaxMemory, and 0 if a single run would
// exceed it.
func (s *Server) runWorkers(requests, runs int) int {
	perRun := max(int64(requests)*runBytesPerRequest, 1)
	return int(min(int64(s.o.Workers), int64(runs), s.o.MaxMemory/perRun))
}

// trim returns free memory to the operating system once the last
// running simulation has finished, if the process holds more than
// trimAbove bytes. An unstable run grows the heap by up to MaxMemory and
// leaves most of it garbage; without this the runtime collects it at its
// next cycle and gives the pages back only gradually. An idle lab holds
// little (the cache is bounded), so the forced collection is cheap.
func (s *Server) trim() {
	if len(s.sem) > 0 {
		return // a simulation is running: the last to finish trims
	}
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(samples)
	if samples[0].Value.Kind() != metrics.KindUint64 || samples[1].Value.Kind() != metrics.KindUint64 {
		debug.FreeOSMemory() // metrics not supported: trim anyway
		return
	}
	if held := samples[0].Value.Uint64() - samples[1].Value.Uint64(); held > s.trimAbove {
		debug.FreeOSMemory()
	}
}

// ParamError is one rejected query parameter.
type ParamError struct {
	// Param is the query parameter's name (clipped to 40 bytes); it is
	// empty when the query as a whole is rejected (too many parameters)
	// or the parameter has no name ("=5"). Reason says what is wrong and
	// what to use instead.
	Param  string `json:"param"`
	Reason string `json:"reason"`
}

// ErrorResponse is the JSON body of every error the API returns.
type ErrorResponse struct {
	// Error says what went wrong and what to do, in one message.
	Error string `json:"error"`
	// Params lists the rejected parameters of a 400, one entry each.
	Params []ParamError `json:"params,omitempty"`
}

func writeError(w http.ResponseWriter, code int, msg string, params []ParamError) {
	writeJSON(w, code, ErrorResponse{Error: msg, Params: params})
}

func writeParamErrors(w http.ResponseWriter, errs []ParamError) {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Reason
		if e.Param != "" {
			parts[i] = e.Param + ": " + e.Reason
		}
	}
	writeError(w, http.StatusBadRequest, "invalid parameters: "+strings.Join(parts, "; "), errs)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(fmt.Sprintf(`{"error":%q}`, "encoding the response: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
