package lab

import (
	"math"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tailcut/hedge/internal/advise"
	"github.com/tailcut/hedge/internal/drill"
	"github.com/tailcut/hedge/internal/sim"
)

// FuzzForm feeds raw query strings to the explorer's and the drill's
// parameter parsers. Whatever the input: nothing panics; the same input
// gives the same answer; a query that url.ParseQuery rejects, or that is
// too long, is refused; every error names a parameter of the query (or,
// for a query too long to read, none) and says what is wrong; and every
// accepted set of parameters is in its documented range, so that the
// simulator and the drill accept it too, the hedged side and its
// calibration included, and its leaves within the size limits. The seed
// corpus is in testdata/fuzz/FuzzForm.
func FuzzForm(f *testing.F) {
	s, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", small, "load=0.85&cancel=false&strategy=budget&budget=5", "strategy=default&calib=load", "delay=130ms&op=write-key",
		"width=40&need=38&fancall=false&runs=2", "width=100&runs=4&strategy=percentile&p=99.9", "width=3&need=4&requests=100000"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, errs := s.parseExplore(raw)
		if p2, errs2 := s.parseExplore(raw); !reflect.DeepEqual(p, p2) || !reflect.DeepEqual(errs, errs2) {
			t.Fatalf("%q parsed twice differs: %+v %v, then %+v %v", raw, p, errs, p2, errs2)
		}
		checkErrors(t, raw, errs)
		if len(errs) == 0 {
			checkExplore(t, s, raw, p)
		}
		d, errs := parseDrill(raw)
		checkErrors(t, raw, errs)
		if len(errs) == 0 {
			if err := d.Validate(); err != nil || d.Delay > drill.MaxDelay || d.Budget < 0 || d.Budget > 100 {
				t.Errorf("%q: drill accepted %+v: %v", raw, d, err)
			}
		}
	})
}

// FuzzAdviseUpload feeds queries and files to /api/advise's parsers.
// Whatever the input: nothing panics; a refused query names its
// parameters; a refused file gets a message; and an accepted sample holds
// no more latencies than the file has lines or, from a histogram, than
// MaxAdviseHistogram, whatever its counts, so that the analysis's work
// follows the upload's size. The seeds include histograms of 74 bytes that
// count 1e300 and 1e12 observations.
func FuzzAdviseUpload(f *testing.F) {
	seeds := [][2]string{
		{"", "x_bucket{le=\"0.01\"} 1e300\nx_bucket{le=\"0.1\"} 1e300\nx_bucket{le=\"+Inf\"} 1e300\n"},
		{"format=prom", "x_bucket{le=\"0.01\"} 9e11\nx_bucket{le=\"0.1\"} 1e12\nx_bucket{le=\"+Inf\"} 1e12\n"},
		{"format=prom-json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"0.1"},"value":[1,"5e12"]},{"metric":{"le":"+Inf"},"value":[1,"1e13"]}]}}`},
		{"unit=ms&load=0.5", strings.Repeat("12\n", 1200)},
		{"format=csv&field=2", "a,b\n" + strings.Repeat("x,3ms\n", 1100)},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, body string) {
		p, errs := parseAdvise(raw)
		for _, e := range errs {
			if e.Param == "" || e.Reason == "" {
				t.Fatalf("%q: error %+v names no parameter or gives no reason", raw, e)
			}
		}
		if len(errs) > 0 {
			return
		}
		s, err := parseUpload(p, []byte(body))
		switch {
		case err != nil && err.Error() == "":
			t.Fatalf("%q: refused without a message", body)
		case err != nil:
		case s.Binned && s.Len() > MaxAdviseHistogram:
			t.Fatalf("a histogram spread into %d latencies, more than %d", s.Len(), MaxAdviseHistogram)
		case !s.Binned && s.Len() > strings.Count(body, "\n")+1:
			t.Fatalf("%d latencies from %d lines", s.Len(), strings.Count(body, "\n")+1)
		case s.Len() < advise.MinSample:
			t.Fatalf("accepted %d latencies, fewer than advise takes", s.Len())
		}
	})
}

