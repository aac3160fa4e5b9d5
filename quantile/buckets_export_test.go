package quantile

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBucketBoundsMatchLayout(t *testing.T) {
	for b := range numBuckets {
		lo, hi := bucketBounds(b)
		if bucketOf(lo) != b || bucketOf(hi-1) != b {
			t.Fatalf("bucket %d: bounds [%d, %d) map to buckets %d and %d", b, lo, hi, bucketOf(lo), bucketOf(hi-1))
		}
		if b+1 < numBuckets {
			if next, _ := bucketBounds(b + 1); next != hi {
				t.Fatalf("bucket %d ends at %d, bucket %d starts at %d", b, hi, b+1, next)
			}
		} else if hi != MaxValue+1 {
			t.Fatalf("last bucket ends at %d, want MaxValue+1", hi)
		}
		if got := (Bucket{Lo: lo, Hi: hi}).Mid(); got != bucketMid(b) {
			t.Fatalf("bucket %d: Mid %d, bucketMid %d", b, got, bucketMid(b))
		}
	}
}

func TestHistogramCounts(t *testing.T) {
	var h Histogram
	if c := h.Counts(nil); c.Count != 0 || c.Sum != 0 || len(c.Buckets) != 0 {
		t.Fatalf("empty histogram: %+v", c)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	values := []int64{-5, 0, 1, 63, 64, 65, 127, 128, 1_000_000, MaxValue, MaxValue + 10}
	for range 10_000 {
		values = append(values, int64(rng.ExpFloat64()*5e6))
	}
	var sum int64
	for _, v := range values {
		h.Record(v)
		sum += max(v, 0)
	}
	buf := make([]Bucket, 0, 4)
	c := h.Counts(buf)
	if c.Count != uint64(len(values)) || c.Sum != sum {
		t.Fatalf("Count %d Sum %d, want %d and %d", c.Count, c.Sum, len(values), sum)
	}
	var n uint64
	for i, b := range c.Buckets {
		if b.Count == 0 {
			t.Errorf("bucket %+v is empty", b)
		}
		if i > 0 && b.Lo < c.Buckets[i-1].Hi {
			t.Errorf("bucket %+v not after %+v", b, c.Buckets[i-1])
		}
		n += b.Count
	}
	if n != c.Count {
		t.Errorf("buckets hold %d values, Count %d", n, c.Count)
	}
	// Each value is in the bucket that holds it.
	want := map[int64]uint64{}
	for _, v := range values {
		lo, _ := bucketBounds(bucketOf(v))
		want[lo]++
	}
	for _, b := range c.Buckets {
		if want[b.Lo] != b.Count {
			t.Errorf("bucket [%d, %d): %d, want %d", b.Lo, b.Hi, b.Count, want[b.Lo])
		}
	}
	if first := c.Buckets[0]; first.Lo != 0 || first.Count != 2 {
		t.Errorf("first bucket %+v, want [0, 1) holding -5 and 0", first)
	}
	if last := c.Buckets[len(c.Buckets)-1]; last.Hi != MaxValue+1 || last.Count != 2 {
		t.Errorf("last bucket %+v, want one ending at MaxValue+1 holding 2", last)
	}
	// The quantiles a Snapshot reports are the midpoints of these buckets.
	s := h.Snapshot()
	for _, q := range []float64{0.5, 0.9, 0.99} {
		r := uint64(Rank(q, int(c.Count)))
		var seen uint64
		for _, b := range c.Buckets {
			if seen += b.Count; seen >= r {
				if got := s.Quantile(q); got != min(b.Mid(), s.Max) {
					t.Errorf("q%v: Snapshot %d, bucket midpoint %d", q, got, b.Mid())
				}
				break
			}
		}
	}
}

func BenchmarkHistogramCounts(b *testing.B) {
	var h Histogram
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		h.Record(int64(rng.ExpFloat64() * 5e6))
	}
	var buf []Bucket
	b.ReportAllocs()
	for b.Loop() {
		buf = h.Counts(buf).Buckets
	}
}

// TestExp2Index checks the exponential bucket index at the powers of two,
// which close their buckets, and just above and below each bound.
func TestExp2Index(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want int
	}{{1, -1}, {2, 63}, {0.5, -65}, {math.Nextafter(1, 2), 0}, {math.Exp2(1.0 / 64), 0}, {math.Nextafter(math.Exp2(1.0/64), 2), 1}, {1e-9, -1914}} {
		if got := Exp2Index(c.x); got != c.want {
			t.Errorf("Exp2Index(%v) = %d, want %d", c.x, got, c.want)
		}
	}
	for i := -2000; i < 2000; i += 7 {
		lo, hi := math.Exp2(float64(i)/64), math.Exp2(float64(i+1)/64)
		mid := (lo + hi) / 2
		if got := Exp2Index(mid); got != i {
			t.Fatalf("Exp2Index(%v), between 2^(%d/64) and 2^(%d/64): %d", mid, i, i+1, got)
		}
	}
}
