package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	v := make([]int64, 1000)
	for i := range v {
		v[i] = int64(i + 1)
	}
	for _, tc := range []struct {
		q    float64
		want int64
	}{{0.5, 500}, {0.9, 900}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := Quantile(v, tc.q); got != tc.want {
			t.Errorf("Quantile(1..1000, %v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("empty input")
	}
}

// The quantiles the runner reports are of rank ceil(k n / 1000) for
// per-mille k, computed in integers, for every n: the rounding of q*n in
// floating point never moves a rank.
func TestQuantileRankIsExact(t *testing.T) {
	v := make([]int64, 20000)
	for i := range v {
		v[i] = int64(i + 1)
	}
	for _, k := range []int{500, 900, 990, 999} {
		for n := 1; n <= len(v); n++ {
			want := int64((k*n + 999) / 1000)
			if got := Quantile(v[:n], float64(k)/1000); got != want {
				t.Fatalf("Quantile(1..%d, %v) = %d, want %d", n, float64(k)/1000, got, want)
			}
		}
	}
}

func TestCCDF(t *testing.T) {
	n := 10000
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(i + 1)
	}
	c := CCDF(v, 50)
	if len(c) < 10 || len(c) > 52 {
		t.Fatalf("%d points for 50 asked", len(c))
	}
	if c[0].Y != 1 || c[0].X != 1 {
		t.Errorf("first point %+v, want (1, 1)", c[0])
	}
	last := c[len(c)-1]
	if last.X != time.Duration(n) || last.Y != 1/float64(n) {
		t.Errorf("last point %+v, want (%d, 1/%d)", last, n, n)
	}
	for i := 1; i < len(c); i++ {
		if c[i].X <= c[i-1].X || c[i].Y >= c[i-1].Y {
			t.Fatalf("points %d, %d not monotone: %+v %+v", i-1, i, c[i-1], c[i])
		}
	}
	// Every point is exact: P(v >= x) for values 1..n is (n-x+1)/n.
	for _, p := range c {
		if want := float64(n-int(p.X)+1) / float64(n); math.Abs(p.Y-want) > 1e-12 {
			t.Errorf("P(v >= %d) = %v, want %v", p.X, p.Y, want)
		}
	}
	// The points cover every decade of the tail.
	for d := 1; d <= 4; d++ {
		found := false
		for _, p := range c {
			if p.Y <= math.Pow(10, -float64(d))*1.5 && p.Y >= math.Pow(10, -float64(d))/1.5 {
				found = true
			}
		}
		if !found {
			t.Errorf("no point near P = 1e-%d", d)
		}
	}
}

func TestCCDFTies(t *testing.T) {
	v := []int64{5, 5, 5, 5, 7, 7, 9, 9, 9, 9}
	c := CCDF(v, 100)
	want := []Point{{5, 1}, {7, 0.6}, {9, 0.4}}
	if len(c) != len(want) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	for i := range want {
		if c[i] != want[i] {
			t.Fatalf("got %+v, want %+v", c, want)
		}
	}
	if CCDF(nil, 10) != nil {
		t.Error("empty input")
	}
}

func TestSpread(t *testing.T) {
	s := spreadOf([]float64{3, math.NaN(), 1, 2})
	if !s.OK || s.Median != 2 || s.Min != 1 || s.Max != 3 {
		t.Errorf("%+v", s)
	}
	s = spreadOf([]float64{4, 1, 2, 3})
	if s.Median != 2.5 {
		t.Errorf("even count: median %v, want 2.5", s.Median)
	}
	if spreadOf([]float64{math.NaN()}).OK {
		t.Error("all NaN must not be OK")
	}
}

// The plot is well-formed XML with one line per series.
func TestCCDFSVG(t *testing.T) {
	v := []int64{1e3, 2e3, 5e4, 1e6}
	var buf bytes.Buffer
	err := WriteCCDFSVG(&buf, "a <title> & more", []Series{{"a", CCDF(v, 10)}, {"b", CCDF(v[:2], 10)}, {"empty", nil}})
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&buf)
	lines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 2 {
		t.Errorf("%d polylines, want 2", lines)
	}
}

// TestPairedRatio checks the paired ratio's mean and interval on runs
// whose ratios are known: equal ratios give a point, opposite ones an
// interval about 1, aborted runs and runs without a baseline are left
// out.
func TestPairedRatio(t *testing.T) {
	run := func(repeat int, p99 float64, aborted string) *RunResult {
		return &RunResult{Repeat: repeat, P99Us: p99, Aborted: aborted}
	}
	p99 := func(r *RunResult) float64 { return r.P99Us }
	base := []*RunResult{run(0, 100, ""), run(1, 200, ""), run(2, 100, "collapse"), run(3, 400, "")}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

	iv := PairedRatio([]*RunResult{run(0, 50, ""), run(1, 100, ""), run(2, 10, ""), run(4, 10, "")}, base, p99)
	if iv.N != 2 || !near(iv.Mean, 0.5) || !near(iv.Lo, 0.5) || !near(iv.Hi, 0.5) {
		t.Errorf("ratios 0.5 and 0.5 (repeat 2's baseline aborted, repeat 4 without one): %+v, want 0.5 (0.5–0.5) of 2 pairs", iv)
	}
	iv = PairedRatio([]*RunResult{run(0, 50, ""), run(1, 400, "")}, base, p99)
	// logs ±ln 2: mean 0, standard error ln 2, t(1) 12.706.
	if iv.N != 2 || !near(iv.Mean, 1) || !near(iv.Hi, math.Exp(12.706*math.Ln2)) || !near(iv.Lo*iv.Hi, 1) {
		t.Errorf("ratios 0.5 and 2: %+v, want 1 (exp(∓12.706 ln 2))", iv)
	}
	iv = PairedRatio([]*RunResult{run(3, 200, ""), run(1, 300, "x")}, base, p99)
	if iv.N != 1 || !near(iv.Mean, 0.5) || iv.String() != "0.50 (one repeat)" {
		t.Errorf("one pair: %+v %q", iv, iv)
	}
	if iv := PairedRatio(nil, base, p99); iv.N != 0 || iv.String() != "–" {
		t.Errorf("no pairs: %+v %q", iv, iv)
	}
}
