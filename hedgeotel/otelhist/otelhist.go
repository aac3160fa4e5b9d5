package otelhist

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/quantile"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

const (
	// MaxScale is the scale the buckets start from: 2^6 = 64 buckets per
	// power of two, as many as the Hedger's own.
	MaxScale = 6
	// MaxSize is the most buckets a data point carries; the scale is
	// lowered until the buckets in use fit.
	MaxSize = 160
	// Name is the name of the metric.
	Name = "hedge.latency.distribution"
	// ScopeName is the instrumentation scope of the metric.
	ScopeName = "github.com/tailcut/hedge/hedgeotel/otelhist"
)

// ErrInvalid is matched by every error NewProducer returns.
var ErrInvalid = errors.New("otelhist: invalid producer")

// Producer is a sdkmetric.Producer of the latency histograms of a fixed
// set of Hedgers. Make one with NewProducer and register it on a Reader
// with sdkmetric.WithProducer. It is safe for concurrent use.
type Producer struct {
	hedgers []hedgeset.Named
	start   time.Time
}

var _ sdkmetric.Producer = (*Producer)(nil)

// NewProducer returns a Producer for hedgers, keyed by the value of their
// "hedger" attribute. Each Hedger may appear once: the same Hedger under
// two names would count every call twice in any sum over hedgers.
func NewProducer(hedgers map[string]*hedge.Hedger) (*Producer, error) {
	list, errs := hedgeset.Sort(hedgers)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return &Producer{hedgers: list, start: time.Now()}, nil
}

// Produce reads every Hedger's histograms and returns them as one
// exponential histogram metric, with cumulative temporality.
func (p *Producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := time.Now()
	var points []metricdata.ExponentialHistogramDataPoint[float64]
	for _, n := range p.hedgers {
		hedger := attribute.String("hedger", n.Name)
		for _, hs := range n.H.Histograms() {
			op := attribute.String("op", hs.Op)
			for _, path := range [...]struct {
				label string
				c     quantile.Counts
			}{{hedgeotel.PathCaller, hs.Latency}, {hedgeotel.PathPrimary, hs.Primary}, {hedgeotel.PathHedge, hs.HedgePath}, {hedgeotel.PathHoldout, hs.Holdout}} {
				if path.c.Count == 0 {
					continue
				}
				dp := exponential(path.c)
				dp.Attributes = attribute.NewSet(hedger, op, attribute.String("path", path.label))
				dp.StartTime, dp.Time = p.start, now
				points = append(points, dp)
			}
		}
	}
	return []metricdata.ScopeMetrics{{
		Scope: instrumentation.Scope{Name: ScopeName},
		Metrics: []metricdata.Metrics{{
			Name: Name,
			Description: "Latency since the Hedger was made, from its log-linear buckets counted at their midpoints (each value within quantile.RelativeError, about 0.8%, of the bucket it is counted in). " +
				"path=caller: what callers saw; path=primary: the primary alone, censored (a primary cancelled because a hedge won is counted at its running time then); path=hedge: hedge copies from send to success; path=holdout: the rollout's control group, calls left unhedged at random.",
			Unit: "s",
			Data: metricdata.ExponentialHistogram[float64]{DataPoints: points, Temporality: metricdata.CumulativeTemporality},
		}},
	}}, nil
}

// index returns the index of the scale-6 bucket holding x > 0: the i with
// 2^(i/64) < x <= 2^((i+1)/64).
func index(x float64) int { return quantile.Exp2Index(x) }

// exponential converts a Hedger's bucket counts to an exponential
// histogram data point (without attributes and times).
func exponential(c quantile.Counts) metricdata.ExponentialHistogramDataPoint[float64] {
	dp := metricdata.ExponentialHistogramDataPoint[float64]{
		Count: c.Count,
		Sum:   time.Duration(c.Sum).Seconds(),
		Scale: MaxScale,
	}
	lo, hi := math.MaxInt, math.MinInt
	for _, b := range c.Buckets {
		if b.Mid() == 0 {
			continue
		}
		i := index(time.Duration(b.Mid()).Seconds())
		lo, hi = min(lo, i), max(hi, i)
	}
	shift := 0
	for lo <= hi && hi>>shift-lo>>shift+1 > MaxSize {
		shift++
	}
	dp.Scale -= int32(shift)
	if lo <= hi {
		dp.PositiveBucket.Offset = int32(lo >> shift)
		dp.PositiveBucket.Counts = make([]uint64, hi>>shift-lo>>shift+1)
	}
	for _, b := range c.Buckets {
		if b.Mid() == 0 {
			dp.ZeroCount += b.Count
			continue
		}
		i := index(time.Duration(b.Mid()).Seconds()) >> shift
		dp.PositiveBucket.Counts[i-lo>>shift] += b.Count
	}
	return dp
}
