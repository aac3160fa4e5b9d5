// Package hedgectl is the control endpoint of a service's Hedgers: an
// http.Handler that shows each Hedger's configuration and stats as JSON,
// and switches its mode (On, Shadow, Off) and rollout fraction at run time,
// so that an operator can turn hedging off, or into a dry run, from
// outside the process.
//
//	ctl, err := hedgectl.New(map[string]*hedge.Hedger{"items": h}, hedgectl.Options{})
//	...
//	mux.Handle("/debug/hedge/", http.StripPrefix("/debug/hedge", ctl))
//
// Routes (relative to where it is mounted):
//
//	GET  /          every Hedger: mode, rollout, policy, budget, per-operation stats
//	POST /mode      {"mode":"off"} or {"mode":"off","hedger":"items"}: switch all Hedgers, or one
//	POST /rollout   {"fraction":0.05[,"hedger":"items"]}: hedge 5% of requests for real, shadow the rest
//
// A change is a POST whose body is one JSON object, sent with
// Content-Type application/json; the answer is the new state:
//
//	curl -X POST -H 'Content-Type: application/json' -d '{"mode":"off"}' http://127.0.0.1:8080/debug/hedge/mode
//
// Anything else is refused and changes nothing: a form body, a query
// string, another content type (415), a key given twice, a key the route
// does not take, trailing data (400).
//
// # Who may use it
//
// Changing the mode of a service's Hedgers is an operation on production,
// and the stats describe its traffic. Every request, reads included,
// passes these checks, in order; a refused one gets 403 and the reason.
//
//   - Proxies: a request carrying a forwarding header (Forwarded,
//     X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, X-Real-IP)
//     or a client-IP header (True-Client-IP, CF-Connecting-IP,
//     Fastly-Client-IP, X-Client-IP, X-Cluster-Client-IP) is refused
//     (ErrForwarded), unless Options.Forwarded is set, which needs
//     Options.Authorize: behind a proxy the remote address is the
//     proxy's, so the default below would admit whoever the proxy
//     admits. Middleware that sets the remote address from such a
//     header (chi's RealIP and the like) leaves the header in place, so
//     the request is refused too, whatever address the header names.
//   - Host: the Host header must name a loopback host (localhost, not
//     its subdomains, or a loopback IP address such as 127.0.0.1 or ::1,
//     any port) or one of Options.Hosts (ErrHost). A web page whose name an attacker points
//     at 127.0.0.1 (DNS rebinding) sends its own name, and is refused.
//   - Browsers: a request a browser made for another site's page is
//     refused (ErrCrossSite): one with Sec-Fetch-Site other than
//     same-origin or none, or with an Origin other than the endpoint's
//     own (scheme, Host and port). A page can send a cross-site form
//     post without script, but not one with a JSON content type, which
//     a browser sends only after a CORS preflight that this Handler
//     never grants; the two checks together leave no way for a page
//     elsewhere to change anything.
//   - Who: Options.Authorize decides. Without it the Handler answers
//     only requests whose remote address is a loopback address
//     (127.0.0.0/8, ::1) with a port, as net/http sets it for a
//     connection: a port bound to localhost (ErrNotLoopback). A remote
//     address without a port is refused: middleware wrote it from a
//     request header, which any client can send.
//
// A sidecar or reverse proxy on the same host connects from loopback, so
// through one every client would look local. Run the control endpoint on
// a listener of its own, bound to 127.0.0.1, that the proxy does not
// route to; or, to reach it through the proxy, have the proxy add
// X-Forwarded-For (Envoy and Go's httputil.ReverseProxy do by default,
// nginx with proxy_set_header X-Forwarded-For) and set
// Options.Authorize to authenticate the operator (a token, or the
// identity the proxy verified), Options.Forwarded, and Options.Hosts to
// the names the proxy forwards under. A proxy that forwards requests
// without a forwarding header cannot be told from a local client: never
// route the endpoint through one.
//
// # Fleet policy
//
// With Options.Fleet, GET / also shows the policy document the pod runs
// ("fleet": its version, state and error, as package fleet reports it)
// and each Hedger's live settings ("live"). A policy's mode applies over
// the mode this endpoint switches: a request runs in the more cautious
// of the two, so POST /mode {"mode":"off"} turns the pod's hedging off
// whatever the policy says.
//
// Hedgers that share a hedge.ModeVar (hedgegrpc's per-method Hedgers, or
// any given the same Config.ModeVar) switch together: a change to one is a
// change to all.
package hedgectl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/internal/hedgeset"
)

