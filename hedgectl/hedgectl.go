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
//	GET  /                                   every Hedger: mode, rollout, policy, budget, per-operation stats
//	POST /mode?mode=off[&hedger=items]       switch one Hedger, or all of them
//	POST /rollout?fraction=0.05[&hedger=...] hedge 5% of requests for real, shadow the rest
//
// # Who may use it
//
// Changing the mode of a service's Hedgers is an operation on production,
// and the stats describe its traffic. Options.Authorize decides, for every
// request, reads included. Without it the Handler answers only requests
// whose remote address is a loopback address (127.0.0.0/8, ::1), which
// suits a port bound to localhost or a sidecar; behind a proxy, where the
// remote address is the proxy's, supply Authorize. Refused requests get 403
// and change nothing.
//
// Hedgers that share a hedge.ModeVar (hedgegrpc's per-method Hedgers, or
// any given the same Config.ModeVar) switch together: a change to one is a
// change to all.
package hedgectl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/hedgeset"
)

// Options configures a Handler.
type Options struct {
	// Authorize decides whether r may be served; a non-nil error refuses
	// it with 403 and the error's text. Nil means: loopback clients
	// only.
	Authorize func(r *http.Request) error
}

// ErrNotLoopback is the refusal of the default authorization for a
// client that is not on a loopback address.
var ErrNotLoopback = errors.New("hedgectl: only loopback clients may use this endpoint (set Options.Authorize to allow others)")

// Handler is the control endpoint. Make one with New.
type Handler struct {
	names     []string
	hedgers   map[string]*hedge.Hedger
	authorize func(*http.Request) error
}

// New returns a Handler for the named Hedgers. Names must be non-empty and
// the Hedgers non-nil and distinct; every mistake is reported at once.
func New(hedgers map[string]*hedge.Hedger, opts Options) (*Handler, error) {
	list, errs := hedgeset.Sort(hedgers)
	if len(errs) > 0 {
		return nil, fmt.Errorf("hedgectl: %w", errors.Join(errs...))
	}
	h := &Handler{hedgers: map[string]*hedge.Hedger{}, authorize: opts.Authorize}
	for _, n := range list {
		h.names = append(h.names, n.Name)
		h.hedgers[n.Name] = n.H
	}
	if h.authorize == nil {
		h.authorize = loopbackOnly
	}
	return h, nil
}

func loopbackOnly(r *http.Request) error {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return ErrNotLoopback
}

// ServeHTTP serves the routes in the package doc.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.authorize(r); err != nil {
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
			http.Error(w, "hedgectl: "+path+" changes state: use POST", http.StatusMethodNotAllowed)
			return
		}
		h.change(w, r, path)
	default:
		http.Error(w, "hedgectl: no such route "+strconv.Quote(r.URL.Path)+": use /, /mode or /rollout", http.StatusNotFound)
	}
}

