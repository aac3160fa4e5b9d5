package quantile

import "math/bits"

// The bucket layout is log-linear, in the manner of HDR histograms: values
// below 64 have one bucket each, and every power-of-two range above that
// ("octave") is cut into 64 equal buckets. A bucket [lo, lo+w) in octave e
// has w = 2^(e-6) and lo >= 64*w, so reporting its midpoint is off by at most
// w/2 / lo <= 1/128 (about 0.78%) from any value inside it.
const (
	subBits    = 6
	subCount   = 1 << subBits // buckets per octave
	maxOctave  = 42           // 2^43 ns is about 2.4 hours; larger values clamp
	numBuckets = subCount + (maxOctave-subBits+1)*subCount
	numGroups  = numBuckets / subCount

	// MaxValue is the largest value kept exactly in its bucket; larger
	// values are counted in the last bucket.
	MaxValue = int64(1)<<(maxOctave+1) - 1

	// RelativeError bounds |estimate-true|/true for any value in
	// [0, MaxValue] and so for any quantile read from a Window or a
	// Histogram.
	RelativeError = 1.0 / (2 * subCount)
)

// bucketOf maps a value to its bucket. Negative values count as 0.
func bucketOf(v int64) int {
	if v < subCount {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	if v > MaxValue {
		v = MaxValue
	}
	e := bits.Len64(uint64(v)) - 1 // e >= subBits
	shift := e - subBits
	sub := int(v>>shift) & (subCount - 1)
	return subCount + shift*subCount + sub
}

// bucketMid returns the representative value of bucket b: its midpoint,
// rounded down, which is exact for the buckets of width 1.
func bucketMid(b int) int64 {
	if b < subCount {
		return int64(b)
	}
	shift := (b - subCount) / subCount
	sub := (b - subCount) % subCount
	lo := int64(subCount+sub) << shift
	return lo + (int64(1)<<shift)/2
}