// Options configures a Handler.
type Options struct {
	// Authorize decides whether r may be served; a non-nil error refuses
	// it with 403 and the error's text. Nil means: loopback clients
	// only. It is asked after the checks of Hosts, Forwarded and the
	// browser headers, which it does not replace.
	Authorize func(r *http.Request) error
	// Hosts lists the host names (or IP addresses), without a port,
	// that the Host header of a request may name besides loopback ones:
	// the names by which operators or a proxy reach the endpoint, such
	// as "ops.example.com". Compared without case and port. Nil means
	// loopback hosts only.
	Hosts []string
	// Forwarded admits requests that carry forwarding or client-IP
	// headers (Forwarded, X-Forwarded-For, X-Forwarded-Host,
	// X-Forwarded-Proto, X-Real-IP, True-Client-IP, CF-Connecting-IP,
	// Fastly-Client-IP, X-Client-IP, X-Cluster-Client-IP), as a proxy's
	// do. It needs Authorize: the remote address of a forwarded request
	// is the proxy's, not the client's.
	Forwarded bool
	// Fleet, if set, is the pod's fleet policy watcher (a *fleet.Watcher):
	// GET / then shows which policy document the pod runs, and each
	// Hedger's live settings.
	Fleet FleetStatus
}

// Refusals, each answered 403 (ErrNotJSON: 415) with its text; match them
// with errors.Is.
var (
	// ErrNotLoopback is the refusal of the default authorization for a
	// client that is not on a loopback address, or whose remote address
	// is not host:port (middleware rewrote it from a header).
	ErrNotLoopback = errors.New("hedgectl: only loopback clients may use this endpoint (set Options.Authorize to allow others)")
	// ErrHost refuses a request whose Host header names neither a
	// loopback host nor one of Options.Hosts, such as a web page's name
	// pointed at 127.0.0.1.
	ErrHost = errors.New("hedgectl: the Host header names no loopback host and none of Options.Hosts")
	// ErrForwarded refuses a request with a forwarding header when
	// Options.Forwarded is not set: it came through a proxy, whose
	// remote address says nothing of the client's.
	ErrForwarded = errors.New("hedgectl: the request came through a proxy (it has a forwarding header); set Options.Authorize and Options.Forwarded to serve such requests")
	// ErrCrossSite refuses a request that a browser sent for a page of
	// another origin (Sec-Fetch-Site, Origin).
	ErrCrossSite = errors.New("hedgectl: the request came from a web page of another origin")
	// ErrNotJSON refuses a change whose Content-Type is not
	// application/json.
	ErrNotJSON = errors.New(`hedgectl: a change needs a JSON body with Content-Type application/json, such as {"mode":"off"}`)
	// ErrInvalidOptions is wrapped by New's error for mistaken Options.
	ErrInvalidOptions = errors.New("hedgectl: invalid options")
)

// forwardingHeaders are the headers proxies and CDNs add to the requests
// they forward, naming the client or the original request, as they are
// usually spelt; forwardingKeys are their canonical forms, the keys of
// an http.Header.
var (
	forwardingHeaders = []string{
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP",
		"True-Client-IP", "CF-Connecting-IP", "Fastly-Client-IP", "X-Client-IP", "X-Cluster-Client-IP",
	}
	forwardingKeys = canonical(forwardingHeaders)
)

func canonical(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = http.CanonicalHeaderKey(n)
	}
	return out
}

// maxBody bounds a change's body.
const maxBody = 4 << 10

// Handler is the control endpoint. Make one with New.
type Handler struct {
	names     []string
	hedgers   map[string]*hedge.Hedger
	authorize func(*http.Request) error
	hosts     map[string]bool
	forwarded bool
	fleet     FleetStatus
}