// change applies POST /mode or /rollout.
func (h *Handler) change(w http.ResponseWriter, r *http.Request, path string) {
	q, err := parseQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	targets := h.names
	if name := q.Get("hedger"); name != "" {
		if h.hedgers[name] == nil {
			http.Error(w, fmt.Sprintf("hedgectl: no Hedger named %q: use one of %s", name, strings.Join(h.names, ", ")), http.StatusNotFound)
			return
		}
		targets = []string{name}
	}
	var apply func(*hedge.Hedger) error
	switch path {
	case "/mode":
		m, err := hedge.ParseMode(q.Get("mode"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		apply = func(hd *hedge.Hedger) error { return hd.SetMode(m) }
	case "/rollout":
		f, err := strconv.ParseFloat(q.Get("fraction"), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			http.Error(w, fmt.Sprintf("hedgectl: fraction=%q: give a number in [0, 1], e.g. 0.05 to hedge 5%% of requests", q.Get("fraction")), http.StatusBadRequest)
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

// parseQuery reads the query and a form body strictly: a malformed one, or
// a parameter given twice, is an error rather than a silent default.
func parseQuery(r *http.Request) (interface{ Get(string) string }, error) {
	if err := r.ParseForm(); err != nil {
		return nil, fmt.Errorf("hedgectl: malformed query or form: %w", err)
	}
	for k, v := range r.Form {
		if len(v) > 1 {
			return nil, fmt.Errorf("hedgectl: %s is given %d times: give it once", k, len(v))
		}
	}
	return r.Form, nil
}

// State is what GET / returns.
type State struct {
	Hedgers []HedgerState `json:"hedgers"`
}

// HedgerState is one Hedger's configuration and stats.
type HedgerState struct {
	Name         string    `json:"name"`
	Mode         string    `json:"mode"`
	Rollout      float64   `json:"rollout"`
	Policy       string    `json:"policy"`
	MaxAttempts  int       `json:"max_attempts"`
	Replicas     int       `json:"replicas"`
	Budget       string    `json:"budget"`
	BudgetTokens *float64  `json:"budget_tokens,omitempty"` // absent when unlimited
	Ops          []OpState `json:"ops"`
}

// OpState is one operation class's stats. Times are in seconds; a delay of
// hedge.Never is null.
type OpState struct {
	Op              string   `json:"op"`
	Requests        int64    `json:"requests"`
	Hedges          int64    `json:"hedges"`
	HedgeRate       float64  `json:"hedge_rate"`
	HedgeWins       int64    `json:"hedge_wins"`
	WinRate         float64  `json:"win_rate"`
	PrimaryWins     int64    `json:"primary_wins"`
	Failures        int64    `json:"failures"`
	BudgetDenied    int64    `json:"budget_denied"`
	InFlightDenied  int64    `json:"in_flight_denied"`
	BusyDenied      int64    `json:"busy_denied"`
	PayoffDenied    int64    `json:"payoff_denied"`
	DeadlineSkipped int64    `json:"deadline_skipped"`
	NoReplica       int64    `json:"no_replica"`
	ShadowHedges    int64    `json:"shadow_hedges"`
	Unhedgeable     int64    `json:"unhedgeable"`
	WastedSeconds   float64  `json:"wasted_seconds"`
	DelaySeconds    *float64 `json:"delay_seconds"`
	LatencyP99      float64  `json:"latency_p99_seconds"`
	PrimaryP99      float64  `json:"primary_p99_seconds"`
	PrimaryCensored int64    `json:"primary_censored"`
	HedgePathP99    float64  `json:"hedge_path_p99_seconds"`
	HoldoutCount    int64    `json:"holdout_count"`
	HoldoutP99      float64  `json:"holdout_p99_seconds"`
	Rescued         int64    `json:"rescued"`
	SavedAtLeast    float64  `json:"saved_at_least_seconds"`
}

// Snapshot returns the state GET / serves.
func (h *Handler) Snapshot() State {
	var s State
	for _, name := range h.names {
		hd := h.hedgers[name]
		hs := HedgerState{
			Name: name, Mode: hd.Mode().String(), Rollout: hd.Rollout(), Policy: hd.Policy().String(),
			MaxAttempts: hd.MaxAttempts(), Replicas: hd.Replicas(), Budget: hd.Budget().String(),
		}
		if b := hd.Budget(); b != nil {
			t := b.Tokens()
			hs.BudgetTokens = &t
		}
		for _, st := range hd.Stats() {
			op := OpState{
				Op: st.Op, Requests: st.Requests, Hedges: st.Hedges, HedgeRate: st.HedgeRate(),
				HedgeWins: st.HedgeWins, WinRate: st.WinRate(), PrimaryWins: st.PrimaryWins, Failures: st.Failures,
				BudgetDenied: st.BudgetDenied, InFlightDenied: st.InFlightDenied, BusyDenied: st.BusyDenied, PayoffDenied: st.PayoffDenied, DeadlineSkipped: st.DeadlineSkipped,
				NoReplica: st.NoReplica, ShadowHedges: st.ShadowHedges, Unhedgeable: st.Unhedgeable,
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
	return s
}

func (h *Handler) writeState(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.Snapshot())
}
