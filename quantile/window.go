package quantile

import (
	"fmt"
	"math"
)

// Window keeps the last Size values and answers quantiles over them, with
// relative error at most RelativeError against the exact nearest-rank
// quantile of those same values.
//
// One quantile, fixed when the Window is made, is tracked incrementally:
// Add keeps a pointer to the bucket holding that rank up to date, so
// Tracked is O(1). Any other quantile can be read with Quantile, which scans
// the histogram (a few hundred nanoseconds).
//
// Memory is fixed at construction: 2 bytes per slot of the window plus a
// histogram of about 10 KB (see Bytes). A Window is not safe for concurrent
// use; callers that share one guard it with their own lock.
type Window struct {
	ring   []uint16 // bucket of each value in the window, oldest at next once full
	next   int
	n      int // values in the window, <= len(ring)
	counts [numBuckets]uint32
	groups [numGroups]uint32 // per-octave totals, to skip empty stretches

	q     float64
	idx   int // bucket holding the tracked rank
	below int // values in buckets below idx
}

// NewWindow returns a Window over the last size values that tracks the
// quantile q, a fraction in (0, 1) (0.95 for p95).
func NewWindow(size int, q float64) (*Window, error) {
	if size < 1 || size > 1<<24 {
		return nil, fmt.Errorf("quantile: window size %d out of range: use 1 to %d values", size, 1<<24)
	}
	if !(q > 0 && q < 1) {
		return nil, fmt.Errorf("quantile: quantile %v out of range: use a fraction in (0, 1), e.g. 0.95 for p95", q)
	}
	return &Window{ring: make([]uint16, size), q: q}, nil
}

// Size returns the capacity of the window.
func (w *Window) Size() int { return len(w.ring) }

// Len returns how many values the window holds now (at most Size).
func (w *Window) Len() int { return w.n }

// Bytes returns the memory the Window holds, in bytes.
func (w *Window) Bytes() int { return WindowBytes(len(w.ring)) }

// WindowBytes returns the memory a Window of the given size holds, in
// bytes, so that callers can bound it before making one.
func WindowBytes(size int) int {
	return 2*size + 4*numBuckets + 4*numGroups + 64
}

// Add records v, evicting the oldest value once the window is full.
// It does not allocate.
func (w *Window) Add(v int64) {
	b := bucketOf(v)
	if w.n == len(w.ring) {
		old := int(w.ring[w.next])
		w.counts[old]--
		w.groups[old/subCount]--
		if old < w.idx {
			w.below--
		}
	} else {
		w.n++
	}
	w.ring[w.next] = uint16(b)
	w.next++
	if w.next == len(w.ring) {
		w.next = 0
	}
	w.counts[b]++
	w.groups[b/subCount]++
	if b < w.idx {
		w.below++
	}
	w.settle()
}

// Rank returns the 1-based nearest rank of quantile q among n sorted
// values, ceil(q*n) clamped to [1, n] (robust to the rounding of q*n): the p-th percentile of n values is
// the Rank(p/100, n)-th smallest. It is the one definition of a quantile
// in this project (windows, histograms, the simulator, the bench and the
// drill). n must be positive.
func Rank(q float64, n int) int { return rank(q, n) }

// rank returns the 1-based nearest rank of quantile q among n values.
func rank(q float64, n int) int {
	// q*n rounds: 0.07*100 is 7.000000000000001 in floating point, whose
	// ceiling would skip a rank. A product within a relative 1e-12 above
	// an integer is taken as that integer.
	x := q * float64(n)
	r := int(math.Ceil(x - x*1e-12))
	if r < 1 {
		r = 1
	}
	if r > n {
		r = n
	}
	return r
}

// settle moves idx so that it is the smallest bucket whose cumulative count
// reaches the tracked rank. Each Add moves the rank by at most one value, so
// this walks over at most one non-empty bucket plus empty ones, which it
// skips an octave at a time.
func (w *Window) settle() {
	r := rank(w.q, w.n)
	// Move down while the rank lies strictly below idx.
	for w.below >= r {
		if w.idx%subCount == 0 && w.groups[w.idx/subCount-1] == 0 {
			w.idx -= subCount
			continue
		}
		w.idx--
		w.below -= int(w.counts[w.idx])
	}
	// Move up while the rank lies strictly above idx.
	for w.below+int(w.counts[w.idx]) < r {
		if w.idx%subCount == 0 && w.groups[w.idx/subCount] == 0 {
			w.idx += subCount
			continue
		}
		w.below += int(w.counts[w.idx])
		w.idx++
	}
}

// Tracked returns the tracked quantile of the values in the window, or 0
// when the window is empty.
func (w *Window) Tracked() int64 {
	if w.n == 0 {
		return 0
	}
	return bucketMid(w.idx)
}

// Quantile returns quantile q (a fraction in [0, 1]) of the values in the
// window, or 0 when it is empty.
func (w *Window) Quantile(q float64) int64 {
	if w.n == 0 {
		return 0
	}
	return quantileOf(w.counts[:], w.groups[:], w.n, q)
}

// Reset empties the window, keeping its size and tracked quantile.
func (w *Window) Reset() {
	*w = Window{ring: w.ring, q: w.q}
}

// quantileOf finds the nearest-rank quantile q of n values laid out in
// counts, using group totals to skip whole octaves.
func quantileOf(counts, groups []uint32, n int, q float64) int64 {
	r := rank(q, n)
	seen := 0
	for g, gc := range groups {
		if seen+int(gc) < r {
			seen += int(gc)
			continue
		}
		for b := g * subCount; b < (g+1)*subCount; b++ {
			seen += int(counts[b])
			if seen >= r {
				return bucketMid(b)
			}
		}
	}
	return bucketMid(numBuckets - 1)
}
