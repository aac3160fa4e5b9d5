package bench

import (
	"fmt"
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

// Interval is a ratio's geometric mean over paired repeats with its 95%
// confidence interval: exp of the mean of the log ratios, plus or minus
// Student's t times their standard error. N is the number of pairs; with
// fewer than two, Lo and Hi equal Mean and say nothing.
type Interval struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"lo"`
	Hi   float64 `json:"hi"`
	N    int     `json:"n"`
}

// String formats the interval as "0.42 (0.31–0.57)", or the mean alone
// with fewer than two pairs, or "–" with none.
func (iv Interval) String() string {
	switch {
	case iv.N == 0:
		return "–"
	case iv.N == 1:
		return fmt.Sprintf("%.2f (one repeat)", iv.Mean)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", iv.Mean, iv.Lo, iv.Hi)
}

// PairedRatio is the ratio f(run)/f(baseline run of the same repeat)
// over runs, as an Interval. Runs that were aborted, that have no
// baseline run in their repeat, or whose values are not positive are
// left out. Logs make the interval symmetric for a ratio and its
// inverse: a configuration twice as fast and one twice as slow are
// equally far from 1.
func PairedRatio(runs, base []*RunResult, f func(*RunResult) float64) Interval {
	var logs []float64
	for _, r := range runs {
		if r.Aborted != "" {
			continue
		}
		for _, b := range base {
			if b.Repeat != r.Repeat || b.Aborted != "" {
				continue
			}
			if x, y := f(r), f(b); x > 0 && y > 0 {
				logs = append(logs, math.Log(x/y))
			}
			break
		}
	}
	n := len(logs)
	if n == 0 {
		return Interval{}
	}
	var sum float64
	for _, l := range logs {
		sum += l
	}
	mean := sum / float64(n)
	iv := Interval{Mean: math.Exp(mean), Lo: math.Exp(mean), Hi: math.Exp(mean), N: n}
	if n < 2 {
		return iv
	}
	var ss float64
	for _, l := range logs {
		ss += (l - mean) * (l - mean)
	}
	half := tQuantile975(n-1) * math.Sqrt(ss/float64(n-1)/float64(n))
	iv.Lo, iv.Hi = math.Exp(mean-half), math.Exp(mean+half)
	return iv
}

// t975 is the 0.975 quantile of Student's t with 1 to 30 degrees of
// freedom.
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tQuantile975 returns the 0.975 quantile of Student's t with df degrees
// of freedom (df >= 1), rounded up beyond 30.
func tQuantile975(df int) float64 {
	switch {
	case df <= len(t975):
		return t975[df-1]
	case df <= 60:
		return 2.042
	case df <= 120:
		return 2.000
	}
	return 1.980
}
