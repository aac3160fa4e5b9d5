package lab

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A malformed query is refused with a 400 that names the parameter, on
// every endpoint that reads one, instead of falling back to the defaults:
// url.URL.Query drops the parse error, so without the check "load=5;"
// would answer for load 0.5.
func TestMalformedQuery(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	many := strings.Repeat("seed=1&", 10_000) + "seed=1"
	for _, tc := range []struct{ path, param, reason string }{
		{"/api/explore?load=5;", "load", "';'"},
		{"/api/explore?" + small + "&load=0.5;", "load", "separate them with '&'"},
		{"/api/explore?load=%zz", "load", `invalid URL escape "%zz"`},
		{"/api/explore?%zz=1", "%zz", "not URL-encoded"},
		{"/api/explore?a;b", "a;b", "';'"},
		{"/api/explore?" + many, "", "10001 parameters"},
		{"/api/explore?" + strings.Repeat("x=1&", 64) + "x=1", "", "65 parameters"},
		{"/api/drill?delay=130;", "delay", "';'"},
		{"/api/drill?op=%zz", "op", "%25"},
		{"/api/study?x;", "x;", "';'"},
		{"/api/study?%zz", "%zz", "not URL-encoded"},
	} {
		code, _, b := get(t, ts, tc.path)
		var e ErrorResponse
		if err := json.Unmarshal(b, &e); err != nil {
			t.Errorf("%.60s: not JSON: %.200s", tc.path, b)
			continue
		}
		if code != http.StatusBadRequest || len(e.Params) != 1 || e.Params[0].Param != tc.param ||
			!strings.Contains(e.Params[0].Reason, tc.reason) || !strings.Contains(e.Error, tc.reason) {
			t.Errorf("%.60s: status %d, %.300s; want 400 naming %q with %q", tc.path, code, b, tc.param, tc.reason)
		}
	}
	// Every malformed parameter is named, not only the first.
	code, _, b := get(t, ts, "/api/explore?load=5;&world=%zz&runs=2")
	var e ErrorResponse
	json.Unmarshal(b, &e)
	if code != http.StatusBadRequest || len(e.Params) != 2 || e.Params[0].Param != "load" || e.Params[1].Param != "world" {
		t.Errorf("two malformed parameters: %d %s", code, b)
	}
	// A long name is clipped in the answer.
	code, _, b = get(t, ts, "/api/explore?"+strings.Repeat("k", 5000)+"=1")
	json.Unmarshal(b, &e)
	if code != http.StatusBadRequest || len(b) > 1000 || len(e.Params) != 1 || !strings.HasSuffix(e.Params[0].Param, "…") {
		t.Errorf("long name: %d, %d bytes: %.200s", code, len(b), b)
	}
	// An empty query, or empty pieces, are fine.
	for _, path := range []string{"/api/study?", "/api/study?&&", "/api/drill?&delay=130&"} {
		if code, _, b := get(t, ts, path); code != http.StatusOK {
			t.Errorf("%s: %d %.200s", path, code, b)
		}
	}
}

// A repeated parameter is refused, and the answer quotes its values.
func TestRepeatedParam(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, tc := range []struct{ path, param, reason string }{
		{"/api/explore?load=0.5&load=0.9", "load", `given 2 times ("0.5", "0.9"): give it once`},
		{"/api/explore?load=0.5&load=0.5", "load", "given 2 times"},
		{"/api/explore?seed=1&seed=2&seed=3&seed=4&seed=5", "seed", `("1", "2", "3", …)`},
		{"/api/drill?op=read&op=write", "op", "give it once"},
	} {
		code, _, b := get(t, ts, tc.path)
		var e ErrorResponse
		json.Unmarshal(b, &e)
		if code != http.StatusBadRequest || len(e.Params) != 1 || e.Params[0].Param != tc.param || !strings.Contains(e.Params[0].Reason, tc.reason) {
			t.Errorf("%s: %d %s; want 400 naming %q with %q", tc.path, code, b, tc.param, tc.reason)
		}
	}
}

// The explorer's delay is given in milliseconds, one mean service time
// each (sim.Unit): a number or a duration, as the page says.
func TestExploreDelayInMilliseconds(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    string
		want float64
	}{{"delay=2.5", 2.5}, {"delay=2.5ms", 2.5}, {"delay=500us", 0.5}, {"delay=50ms", 50}, {"delay=0", 0}, {"", 2}} {
		p, errs := s.parseExplore(c.q)
		if len(errs) > 0 || p.Delay != c.want {
			t.Errorf("%q: delay %v, errors %v; want %v", c.q, p.Delay, errs, c.want)
		}
	}
	for _, c := range []struct{ q, want string }{{"delay=51ms", "use 0 to 50ms"}, {"delay=2parsecs", "give milliseconds"}, {"delay=-1ms", "out of range"}} {
		_, errs := s.parseExplore(c.q)
		if len(errs) != 1 || errs[0].Param != "delay" || !strings.Contains(errs[0].Reason, c.want) {
			t.Errorf("%q: errors %v; want one for delay saying %q", c.q, errs, c.want)
		}
	}
}
