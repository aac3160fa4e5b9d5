package hedgeprom

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tailcut/hedge/quantile"
)

// NativeSchema is the schema of the native histograms the Collector
// exports: 2^6 = 64 exponential buckets per power of two, each bound
// 2^(1/64) (about 1.09%) above the one before, as many per octave as
// the Hedger's own log-linear buckets.
const NativeSchema = 6

// NativeZeroThreshold is the zero threshold of the native histograms: only
// latencies of exactly zero (a fake clock, a value cached in the attempt
// function) fall in their zero bucket. It is client_golang's default,
// prometheus.DefNativeHistogramZeroThreshold.
const NativeZeroThreshold = prometheus.DefNativeHistogramZeroThreshold

// DefaultBuckets returns the upper bounds, in seconds, of the classic
// buckets the latency histograms carry unless WithBuckets says otherwise:
// prometheus.DefBuckets (5 ms to 10 s) and 0.5, 1 and 2.5 ms below them,
// for backends that answer in under 5 ms. A new slice each call.
func DefaultBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// WithBuckets sets the upper bounds, in seconds, of the classic buckets of
// the latency histograms (hedge_latency_distribution_seconds); +Inf is
// implied. They must be finite, positive and increasing. With no bounds,
// the histograms are native only: a scraper without native histogram
// support then reads their _count, _sum and one +Inf bucket. The default
// is DefaultBuckets.
func WithBuckets(bounds ...float64) Option {
	return func(o *options) {
		o.buckets = slices.Clone(bounds)
		o.bucketsSet = true
	}
}

// validateBuckets reports what is wrong with classic bucket bounds.
func validateBuckets(bounds []float64) error {
	for i, b := range bounds {
		switch {
		case math.IsNaN(b) || math.IsInf(b, 0) || b <= 0:
			return fmt.Errorf("bucket bound %v is not a positive finite number of seconds (+Inf is implied)", b)
		case i > 0 && b <= bounds[i-1]:
			return fmt.Errorf("bucket bounds %v and %v are not increasing: list them in increasing order, once each", bounds[i-1], b)
		}
	}
	return nil
}

// nativeKey returns the index of the schema-6 native bucket holding x > 0:
// the i with 2^((i-1)/64) < x <= 2^(i/64).
func nativeKey(x float64) int { return quantile.Exp2Index(x) + 1 }

// seconds converts nanoseconds to seconds as time.Duration.Seconds does,
// so that a histogram's sum is exactly the summary's.
func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }

// latencyHistogram builds one latency histogram, native and classic, from
// a Hedger's bucket counts. Each log-linear bucket is counted whole, as if
// every value in it were its midpoint (quantile.Bucket.Mid, the value the
// Hedger's own quantiles report), in the native bucket and the classic
// buckets that midpoint falls in; see the package documentation for the
// error this makes.
//
// It makes a fixed number of allocations whatever the number of buckets
// in use (fewer for an empty histogram), so that a scrape allocates as
// much after a call as before it (see
// TestCollectorAddsNoAllocation): every slice is sized by a first pass,
// and the protobuf fields that are pointers point into a few arrays.
func latencyHistogram(desc *prometheus.Desc, c quantile.Counts, classic []float64, labels ...string) prometheus.Metric {
	// First pass: the native buckets and spans the counts fill.
	var zero uint64
	nBuckets, nSpans := 0, 0
	last := 0
	for _, b := range c.Buckets {
		mid := b.Mid()
		if mid == 0 {
			zero += b.Count
			continue
		}
		k := nativeKey(seconds(mid))
		switch {
		case nBuckets == 0:
			nBuckets, nSpans = 1, 1
		case k == last:
		case k == last+1:
			nBuckets++
		default:
			nBuckets++
			nSpans++
		}
		last = k
	}
	m := &latencyMetric{desc: desc, labels: prometheus.MakeLabelPairs(desc, labels)}
	h := &m.h
	sum := seconds(c.Sum)
	schema := int32(NativeSchema)
	threshold := NativeZeroThreshold
	count := c.Count
	h.SampleCount, h.SampleSum, h.Schema, h.ZeroThreshold, h.ZeroCount = &count, &sum, &schema, &threshold, &zero

	// Second pass: spans and deltas (each bucket's count minus the one
	// before it, as the exposition format wants).
	if nBuckets > 0 {
		spans := make([]dto.BucketSpan, nSpans)
		offsets := make([]int32, nSpans)
		lengths := make([]uint32, nSpans)
		h.PositiveSpan = make([]*dto.BucketSpan, nSpans)
		for i := range spans {
			spans[i].Offset, spans[i].Length = &offsets[i], &lengths[i]
			h.PositiveSpan[i] = &spans[i]
		}
		h.PositiveDelta = make([]int64, 0, nBuckets)
		var cur, prev int64 // count of the native bucket being filled, and of the one before
		span := -1
		for _, b := range c.Buckets {
			mid := b.Mid()
			if mid == 0 {
				continue
			}
			k := nativeKey(seconds(mid))
			switch {
			case span >= 0 && k == last:
				cur += int64(b.Count)
				continue
			case span >= 0:
				h.PositiveDelta = append(h.PositiveDelta, cur-prev)
				prev = cur
			}
			if span < 0 || k != last+1 {
				span++
				if span == 0 {
					offsets[span] = int32(k)
				} else {
					offsets[span] = int32(k - last - 1)
				}
			}
			lengths[span]++
			cur, last = int64(b.Count), k
		}
		h.PositiveDelta = append(h.PositiveDelta, cur-prev)
	}

	// Classic buckets: cumulative counts of the midpoints at or below
	// each bound.
	if len(classic) > 0 {
		buckets := make([]dto.Bucket, len(classic))
		counts := make([]uint64, len(classic))
		h.Bucket = make([]*dto.Bucket, len(classic))
		i := 0
		var n uint64
		for _, b := range c.Buckets {
			for i < len(classic) && seconds(b.Mid()) > classic[i] {
				counts[i] = n
				i++
			}
			n += b.Count
		}
		for ; i < len(classic); i++ {
			counts[i] = n
		}
		for i := range classic {
			buckets[i].UpperBound, buckets[i].CumulativeCount = &classic[i], &counts[i]
			h.Bucket[i] = &buckets[i]
		}
	}
	return m
}

// latencyMetric is a constant histogram with both native and classic
// buckets, so that one histogram serves scrapers with and without native
// histogram support, as client_golang's own histograms do when both kinds
// of buckets are configured. It carries no created timestamp: a Hedger
// does not say when it was made.
type latencyMetric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	h      dto.Histogram
}

// Desc returns the metric's descriptor.
func (m *latencyMetric) Desc() *prometheus.Desc { return m.desc }

// Write writes the histogram and its labels into out.
func (m *latencyMetric) Write(out *dto.Metric) error {
	out.Histogram = &m.h
	out.Label = m.labels
	return nil
}
