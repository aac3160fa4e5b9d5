package bench

import (
	"math"
	"slices"
	"time"

	"github.com/tailcut/hedge/quantile"
)

// Quantile returns the nearest-rank q-quantile of sorted (ascending): the
// smallest value with at least a fraction q of the values at or below it,
// the value of rank quantile.Rank(q, n), the project's one definition.
// It returns 0 for an empty slice.
func Quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[quantile.Rank(q, len(sorted))-1]
}

// Point is one point of a CCDF: a fraction Y of the values are at or above
// X.
type Point struct {
	X time.Duration `json:"x_ns"`
	Y float64       `json:"y"`
}

// CCDF returns the complementary cumulative distribution of sorted
// (ascending) values, P(value >= x), as at most about maxPoints points
// spaced evenly in log(Y), from Y = 1 at the smallest value down to
// Y = 1/n at the largest: the shape of a log-log tail plot, which shows
// every decade of the tail with the same detail. Y never increases and X
// never decreases along the result. maxPoints below 2 means 2.
func CCDF(sorted []int64, maxPoints int) []Point {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	maxPoints = max(maxPoints, 2)
	// P(v >= sorted[i]) = (n-i)/n for the first i of each value.
	decades := math.Log10(float64(n))
	idx := make([]int, 0, maxPoints+1)
	for k := range maxPoints {
		// Y target from 1 down to 1/n, evenly in log.
		y := math.Pow(10, -decades*float64(k)/float64(maxPoints-1))
		i := n - int(math.Round(y*float64(n)))
		idx = append(idx, min(max(i, 0), n-1))
	}
	idx = append(idx, n-1)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	out := make([]Point, 0, len(idx))
	for _, i := range idx {
		// The first of a run of equal values carries P(v >= value).
		j, _ := slices.BinarySearch(sorted, sorted[i])
		p := Point{X: time.Duration(sorted[j]), Y: float64(n-j) / float64(n)}
		if len(out) > 0 && out[len(out)-1].X == p.X {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Spread is the median, minimum and maximum of one measure across repeats.
// OK is false when no repeat had the measure.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	OK     bool    `json:"ok"`
}

// spreadOf summarises vs, skipping NaN (a measure a run did not have).
func spreadOf(vs []float64) Spread {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return Spread{}
	}
	slices.Sort(xs)
	n := len(xs)
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return Spread{Median: med, Min: xs[0], Max: xs[n-1], OK: true}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func usI(ns int64) float64 { return float64(ns) / 1e3 }

// medianOf returns the median of f over xs, the upper one of the middle
// two for an even count: the value of one of the runs, not an average of
// two. xs must not be empty.
func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	return v[len(v)/2]
}
