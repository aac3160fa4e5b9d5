package hedgectl_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgectl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustNew(t *testing.T, cfg hedge.Config) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// request is a request to the control endpoint as curl on the same host
// sends it: from remote, to Host 127.0.0.1:8080, and for a POST with body
// as JSON.
func request(method, target, body, remote string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.RemoteAddr = remote
	r.Host = "127.0.0.1:8080"
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// do serves r and decodes the state it answers with.
func do(t *testing.T, h http.Handler, r *http.Request) (*httptest.ResponseRecorder, hedgectl.State) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var s hedgectl.State
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
			t.Fatalf("%s %s: %v\n%s", r.Method, r.URL, err, w.Body)
		}
	}
	return w, s
}

// serve sends one request to the handler as if from remote: a POST's
// body is JSON.
func serve(t *testing.T, h http.Handler, method, target, body, remote string) (*httptest.ResponseRecorder, hedgectl.State) {
	t.Helper()
	return do(t, h, request(method, target, body, remote))
}

const local = "127.0.0.1:50000"

// TestStateMatchesStats: GET / reports each Hedger's configuration and its
// operation classes' counts exactly as Stats does.
func TestStateMatchesStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		items := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * time.Millisecond), Replicas: 3})
		users := mustNew(t, hedge.Config{NoBudget: true})
		for i := range 5 {
			hedge.Do(context.Background(), items, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
				if a.Index == 0 && i%2 == 0 {
					<-ctx.Done() // stuck: the hedge wins
					return 0, ctx.Err()
				}
				return 1, nil
			})
		}
		time.Sleep(time.Second) // the Hedger's timer goroutine lingers
		ctl, err := hedgectl.New(map[string]*hedge.Hedger{"items": items, "users": users}, hedgectl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		w, s := serve(t, ctl, http.MethodGet, "/", "", local)
		if w.Code != http.StatusOK || len(s.Hedgers) != 2 || s.Hedgers[0].Name != "items" || s.Hedgers[1].Name != "users" {
			t.Fatalf("GET / = %d, %+v", w.Code, s)
		}
		it := s.Hedgers[0]
		st := items.OpStats("get")
		if len(it.Ops) != 1 || it.Ops[0].Requests != 5 || it.Ops[0].Hedges != st.Hedges || it.Ops[0].HedgeWins != st.HedgeWins || st.HedgeWins != 3 {
			t.Fatalf("items: %+v; Stats: %v", it, st)
		}
		if it.Ops[0].DelaySeconds == nil || *it.Ops[0].DelaySeconds != 0.01 || it.Replicas != 3 || it.Mode != "on" || it.BudgetTokens == nil {
			t.Fatalf("items configuration: %+v", it)
		}
		if u := s.Hedgers[1]; u.Budget != "unlimited" || u.BudgetTokens != nil || !strings.Contains(u.Policy, "no budget") {
			t.Fatalf("users: %+v", u)
		}
	})
}

