// Package quantile estimates latency percentiles in bounded memory.
//
// Two types share one bucket layout: Window answers quantiles over the last
// N values (the sliding window behind a live hedge delay), and Histogram
// counts everything since it was made, concurrently, for reporting.
// Histogram.Counts copies its non-empty buckets (bounds and counts), so
// that an exporter can re-bucket them into a metrics system's own
// histograms at scrape time, at no cost to Record.
//
// The layout is log-linear: 64 buckets per power of two, so a quantile read
// back is within RelativeError (1/128, about 0.8%) of the exact nearest-rank
// quantile of the same values, whatever their distribution, for values up
// to MaxValue (about 2.4 hours in nanoseconds). This is a guarantee of the
// layout, not an average over samples, and the tests check it against exact
// quantiles of a sorted copy.
//
// Values are int64 (the live engine records nanoseconds). Window tracks one
// quantile incrementally so that reading it is O(1) and recording a value
// costs tens of nanoseconds with no allocation; see BENCHMARKS.md.
//
// The package deliberately does not do time-decayed or mergeable sketches:
// a hedge delay wants "the p95 of the last N responses", exactly, and
// nothing more.
package quantile
