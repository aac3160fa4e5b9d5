package hedgeprom_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
)

func Example() {
	h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(20 * time.Millisecond)})
	if err != nil {
		log.Fatal(err)
	}
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": h})
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	// In a server: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	for range 3 {
		hedge.Do(context.Background(), h, "GetItem", func(ctx context.Context, a hedge.Attempt) (string, error) {
			return "item", nil
		})
	}

	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "hedge_requests_total", "hedge_delay_seconds":
			m := mf.GetMetric()[0]
			fmt.Println(mf.GetName(), m.GetLabel()[1].GetValue(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	// Output:
	// hedge_delay_seconds GetItem 0.02
	// hedge_requests_total GetItem 3
}