// New returns a Handler for the named Hedgers. Names must be non-empty and
// the Hedgers non-nil and distinct, Options.Hosts host names without a
// port, and Options.Forwarded comes with Options.Authorize; every mistake
// is reported at once (those in Options wrap ErrInvalidOptions).
func New(hedgers map[string]*hedge.Hedger, opts Options) (*Handler, error) {
	list, errs := hedgeset.Sort(hedgers)
	var optErrs []error
	if opts.Forwarded && opts.Authorize == nil {
		optErrs = append(optErrs, errors.New("Options.Forwarded is set without Options.Authorize: behind a proxy every client connects from the proxy's address, so loopback-only would admit everyone the proxy admits; authorize the operator yourself"))
	}
	hosts := map[string]bool{}
	for i, name := range opts.Hosts {
		n := hostName(name)
		if _, _, err := net.SplitHostPort(name); err == nil || n == "" || strings.ContainsAny(n, " /\\@") {
			optErrs = append(optErrs, fmt.Errorf("Options.Hosts[%d] = %q: give a host name or IP address without a port, such as ops.example.com", i, name))
			continue
		}
		hosts[n] = true
	}
	if len(optErrs) > 0 {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(optErrs...)))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("hedgectl: %w", errors.Join(errs...))
	}
	h := &Handler{hedgers: map[string]*hedge.Hedger{}, authorize: opts.Authorize, hosts: hosts, forwarded: opts.Forwarded, fleet: opts.Fleet}
	for _, n := range list {
		h.names = append(h.names, n.Name)
		h.hedgers[n.Name] = n.H
	}
	if h.authorize == nil {
		h.authorize = loopbackOnly
	}
	return h, nil
}

// loopbackOnly admits a request whose remote address is a loopback IP
// address with a port. net/http sets host:port from the connection; an
// address without one was set by middleware from a header the client
// chose, and says nothing of where the connection came from.
func loopbackOnly(r *http.Request) error {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return fmt.Errorf("%w: the remote address %q is not host:port, so middleware (such as chi's RealIP) set it from a request header; mount the endpoint outside that middleware", ErrNotLoopback, r.RemoteAddr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return ErrNotLoopback
}

// hostName returns the host of a Host header or an Options.Hosts entry
// in the form they are compared in: without port, brackets or trailing
// dot, in lower case.
func hostName(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// admit runs the checks of the package doc that come before Authorize.
func (h *Handler) admit(r *http.Request) error {
	if !h.forwarded {
		for i, k := range forwardingKeys {
			if _, ok := r.Header[k]; ok {
				return fmt.Errorf("%w (%s)", ErrForwarded, forwardingHeaders[i])
			}
		}
	}
	host := hostName(r.Host)
	if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback() || h.hosts[host]) {
		return fmt.Errorf("%w: %q (list the names operators use in Options.Hosts)", ErrHost, r.Host)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("%w (Sec-Fetch-Site: %s)", ErrCrossSite, site)
	}
	if origin, ok := r.Header["Origin"]; ok {
		u, err := url.Parse(origin[0])
		if len(origin) != 1 || err != nil || u.Scheme == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Errorf("%w (Origin: %q, not the endpoint's own)", ErrCrossSite, origin[0])
		}
	}
	return nil
}

// ServeHTTP serves the routes in the package doc.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := h.admit(r)
	if err == nil {
		err = h.authorize(r)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "hedgectl: use GET for the state; POST /mode or /rollout to change it", http.StatusMethodNotAllowed)
			return
		}
		h.writeState(w)
	case "/mode", "/rollout":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "hedgectl: "+path+" changes state: POST a JSON body to it", http.StatusMethodNotAllowed)
			return
		}
		h.change(w, r, path)
	default:
		http.Error(w, "hedgectl: no such route "+strconv.Quote(r.URL.Path)+": use /, /mode or /rollout", http.StatusNotFound)
	}
}

