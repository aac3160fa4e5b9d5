package otelhist_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel/otelhist"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// drive runs calls whose latencies, exact on synctest's fake clock, are
// lat, through h.
func drive(h *hedge.Hedger, op string, lat []time.Duration) {
	for _, d := range lat {
		hedge.Do(context.Background(), h, op, func(context.Context, hedge.Attempt) (int, error) {
			time.Sleep(d)
			return 0, nil
		})
	}
}

// collect returns the points of the metric name that reader collects.
func collect(t *testing.T, reader sdkmetric.Reader, name string) []metricdata.ExponentialHistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			d, ok := m.Data.(metricdata.ExponentialHistogram[float64])
			if !ok {
				t.Fatalf("%s: %T, want an exponential histogram", name, m.Data)
			}
			if d.Temporality != metricdata.CumulativeTemporality || m.Unit != "s" {
				t.Errorf("%s: temporality %v, unit %q", name, d.Temporality, m.Unit)
			}
			return d.DataPoints
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// TestProducerMatchesSDKAggregation drives a Hedger through latencies
// from 0 to a minute, reads them through a Producer registered on a
// reader, and checks each point against the SDK's own exponential
// histogram aggregation (MaxScale 6, MaxSize 160) fed, on a synchronous
// instrument, with each of the Hedger's buckets at its midpoint: the
// conversion the package documents, checked against an independent
// implementation, the downscaling included.
func TestProducerMatchesSDKAggregation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(hedge.Never)})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 5))
		wide := []time.Duration{0, 0, 1, 63, 64, time.Millisecond, time.Second, time.Minute}
		for range 1000 {
			wide = append(wide, time.Duration(math.Exp(rng.Float64()*24))) // 1 ns to 26 s
		}
		var narrow []time.Duration // fits in 160 buckets at scale 6
		for range 500 {
			narrow = append(narrow, time.Duration((1+rng.Float64())*float64(time.Millisecond)))
		}
		drive(h, "wide", wide)
		drive(h, "narrow", narrow)

		p, err := otelhist.NewProducer(map[string]*hedge.Hedger{"x": h})
		if err != nil {
			t.Fatal(err)
		}
		reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
		ref := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithReader(ref),
			sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "ref"}, sdkmetric.Stream{
				Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: otelhist.MaxSize, MaxScale: otelhist.MaxScale, NoMinMax: true},
			})))
		defer mp.Shutdown(context.Background())
		hist, err := mp.Meter("test").Float64Histogram("ref", metric.WithUnit("s"))
		if err != nil {
			t.Fatal(err)
		}
		for _, hs := range h.Histograms() {
			for _, b := range hs.Latency.Buckets {
				for range b.Count {
					hist.Record(context.Background(), time.Duration(b.Mid()).Seconds(), metric.WithAttributes(attribute.String("op", hs.Op)))
				}
			}
		}

		got := collect(t, reader, otelhist.Name)
		want := collect(t, ref, "ref")
		byOp := map[string]metricdata.ExponentialHistogramDataPoint[float64]{}
		for _, dp := range want {
			op, _ := dp.Attributes.Value("op")
			byOp[op.AsString()] = dp
		}
		n := 0
		for _, dp := range got {
			op, _ := dp.Attributes.Value("op")
			path, _ := dp.Attributes.Value("path")
			hg, _ := dp.Attributes.Value("hedger")
			if hg.AsString() != "x" {
				t.Errorf("point with hedger %q", hg.AsString())
			}
			if path.AsString() != "caller" {
				continue
			}
			n++
			w := byOp[op.AsString()]
			st := h.OpStats(op.AsString()).Latency
			if dp.Count != uint64(st.Count) || dp.Sum != st.Sum.Seconds() {
				t.Errorf("%s: count %d sum %v, want %d and %v (Stats)", op.AsString(), dp.Count, dp.Sum, st.Count, st.Sum.Seconds())
			}
			if dp.Count != w.Count || dp.Scale != w.Scale || dp.ZeroCount != w.ZeroCount ||
				dp.PositiveBucket.Offset != w.PositiveBucket.Offset || !slices.Equal(dp.PositiveBucket.Counts, w.PositiveBucket.Counts) {
				t.Errorf("%s: count %d scale %d zero %d offset %d, %d buckets; the SDK's: %d, %d, %d, %d, %d buckets",
					op.AsString(), dp.Count, dp.Scale, dp.ZeroCount, dp.PositiveBucket.Offset, len(dp.PositiveBucket.Counts),
					w.Count, w.Scale, w.ZeroCount, w.PositiveBucket.Offset, len(w.PositiveBucket.Counts))
			}
			switch op.AsString() {
			case "narrow":
				if dp.Scale != otelhist.MaxScale {
					t.Errorf("narrow: scale %d, want %d", dp.Scale, otelhist.MaxScale)
				}
			case "wide":
				if dp.Scale >= otelhist.MaxScale || dp.ZeroCount != 2 || len(dp.PositiveBucket.Counts) > otelhist.MaxSize {
					t.Errorf("wide: scale %d, zero count %d, %d buckets: want downscaled, 2 zeros, at most %d", dp.Scale, dp.ZeroCount, len(dp.PositiveBucket.Counts), otelhist.MaxSize)
				}
			}
		}
		if n != 2 {
			t.Errorf("%d caller points, want 2", n)
		}
		time.Sleep(time.Second) // let the Hedger's timer goroutines exit
	})
}

func TestNewProducerValidates(t *testing.T) {
	if _, err := otelhist.NewProducer(nil); !errors.Is(err, otelhist.ErrInvalid) {
		t.Errorf("NewProducer(nil) = %v, want ErrInvalid", err)
	}
}
