package quantile

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exact returns the nearest-rank quantile q of vs (which it sorts): the
// value of 1-based rank ceil(q*n), clamped to [1, n]. It is the test's own
// oracle and deliberately does not call the package's rank.
func exact(vs []int64, q float64) int64 {
	slices.Sort(vs)
	n := len(vs)
	r := int(math.Ceil(q * float64(n)))
	r = min(max(r, 1), n)
	return vs[r-1]
}

func relErr(got, want int64) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got-want)) / float64(want)
}

// lognormal returns latencies in nanoseconds around a 1 ms median with a
// heavy tail (sigma 1.2), the shape of real service latencies.
func lognormal(r *rand.Rand) int64 {
	return int64(math.Exp(math.Log(1e6) + 1.2*r.NormFloat64()))
}

// TestWindowMatchesExactPercentile streams a million lognormal latencies and
// checks, at regular checkpoints, that both the tracked quantile and other
// quantiles stay within RelativeError of the exact nearest-rank quantile of
// the same window.
func TestWindowMatchesExactPercentile(t *testing.T) {
	for _, size := range []int{1, 7, 100, 2000, 10000} {
		for _, q := range []float64{0.5, 0.95, 0.99, 0.999} {
			// The headline case (p95 and p99 over 2,000 values) sees the full
			// million; the others a tenth of it, to keep the suite quick.
			n := 100_000
			if size == 2000 && (q == 0.95 || q == 0.99) && !testing.Short() {
				n = 1_000_000
			}
			stride := max(997, size+1)
			r := rand.New(rand.NewPCG(uint64(size), math.Float64bits(q)))
			w, err := NewWindow(size, q)
			if err != nil {
				t.Fatal(err)
			}
			ring := make([]int64, 0, size)
			next := 0
			scratch := make([]int64, size)
			worst := 0.0
			checks := 0
			for i := range n {
				v := lognormal(r)
				w.Add(v)
				// The incremental pointer must agree with a full scan after every value.
				if tr, sc := w.Tracked(), w.Quantile(q); tr != sc {
					t.Fatalf("size %d q %v after %d values: Tracked %d but a scan gives %d", size, q, i+1, tr, sc)
				}
				if len(ring) < size {
					ring = append(ring, v)
				} else {
					ring[next] = v
					next = (next + 1) % size
				}
				// Check often while filling, then at a stride coprime with the sizes.
				if (i < 3*size && size <= 100) || i%stride == 0 {
					checks++
					scratch = append(scratch[:0], ring...)
					want := exact(scratch, q)
					for _, got := range []int64{w.Tracked(), w.Quantile(q)} {
						e := relErr(got, want)
						worst = max(worst, e)
						if e > RelativeError {
							t.Fatalf("size %d q %v after %d values: got %d, exact %d (error %.4f%% > %.4f%%)",
								size, q, i+1, got, want, 100*e, 100*RelativeError)
						}
					}
				}
			}
			if w.Len() != min(n, size) {
				t.Fatalf("Len = %d, want %d", w.Len(), min(n, size))
			}
			t.Logf("size %5d q %.3f: %d checks, worst relative error %.4f%%, %d bytes", size, q, checks, 100*worst, w.Bytes())
		}
	}
}

// TestNearestRank pins the rank rule on windows where it matters: ceil(q*n)
// and floor(q*n) pick different values whenever q*n is not a whole number
// (n = 10 and q = 0.95: the 10th value, not the 9th; n = 3 and q = 0.5: the
// 2nd, not the 1st). The values are distinct and below 64, where buckets
// are one wide, so every answer must be exact. Each window first holds n
// zeros, which the n values then evict.
func TestNearestRank(t *testing.T) {
	for _, tc := range []struct {
		n    int
		q    float64
		want int64 // the value of rank ceil(q*n) among 1..n, which is that rank
	}{
		{10, 0.95, 10}, // 9.5: floor would give 9
		{3, 0.5, 2},    // 1.5: floor would give 1
		{7, 0.5, 4},    // 3.5
		{20, 0.99, 20}, // 19.8
		{40, 0.9, 36},  // 36 exactly: ceil and floor agree
		{4, 0.1, 1},    // 0.4: the rank is clamped up to 1
		{1, 0.999, 1},
	} {
		if got := exact(seq(tc.n), tc.q); got != tc.want {
			t.Fatalf("the test's oracle gives %d for n=%d q=%v, want %d", got, tc.n, tc.q, tc.want)
		}
		w, err := NewWindow(tc.n, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		for range tc.n {
			w.Add(0)
		}
		vals := seq(tc.n)
		rand.New(rand.NewPCG(uint64(tc.n), 1)).Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
		var h Histogram
		for _, v := range vals {
			w.Add(v)
			h.Record(v)
		}
		if got := w.Tracked(); got != tc.want {
			t.Errorf("n=%d q=%v: Tracked = %d, want %d", tc.n, tc.q, got, tc.want)
		}
		if got := w.Quantile(tc.q); got != tc.want {
			t.Errorf("n=%d q=%v: Quantile = %d, want %d", tc.n, tc.q, got, tc.want)
		}
		s := h.Snapshot()
		if got := s.Quantile(tc.q); got != tc.want {
			t.Errorf("n=%d q=%v: Histogram quantile = %d, want %d", tc.n, tc.q, got, tc.want)
		}
	}
}

// seq returns 1, 2, ..., n.
func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

func TestWindowEdgeValues(t *testing.T) {
	w, err := NewWindow(4, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Tracked(); got != 0 {
		t.Fatalf("empty window Tracked = %d, want 0", got)
	}
	for _, v := range []int64{-5, 0, 3, 63} {
		w.Add(v)
	}
	// Values below 64 are exact; -5 counts as 0. Sorted: 0 0 3 63; rank 2 -> 0.
	if got := w.Tracked(); got != 0 {
		t.Fatalf("Tracked = %d, want 0", got)
	}
	if got := w.Quantile(1); got != 63 {
		t.Fatalf("Quantile(1) = %d, want 63", got)
	}
	w.Add(math.MaxInt64) // evicts -5; clamps to the last bucket
	if got := w.Quantile(1); relErr(got, MaxValue) > RelativeError {
		t.Fatalf("Quantile(1) after MaxInt64 = %d, want about %d", got, MaxValue)
	}
	w.Reset()
	if w.Len() != 0 || w.Tracked() != 0 {
		t.Fatalf("after Reset: Len %d Tracked %d", w.Len(), w.Tracked())
	}
}

func TestNewWindowRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		size int
		q    float64
	}{{0, 0.5}, {-1, 0.5}, {1 << 25, 0.5}, {10, 0}, {10, 1}, {10, math.NaN()}, {10, 95}} {
		if _, err := NewWindow(c.size, c.q); err == nil {
			t.Errorf("NewWindow(%d, %v) succeeded, want an error", c.size, c.q)
		}
	}
}

