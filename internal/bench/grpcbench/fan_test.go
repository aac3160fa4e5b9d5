package grpcbench

import (
	"context"
	"testing"

	"github.com/tailcut/hedge/internal/bench"
)

// The fan-out call (default-fan) sends every leaf to real gRPC servers
// through the backend's LeafReader.
func TestFanCall(t *testing.T) {
	b, err := Start(Options{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := bench.LookupStrategy("default-fan")
	if err != nil {
		t.Fatal(err)
	}
	c, err := bench.FanOut(bench.StrategyContender(st, bench.StrategyOptions{}, false), 8).New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 10 {
		if err := c.Do(context.Background(), i); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	var served int64
	for _, n := range b.Served() {
		served += n
	}
	if s := c.Stats(); s.Requests != 80 || served < 80 {
		t.Errorf("%d leaves counted, %d served; want 80 and at least 80", s.Requests, served)
	}
}
