package otelhist_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel/otelhist"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func Example() {
	h, err := hedge.New(hedge.Config{})
	if err != nil {
		log.Fatal(err)
	}
	p, err := otelhist.NewProducer(map[string]*hedge.Hedger{"items": h})
	if err != nil {
		log.Fatal(err)
	}
	// In a program: sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(p)).
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	for range 3 {
		hedge.Do(context.Background(), h, "GetItem", func(context.Context, hedge.Attempt) (string, error) {
			return "item", nil
		})
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, dp := range m.Data.(metricdata.ExponentialHistogram[float64]).DataPoints {
				path, _ := dp.Attributes.Value("path")
				fmt.Println(m.Name, path.AsString(), dp.Count)
			}
		}
	}
	// Output:
	// hedge.latency.distribution caller 3
	// hedge.latency.distribution primary 3
}