// FuzzWindow feeds arbitrary values, including negative and huge ones, and
// checks the tracked quantile against the exact one.
func FuzzWindow(f *testing.F) {
	f.Add(uint8(5), uint8(50), []byte{1, 2, 3, 200, 0, 7})
	f.Add(uint8(1), uint8(99), []byte{255, 255, 255, 255, 255, 255, 255, 127})
	f.Fuzz(func(t *testing.T, size, pct uint8, data []byte) {
		if size == 0 || pct == 0 || pct >= 100 {
			return
		}
		q := float64(pct) / 100
		w, err := NewWindow(int(size), q)
		if err != nil {
			t.Fatal(err)
		}
		var vals []int64
		for len(data) >= 3 {
			// Three bytes make a value spread over many octaves.
			v := int64(data[0]) << (data[1] % 48)
			if data[2]&1 == 1 {
				v = -v
			}
			data = data[3:]
			w.Add(v)
			vals = append(vals, max(0, min(v, MaxValue)))
			if len(vals) > int(size) {
				vals = vals[1:]
			}
			want := exact(slices.Clone(vals), q)
			if got := w.Tracked(); relErr(got, want) > RelativeError {
				t.Fatalf("Tracked = %d, exact %d", got, want)
			}
		}
	})
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]int64, 200_000)
	var sum int64
	for i := range vals {
		vals[i] = lognormal(r)
		sum += vals[i]
		h.Record(vals[i])
	}
	s := h.Snapshot()
	if s.Count != int64(len(vals)) || s.Sum != sum {
		t.Fatalf("Count %d Sum %d, want %d %d", s.Count, s.Sum, len(vals), sum)
	}
	if s.Max != slices.Max(vals) {
		t.Fatalf("Max %d, want %d", s.Max, slices.Max(vals))
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		want := exact(vals, q)
		if got := s.Quantile(q); relErr(got, want) > RelativeError {
			t.Errorf("Quantile(%v) = %d, exact %d", q, got, want)
		}
	}
	var empty Histogram
	es := empty.Snapshot()
	if es.Quantile(0.5) != 0 || es.Mean() != 0 {
		t.Fatal("empty histogram should report zeros")
	}
}

func BenchmarkWindowAdd(b *testing.B) {
	w, _ := NewWindow(2000, 0.95)
	r := rand.New(rand.NewPCG(1, 1))
	vals := make([]int64, 4096)
	for i := range vals {
		vals[i] = lognormal(r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		w.Add(vals[i&4095])
	}
}

func BenchmarkWindowTracked(b *testing.B) {
	w, _ := NewWindow(2000, 0.95)
	r := rand.New(rand.NewPCG(1, 1))
	for range 2000 {
		w.Add(lognormal(r))
	}
	b.ReportAllocs()
	var s int64
	for b.Loop() {
		s += w.Tracked()
	}
	_ = s
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		v := int64(1e6)
		for pb.Next() {
			h.Record(v)
			v = v*33%7_000_000 + 1000
		}
	})
}

// TestRankIsExactForPercentages: for integer percentages the rank is
// ceil(p*n/100) computed in integers, although p/100*n rounds in floating
// point (0.07*100 is 7.000000000000001).
func TestRankIsExactForPercentages(t *testing.T) {
	for p := 1; p <= 100; p++ {
		for n := 1; n <= 2000; n++ {
			want := max((p*n+99)/100, 1)
			if got := Rank(float64(p)/100, n); got != want {
				t.Fatalf("Rank(%d%%, %d) = %d, want %d", p, n, got, want)
			}
		}
	}
}

// TestSnapshotAdd: the sum of two histograms' snapshots is the snapshot of
// one histogram that recorded both sets of values.
func TestSnapshotAdd(t *testing.T) {
	var a, b, both Histogram
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 50_000 {
		v := lognormal(r)
		if i%3 == 0 {
			v *= 40 // b's values are slower
			b.Record(v)
		} else {
			a.Record(v)
		}
		both.Record(v)
	}
	got, sb, want := a.Snapshot(), b.Snapshot(), both.Snapshot()
	got.Add(&sb)
	if got != want {
		t.Fatalf("a+b: Count %d Sum %d Max %d; one histogram: %d %d %d, or their buckets differ",
			got.Count, got.Sum, got.Max, want.Count, want.Sum, want.Max)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		if g, w := got.Quantile(q), want.Quantile(q); g != w {
			t.Errorf("q%v: a+b %d, one histogram %d", q, g, w)
		}
	}
}