// checkErrors checks the errors of parsing raw: a malformed query is
// refused, and each error names one of its parameters and says why.
func checkErrors(t *testing.T, raw string, errs []ParamError) {
	t.Helper()
	if _, err := url.ParseQuery(raw); (err != nil || strings.Count(raw, "&") >= maxQueryParams) && len(errs) == 0 {
		t.Fatalf("%q: malformed query accepted (%v)", raw, err)
	}
	// The names the query holds, as given and decoded, clipped as the
	// errors clip them.
	names := map[string]bool{}
	for piece := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(piece, "=")
		names[clip(name)] = true
		if k, err := url.QueryUnescape(name); err == nil {
			names[clip(k)] = true
		}
	}
	known := []string{"world", "sigma", "load", "routing", "strategy", "delay", "p", "calib", "livep", "budget",
		"cancel", "tied", "clients", "help", "width", "need", "fancall", "runs", "requests", "seed", "hedge", "op"}
	for _, e := range errs {
		switch {
		case e.Reason == "":
			t.Errorf("%q: error for %q gives no reason", raw, e.Param)
		case e.Param == "" && strings.Contains(e.Reason, "parameters, more than the"):
			// The query as a whole: too long to read.
		case !names[e.Param] && !slices.Contains(known, e.Param):
			t.Errorf("%q: error names %q, which the query does not hold: %q", raw, e.Param, e.Reason)
		case len(e.Param) > maxEcho+len("…"):
			t.Errorf("%q: error name not clipped: %d bytes", raw, len(e.Param))
		}
	}
}

// checkExplore checks that accepted explorer parameters are in range.
func checkExplore(t *testing.T, s *Server, raw string, p ExploreParams) {
	t.Helper()
	in := func(x, lo, hi float64) bool { return x >= lo && x <= hi && !math.Signbit(x) }
	if !slices.Contains(exploreWorlds, p.World) || !slices.Contains(exploreRoutings, p.Routing) ||
		!slices.Contains(exploreStrategies, p.Strategy) || !slices.Contains(explorePcts, p.Percentile) ||
		!slices.Contains(exploreCalibs, p.Calibration) ||
		!in(p.Sigma, 0, maxSigma) || !in(p.Load, minLoad, maxLoad) || !in(p.Delay, 0, maxDelay) ||
		!in(p.LiveP, minLiveP, maxLiveP) || !in(p.Budget, minBudget, 100) ||
		p.Runs < 1 || p.Runs > maxRuns || p.Requests < minRequests || p.Requests > s.o.MaxRequests ||
		p.Width < 1 || p.Width > maxWidth || p.Need < 0 || p.Need > p.Width ||
		p.Requests*p.Width > s.o.MaxRequests || p.Runs*p.Requests*p.Width > s.o.MaxWork {
		t.Fatalf("%q: accepted out-of-range parameters %+v", raw, p)
	}
	if err := p.baseConfig().Validate(); err != nil {
		t.Fatalf("%q: accepted %+v, which the simulator refuses: %v", raw, p, err)
	}
	// The hedged side is one of the table's choices, as the query named
	// it, and the simulator accepts it and its calibration run.
	c, ch := p.config()
	if want := p.Strategy; ch.name != want && !(p.Tied && ch.name == "tied") {
		t.Fatalf("%q: strategy %q ran choice %q", raw, want, ch.name)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("%q: accepted %+v, whose hedged side (%v) the simulator refuses: %v", raw, p, c, err)
	}
	if ch.calibrated() {
		cc := p.baseConfig()
		cc.Strategy = ch.calibration()
		if err := sim.CalibrationConfig(cc).Validate(); err != nil {
			t.Fatalf("%q: accepted %+v, whose calibration the simulator refuses: %v", raw, p, err)
		}
	}
	if s.runWorkers(p.Requests*p.Width, p.Runs) < 1 {
		t.Fatalf("%q: accepted %+v, which needs more than the memory limit", raw, p)
	}
	_ = p.key()
}
