package hedgeotel_test

import (
	"context"
	"log"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeotel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func Example() {
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(20 * time.Millisecond)})
	if err != nil {
		log.Fatal(err)
	}
	// In a server, use your MeterProvider (or otel.Meter) with an exporter
	// instead; a ManualReader is enough to see the wiring.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())

	reg, err := hedgeotel.Register(mp.Meter("github.com/tailcut/hedge"), map[string]*hedge.Hedger{"items": h})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()

	hedge.Do(context.Background(), h, "GetItem", func(ctx context.Context, a hedge.Attempt) (string, error) {
		return "item", nil
	})
}
