package quantile

import (
	"math"
	"sync/atomic"
)

// Histogram counts values since it was made, for reporting. It is safe for
// concurrent use: Record is lock-free and allocation-free, and Snapshot may
// run at the same time as Record (a snapshot taken under concurrent
// recording may see a value in its bucket but not yet in the sum, or the
// reverse; each field is exact once recording stops). The count is the sum
// of the buckets', so that a value costs three atomic operations, not four.
//
// Its zero value is ready to use. It holds about 20 KB.
type Histogram struct {
	sum    atomic.Int64
	max    atomic.Int64
	counts [numBuckets]atomic.Uint64
}

// Record adds one value. Negative values count as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Snapshot copies the histogram's current state.
func (h *Histogram) Snapshot() Snapshot {
	var s Snapshot
	s.Max = h.max.Load()
	s.Sum = h.sum.Load()
	var n int64
	for b := range h.counts {
		c := h.counts[b].Load()
		s.counts[b] = uint32(min(c, math.MaxUint32))
		s.groups[b/subCount] += s.counts[b]
		n += int64(c)
	}
	s.Count = n
	return s
}

// Add adds the values of o to s, as if the histogram s was taken of had
// recorded them too: the quantiles of the sum are those of both sets of
// values, within RelativeError.
func (s *Snapshot) Add(o *Snapshot) {
	s.Count += o.Count
	s.Sum += o.Sum
	s.Max = max(s.Max, o.Max)
	for b := range s.counts {
		s.counts[b] = uint32(min(uint64(s.counts[b])+uint64(o.counts[b]), math.MaxUint32))
	}
	for g := range s.groups {
		s.groups[g] = uint32(min(uint64(s.groups[g])+uint64(o.groups[g]), math.MaxUint32))
	}
}

// Snapshot is a point-in-time copy of a Histogram.
type Snapshot struct {
	Count int64 // values recorded
	Sum   int64 // sum of the values recorded
	Max   int64 // largest value recorded, 0 if none

	counts [numBuckets]uint32
	groups [numGroups]uint32
}

// Mean returns the mean value, or 0 if none was recorded.
func (s *Snapshot) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Sum) / float64(s.Count)
}

// Quantile returns the nearest-rank quantile q (a fraction in [0, 1]) of the
// recorded values, within RelativeError, or 0 if none was recorded.
func (s *Snapshot) Quantile(q float64) int64 {
	if s.Count == 0 {
		return 0
	}
	n := 0
	for _, g := range s.groups {
		n += int(g)
	}
	if n == 0 {
		return 0
	}
	v := quantileOf(s.counts[:], s.groups[:], n, q)
	return min(v, s.Max)
}