// TestChangeModeAndRollout: POST switches one Hedger or all of them, and
// answers with the new state; mistakes change nothing.
func TestChangeModeAndRollout(t *testing.T) {
	a, b := mustNew(t, hedge.Config{}), mustNew(t, hedge.Config{})
	ctl, err := hedgectl.New(map[string]*hedge.Hedger{"a": a, "b": b}, hedgectl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w, s := serve(t, ctl, http.MethodPost, "/mode", `{"mode":"shadow","hedger":"a"}`, local); w.Code != http.StatusOK || s.Hedgers[0].Mode != "shadow" || b.Mode() != hedge.On {
		t.Fatalf("POST /mode for a: %d %s; b in %v", w.Code, w.Body, b.Mode())
	}
	if w, _ := serve(t, ctl, http.MethodPost, "/mode", `{"mode":"off"}`, local); w.Code != http.StatusOK || a.Mode() != hedge.Off || b.Mode() != hedge.Off {
		t.Fatalf("POST /mode for all: %d; modes %v %v", w.Code, a.Mode(), b.Mode())
	}
	if w, _ := serve(t, ctl, http.MethodPost, "/rollout/", ` {"fraction": 0.05, "hedger": "b"} `, local); w.Code != http.StatusOK || b.Rollout() != 0.05 || a.Rollout() != 1 {
		t.Fatalf("POST /rollout: %d %s; rollouts %v %v", w.Code, w.Body, a.Rollout(), b.Rollout())
	}
	for _, tc := range []struct {
		method, target, body string
		code                 int
	}{
		{http.MethodPost, "/mode", `{"mode":"sideways"}`, http.StatusBadRequest},
		{http.MethodPost, "/mode", `{"mode":"on","mode":"off"}`, http.StatusBadRequest},
		{http.MethodPost, "/mode", `{"mode":"on"}{"mode":"off"}`, http.StatusBadRequest},
		{http.MethodPost, "/mode", `{"mode":"on","fraction":1}`, http.StatusBadRequest},
		{http.MethodPost, "/mode", `{"mode":0}`, http.StatusBadRequest},
		{http.MethodPost, "/mode", `["on"]`, http.StatusBadRequest},
		{http.MethodPost, "/mode", ``, http.StatusBadRequest},
		{http.MethodPost, "/mode", `{"mode":"on"`, http.StatusBadRequest},
		{http.MethodPost, "/mode?mode=on", `{"mode":"on"}`, http.StatusBadRequest},
		{http.MethodPost, "/mode", `{"mode":"on","hedger":"c"}`, http.StatusNotFound},
		{http.MethodPost, "/rollout", `{"fraction":2}`, http.StatusBadRequest},
		{http.MethodPost, "/rollout", `{"fraction":"0.5"}`, http.StatusBadRequest},
		{http.MethodPost, "/rollout", `{}`, http.StatusBadRequest},
		{http.MethodGet, "/mode", ``, http.StatusMethodNotAllowed},
		{http.MethodOptions, "/mode", ``, http.StatusMethodNotAllowed},
		{http.MethodPost, "/", `{}`, http.StatusMethodNotAllowed},
		{http.MethodGet, "/elsewhere", ``, http.StatusNotFound},
	} {
		if w, _ := serve(t, ctl, tc.method, tc.target, tc.body, local); w.Code != tc.code || !strings.Contains(w.Body.String(), "hedge") {
			t.Errorf("%s %s %s = %d %q, want %d with a message", tc.method, tc.target, tc.body, w.Code, w.Body, tc.code)
		}
	}
	if a.Mode() != hedge.Off || b.Mode() != hedge.Off || b.Rollout() != 0.05 {
		t.Fatalf("a refused request changed something: %v %v %v", a.Mode(), b.Mode(), b.Rollout())
	}
}

// TestAuthorization: without Options.Authorize only loopback clients are
// served; with it, its verdict decides, for reads too.
func TestAuthorization(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	ctl, _ := hedgectl.New(map[string]*hedge.Hedger{"a": h}, hedgectl.Options{})
	for _, remote := range []string{"192.0.2.7:4000", "[2001:db8::1]:4000", "garbage"} {
		if w, _ := serve(t, ctl, http.MethodPost, "/mode", `{"mode":"off"}`, remote); w.Code != http.StatusForbidden {
			t.Errorf("from %s: %d, want 403", remote, w.Code)
		}
	}
	if w, _ := serve(t, ctl, http.MethodGet, "/", "", "[::1]:4000"); w.Code != http.StatusOK {
		t.Errorf("from ::1: %d, want 200", w.Code)
	}
	if h.Mode() != hedge.On {
		t.Fatal("a refused client switched the mode")
	}
	errNoToken := errors.New("hedgectl test: no token")
	ctl, _ = hedgectl.New(map[string]*hedge.Hedger{"a": h}, hedgectl.Options{Authorize: func(r *http.Request) error {
		if r.Header.Get("Authorization") != "Bearer ops" {
			return errNoToken
		}
		return nil
	}, Hosts: []string{"Ops.Example"}})
	if w, _ := serve(t, ctl, http.MethodGet, "/", "", local); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "no token") {
		t.Errorf("without the token, even from loopback: %d %q", w.Code, w.Body)
	}
	r := request(http.MethodPost, "/mode", `{"mode":"shadow"}`, "192.0.2.7:4000")
	r.Host = "ops.example:443"
	r.Header.Set("Authorization", "Bearer ops")
	if w, _ := do(t, ctl, r); w.Code != http.StatusOK || h.Mode() != hedge.Shadow {
		t.Errorf("with the token from afar: %d %q, mode %v", w.Code, w.Body, h.Mode())
	}
}

func TestNewReportsEveryMistake(t *testing.T) {
	_, err := hedgectl.New(map[string]*hedge.Hedger{"": mustNew(t, hedge.Config{}), "x": nil}, hedgectl.Options{})
	if err == nil || !strings.Contains(err.Error(), "empty name") || !strings.Contains(err.Error(), `"x" is nil`) {
		t.Fatalf("New = %v, want both mistakes", err)
	}
	if _, err := hedgectl.New(nil, hedgectl.Options{}); err == nil {
		t.Fatal("New(nil) accepted")
	}
}