// change applies POST /mode or /rollout.
func (h *Handler) change(w http.ResponseWriter, r *http.Request, path string) {
	q, code, err := parseChange(r, path)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	targets := h.names
	if q.hedger != nil {
		name := *q.hedger
		if h.hedgers[name] == nil {
			http.Error(w, fmt.Sprintf("hedgectl: no Hedger named %q: use one of %s", name, strings.Join(h.names, ", ")), http.StatusNotFound)
			return
		}
		targets = []string{name}
	}
	var apply func(*hedge.Hedger) error
	switch path {
	case "/mode":
		var mv hedge.ModeVar
		if err := mv.UnmarshalText([]byte(q.mode)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := mv.Mode()
		apply = func(hd *hedge.Hedger) error { return hd.SetMode(m) }
	case "/rollout":
		f := q.fraction
		if f < 0 || f > 1 {
			http.Error(w, fmt.Sprintf("hedgectl: fraction %v: give a number in [0, 1], e.g. 0.05 to hedge 5%% of requests", f), http.StatusBadRequest)
			return
		}
		apply = func(hd *hedge.Hedger) error { return hd.SetRollout(f) }
	}
	for _, name := range targets {
		if err := apply(h.hedgers[name]); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	h.writeState(w)
}

// changeRequest is the body of a change.
type changeRequest struct {
	hedger   *string
	mode     string
	fraction float64
}

// parseChange reads a change's JSON body strictly: a query string, a
// content type other than JSON, a malformed body, a key given twice or
// not taken by the route, or one missing is an error rather than a
// silent default. It returns the status to answer an error with.
func parseChange(r *http.Request, path string) (changeRequest, int, error) {
	var q changeRequest
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return q, http.StatusUnsupportedMediaType, fmt.Errorf("%w (got Content-Type %q)", ErrNotJSON, r.Header.Get("Content-Type"))
	}
	if r.URL.RawQuery != "" {
		return q, http.StatusBadRequest, fmt.Errorf("hedgectl: %s takes its parameters in the JSON body, not in the query %q", path, r.URL.RawQuery)
	}
	want := map[string]string{"/mode": "mode", "/rollout": "fraction"}[path]
	example := map[string]string{"/mode": `{"mode":"off"}`, "/rollout": `{"fraction":0.05}`}[path]
	bad := func(format string, args ...any) (changeRequest, int, error) {
		return changeRequest{}, http.StatusBadRequest, fmt.Errorf("hedgectl: "+path+": "+format+"; send one JSON object such as "+example+`, optionally with "hedger":"name"`, args...)
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad("the body is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("malformed JSON: %v", err)
		}
		key := tok.(string) // an object's key is a string, or Token fails
		if seen[key] {
			return bad("%q is given twice: give it once", key)
		}
		seen[key] = true
		var v any
		switch key {
		case "hedger":
			q.hedger = new(string)
			v = q.hedger
		case want:
			if key == "mode" {
				v = &q.mode
			} else {
				v = &q.fraction
			}
		default:
			return bad("%q is no parameter of %s", key, path)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return bad("malformed JSON: %v", err)
		}
		if err := json.Unmarshal(raw, v); err != nil || string(raw) == "null" {
			return bad("%q is %s, want a %s", key, raw, map[bool]string{true: "number", false: "string"}[key == "fraction"])
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("data after the object")
	}
	if !seen[want] {
		return bad("%q is missing", want)
	}
	return q, 0, nil
}

// State is what GET / returns.
type State struct {
	Hedgers []HedgerState `json:"hedgers"`
	// Fleet is the policy document the pod runs, when Options.Fleet is
	// set.
	Fleet *fleet.PodStatus `json:"fleet,omitempty"`
}

// HedgerState is one Hedger's configuration and stats.
type HedgerState struct {
	Name         string   `json:"name"`
	Mode         string   `json:"mode"`
	Rollout      float64  `json:"rollout"`
	Policy       string   `json:"policy"`
	MaxAttempts  int      `json:"max_attempts"`
	Replicas     int      `json:"replicas"`
	Budget       string   `json:"budget"`
	BudgetTokens *float64 `json:"budget_tokens,omitempty"` // absent when unlimited
	// Live is what a fleet policy set over the Config
	// (hedge.Hedger.SetLive); absent when nothing is. Its mode applies
	// over Mode: a request runs in the more cautious of the two.
	Live *LiveState `json:"live,omitempty"`
	Ops  []OpState  `json:"ops"`
}

// OpState is one operation class's stats. Times are in seconds; a delay of
// hedge.Never is null.
type OpState struct {
	Op          string  `json:"op"`
	Requests    int64   `json:"requests"`
	Hedges      int64   `json:"hedges"`
	HedgeRate   float64 `json:"hedge_rate"`
	HedgeWins   int64   `json:"hedge_wins"`
	WinRate     float64 `json:"win_rate"`
	PrimaryWins int64   `json:"primary_wins"`
	Failures    int64   `json:"failures"`
	// Refused counts the hedges not sent, by the name of the
	// hedge.Refusal that kept each (its String: budget, in_flight, busy,
	// payoff, fan_out, head, rate, deadline, replicas), the values of the
	// metrics' reason label. Every counted refusal is present, zero or
	// not.
	Refused         map[string]int64 `json:"refused"`
	LoadByReport    int64            `json:"load_by_report"`
	LoadByOwnView   int64            `json:"load_by_own_view"`
	ShadowHedges    int64            `json:"shadow_hedges"`
	Unhedgeable     int64            `json:"unhedgeable"`
	WastedSeconds   float64          `json:"wasted_seconds"`
	DelaySeconds    *float64         `json:"delay_seconds"`
	LatencyP99      float64          `json:"latency_p99_seconds"`
	PrimaryP99      float64          `json:"primary_p99_seconds"`
	PrimaryCensored int64            `json:"primary_censored"`
	HedgePathP99    float64          `json:"hedge_path_p99_seconds"`
	HoldoutCount    int64            `json:"holdout_count"`
	HoldoutP99      float64          `json:"holdout_p99_seconds"`
	Rescued         int64            `json:"rescued"`
	SavedAtLeast    float64          `json:"saved_at_least_seconds"`
}

// Snapshot returns the state GET / serves.
func (h *Handler) Snapshot() State {
	var s State
	for _, name := range h.names {
		hd := h.hedgers[name]
		hs := HedgerState{
			Name: name, Mode: hd.Mode().String(), Rollout: hd.Rollout(), Policy: hd.String(),
			MaxAttempts: hd.MaxAttempts(), Replicas: hd.Replicas(), Budget: hd.Budget().String(),
		}
		if b := hd.Budget(); b != nil {
			t := b.Tokens()
			hs.BudgetTokens = &t
		}
		hs.Live = liveState(hd.Live())
		for _, st := range hd.Stats() {
			op := OpState{
				Op: st.Op, Requests: st.Requests, Hedges: st.Hedges, HedgeRate: share(st.Hedges, st.Requests),
				HedgeWins: st.HedgeWins, WinRate: share(st.HedgeWins, st.Hedges), PrimaryWins: st.PrimaryWins, Failures: st.Failures,
				Refused: refused(st.Refused), LoadByReport: st.LoadByReport, LoadByOwnView: st.LoadByOwnView, ShadowHedges: st.ShadowHedges, Unhedgeable: st.Unhedgeable,
				WastedSeconds: st.WastedWork.Seconds(), LatencyP99: st.Latency.P99.Seconds(),
				PrimaryP99: st.Primary.P99.Seconds(), PrimaryCensored: st.PrimaryCensored, HedgePathP99: st.HedgePath.P99.Seconds(),
				HoldoutCount: st.Holdout.Count, HoldoutP99: st.Holdout.P99.Seconds(), Rescued: st.Rescued, SavedAtLeast: st.SavedAtLeast.Seconds(),
			}
			if st.Delay != hedge.Never {
				d := time.Duration(st.Delay).Seconds()
				op.DelaySeconds = &d
			}
			hs.Ops = append(hs.Ops, op)
		}
		s.Hedgers = append(s.Hedgers, hs)
	}
	if h.fleet != nil {
		st := h.fleet.Status()
		s.Fleet = &st
	}
	return s
}

// share returns a/b, or 0 when b is 0.
func share(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// refused returns r by the names of its refusals.
func refused(r hedge.Refusals) map[string]int64 {
	m := make(map[string]int64, len(r))
	for why, n := range r.All() {
		m[why.String()] = n
	}
	return m
}

func (h *Handler) writeState(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.Snapshot())
}
