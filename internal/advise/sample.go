package advise

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tailcut/hedge/quantile"
)

// MinSample is the fewest latencies Advise accepts: below it the p99 rests
// on fewer than ten values and the p99.9 on none.
const MinSample = 1000

// MaxSample is the most latencies a parser keeps: a larger sample says
// nothing more about the tail that advise reports and only costs memory.
// Thin it first (every k-th line), or use a histogram.
const MaxSample = 5_000_000

// ErrEmpty is wrapped by the error of a parser that found no latency.
var ErrEmpty = errors.New("no latencies found")

// ErrTooSmall is wrapped by Sample.Check's error for a sample of fewer
// than MinSample latencies.
var ErrTooSmall = errors.New("sample too small")

// Sample is the recorded latencies of one operation, with what is known of
// each: the replica that served it and when it was sent, if the input said.
type Sample struct {
	// Latencies are the recorded latencies, in input order. None is
	// negative.
	Latencies []time.Duration
	// Replicas, if not nil, has one entry per latency: the replica (host,
	// address) that served it, "" where unknown.
	Replicas []string
	// Times, if not nil, has one entry per latency: when the request was
	// sent (the zero Time where unknown).
	Times []time.Time
	// Binned reports that the latencies were spread over histogram
	// buckets: a quantile is known only to within its bucket.
	Binned bool
	// Source says where the sample came from, for the report.
	Source string
	// Notes are facts about the input worth reporting with the advice,
	// such as latencies beyond a histogram's highest bucket.
	Notes []string
}

// Len returns the number of latencies.
func (s *Sample) Len() int { return len(s.Latencies) }

// Check reports why s cannot be advised on: fewer than MinSample
// latencies (wrapping ErrTooSmall), or latencies that are all zero.
func (s *Sample) Check() error {
	n := len(s.Latencies)
	switch {
	case n == 0:
		return fmt.Errorf("%w: the sample is empty: give at least %d latencies of one operation", ErrTooSmall, MinSample)
	case n < MinSample:
		return fmt.Errorf("%w: %d latencies: give at least %d (the p99 of fewer rests on under ten values); record for longer or probe with a higher --count", ErrTooSmall, n, MinSample)
	}
	if slices.Max(s.Latencies) <= 0 {
		return errors.New("every latency in the sample is 0: record latencies with a finer clock")
	}
	if s.Replicas != nil && len(s.Replicas) != n {
		return fmt.Errorf("the sample has %d replicas for %d latencies: give one per latency, or none", len(s.Replicas), n)
	}
	if s.Times != nil && len(s.Times) != n {
		return fmt.Errorf("the sample has %d times for %d latencies: give one per latency, or none", len(s.Times), n)
	}
	return nil
}

// sorted returns the latencies in nanoseconds, as float64, ascending.
func (s *Sample) sorted() []float64 {
	xs := make([]float64, len(s.Latencies))
	for i, d := range s.Latencies {
		xs[i] = float64(d)
	}
	slices.Sort(xs)
	return xs
}

// hasReplicas reports whether at least two distinct replicas are named.
func (s *Sample) hasReplicas() bool { return s.replicaCount() >= 2 }

// replicaCount returns the number of distinct replicas the sample names.
func (s *Sample) replicaCount() int {
	seen := map[string]bool{}
	for _, r := range s.Replicas {
		if r != "" {
			seen[r] = true
		}
	}
	return len(seen)
}

// hasTimes reports whether every latency has a send time.
func (s *Sample) hasTimes() bool {
	if s.Times == nil {
		return false
	}
	for _, t := range s.Times {
		if t.IsZero() {
			return false
		}
	}
	return true
}

// quantileOf returns the nearest-rank q-quantile of ascending xs (the
// project's definition, quantile.Rank).
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return xs[quantile.Rank(q, len(xs))-1]
}
