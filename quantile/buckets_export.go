package quantile

import (
	"math"
	"sort"
)

// Bucket is one non-empty bucket of a Histogram: Count values in
// [Lo, Hi). Bucket boundaries are those of the layout (see the package
// documentation): below 64 each bucket holds one value (Hi = Lo+1), and
// above it every power-of-two octave is cut into 64 equal buckets. The
// first bucket, [0, 1), also holds the negative values recorded (counted
// as 0), and the last one, whose Hi is MaxValue+1, also holds the values
// above MaxValue.
type Bucket struct {
	Lo, Hi int64
	Count  uint64
}

// Mid returns the value a quantile falling in the bucket reports: its
// midpoint rounded down, exact for the buckets of width 1. Every value the
// bucket holds (up to MaxValue) is within RelativeError of it.
func (b Bucket) Mid() int64 {
	return b.Lo + (b.Hi-b.Lo)/2
}

// Counts is a copy of a Histogram's bucket counts, for exporting them to
// a metrics system that keeps buckets of its own. Make one with
// Histogram.Counts.
type Counts struct {
	// Count is the number of values in Buckets, the sum of their counts
	// (so always consistent with them, even when the copy was taken
	// while values were being recorded).
	Count uint64
	// Sum is the sum of the values recorded, read when the copy was
	// taken. Under concurrent recording it may include a value that
	// Buckets does not, or the reverse; it is exact once recording stops.
	Sum int64
	// Buckets are the non-empty buckets, in increasing order.
	Buckets []Bucket
}

// bucketBounds returns the bounds [lo, hi) of bucket b.
func bucketBounds(b int) (lo, hi int64) {
	if b < subCount {
		return int64(b), int64(b) + 1
	}
	shift := (b - subCount) / subCount
	sub := (b - subCount) % subCount
	lo = int64(subCount+sub) << shift
	return lo, lo + int64(1)<<shift
}

// Counts copies the histogram's non-empty buckets, with their full 64-bit
// counts, into buf (reusing its storage, which may be nil) and returns
// them. It does not slow down Record: it is meant for an exporter at scrape
// time. It counts the non-empty buckets first, so that it allocates at most
// once, and exactly what they need (more only if buckets fill up while it
// runs): the allocations of a scrape do not grow with the data.
func (h *Histogram) Counts(buf []Bucket) Counts {
	n := 0
	for b := range h.counts {
		if h.counts[b].Load() != 0 {
			n++
		}
	}
	if cap(buf) < n {
		buf = make([]Bucket, 0, n)
	}
	c := Counts{Sum: h.sum.Load(), Buckets: buf[:0]}
	for b := range h.counts {
		n := h.counts[b].Load()
		if n == 0 {
			continue
		}
		lo, hi := bucketBounds(b)
		c.Buckets = append(c.Buckets, Bucket{Lo: lo, Hi: hi, Count: n})
		c.Count += n
	}
	return c
}

// exp2Bounds[j] is 2^((j-64)/64): the upper bounds of the buckets of
// Exp2Index within one octave [0.5, 1].
var exp2Bounds = func() [65]float64 {
	var b [65]float64
	for j := range b {
		b[j] = math.Exp2(float64(j-64) / 64)
	}
	b[0], b[64] = 0.5, 1
	return b
}()

// Exp2Index returns the index i of the base-2 exponential bucket, 64 per
// power of two, that holds x > 0: the i with 2^(i/64) < x <= 2^((i+1)/64).
// It is OpenTelemetry's exponential histogram index at scale 6, and one
// less than Prometheus's native histogram bucket key at schema 6; the
// exporters convert the Counts' buckets with it.
func Exp2Index(x float64) int {
	frac, exp := math.Frexp(x) // x = frac * 2^exp, frac in [0.5, 1)
	return (exp-1)*64 + sort.SearchFloat64s(exp2Bounds[:], frac) - 1
}
