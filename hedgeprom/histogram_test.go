package hedgeprom_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
)

// TestHistogramMatchesClientGolang drives a Hedger through latencies
// spread from 0 to minutes, exact on synctest's fake clock, and checks
// that the exported histogram has, bucket for bucket, the native and
// classic counts of a client_golang histogram of the same schema and
// bounds that observed each of the Hedger's buckets at its midpoint: the
// conversion rule the package documents, checked against an independent
// implementation of Prometheus's bucketing.
func TestHistogramMatchesClientGolang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(hedge.Never)})
		rng := rand.New(rand.NewPCG(7, 11))
		lat := []time.Duration{0, 0, 1, 63, 64, 65, time.Millisecond, 5 * time.Millisecond, time.Second, 3 * time.Minute}
		for range 2000 {
			lat = append(lat, time.Duration(math.Exp(rng.Float64()*25))) // 1 ns to 72 s, log-uniform
		}
		for _, d := range lat {
			hedge.Do(context.Background(), h, "get", func(context.Context, hedge.Attempt) (int, error) {
				time.Sleep(d)
				return 0, nil
			})
		}
		bounds := []float64{1e-9, 1e-6, 0.001, 0.005, 0.0051, 0.01, 1, 60}
		c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"x": h}, hedgeprom.WithBuckets(bounds...))
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		got := gather(t, reg)[key("hedge_latency_distribution_seconds", "hedger=x", "op=get", "path=caller")].GetHistogram()
		if got == nil {
			t.Fatal("no caller histogram")
		}

		ref := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:                         "ref",
			Help:                         "reference",
			Buckets:                      bounds,
			NativeHistogramBucketFactor:  1.011, // schema 6: 2^(1/64) = 1.0109 <= 1.011 < 2^(1/32)
			NativeHistogramZeroThreshold: hedgeprom.NativeZeroThreshold,
		})
		for _, b := range h.Histograms()[0].Latency.Buckets {
			for range b.Count {
				ref.Observe(time.Duration(b.Mid()).Seconds())
			}
		}
		var m dto.Metric
		if err := ref.Write(&m); err != nil {
			t.Fatal(err)
		}
		want := m.GetHistogram()
		if want.GetSchema() != got.GetSchema() || got.GetSampleCount() != uint64(len(lat)) || want.GetSampleCount() != got.GetSampleCount() ||
			want.GetZeroCount() != got.GetZeroCount() || got.GetZeroCount() != 2 {
			t.Fatalf("schema %d, count %d, zero count %d; want %d, %d (%d calls), %d (two latencies of 0)",
				got.GetSchema(), got.GetSampleCount(), got.GetZeroCount(), want.GetSchema(), want.GetSampleCount(), len(lat), want.GetZeroCount())
		}
		gn, wn := nativeBuckets(got), nativeBuckets(want)
		if len(gn) != len(wn) || len(gn) < 100 {
			t.Errorf("%d native buckets, want %d (and at least 100)", len(gn), len(wn))
		}
		for i, n := range wn {
			if gn[i] != n {
				t.Errorf("native bucket %d: %d, want %d", i, gn[i], n)
			}
		}
		gc, wc := classicBuckets(got), classicBuckets(want)
		for _, b := range bounds {
			if gc[b] != wc[b] {
				t.Errorf("classic bucket le=%v: %d, want %d", b, gc[b], wc[b])
			}
		}
		if s := h.OpStats("get").Latency.Sum.Seconds(); got.GetSampleSum() != s {
			t.Errorf("sum %v, want the exact sum %v", got.GetSampleSum(), s)
		}
		time.Sleep(time.Second) // let the Hedger's timer goroutines exit
	})
}

func TestWithBucketsValidates(t *testing.T) {
	h := mustNew(t, hedge.Config{})
	for _, tc := range []struct {
		bounds []float64
		want   string
	}{
		{[]float64{0.1, 0.1}, "increasing"},
		{[]float64{0.2, 0.1}, "increasing"},
		{[]float64{0, 1}, "positive"},
		{[]float64{1, math.Inf(1)}, "+Inf is implied"},
		{[]float64{math.NaN()}, "positive"},
	} {
		_, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"a": h}, hedgeprom.WithBuckets(tc.bounds...))
		if !errors.Is(err, hedgeprom.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WithBuckets(%v): %v, want ErrInvalid mentioning %q", tc.bounds, err, tc.want)
		}
	}
	// No bounds: native only.
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"a": h}, hedgeprom.WithBuckets())
	if err != nil {
		t.Fatal(err)
	}
	hedge.Do(context.Background(), h, "get", func(context.Context, hedge.Attempt) (int, error) { return 1, nil })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	hist := gather(t, reg)[key("hedge_latency_distribution_seconds", "hedger=a", "op=get", "path=caller")].GetHistogram()
	if hist.GetSampleCount() != 1 || len(hist.GetBucket()) != 0 || len(hist.GetPositiveSpan()) == 0 {
		t.Errorf("native-only histogram: %v", hist)
	}
}

// BenchmarkScrapeFilled measures one scrape (Gather) of a collector over
// one Hedger with one operation class whose latency histograms hold
// 100,000 calls, so that the histograms have many buckets in use (the
// buckets metric: non-empty log-linear buckets of the caller path).
func BenchmarkScrapeFilled(b *testing.B) {
	h, reg := registered(b, true)
	for range 100_000 {
		hedge.Do(context.Background(), h, "get", trivial)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(h.Histograms()[0].Latency.Buckets)), "buckets")
}
