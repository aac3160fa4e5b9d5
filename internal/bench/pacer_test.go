package bench

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// The Pacer never returns early, and its lateness is measured and logged,
// not asserted: on a shared machine it depends on what else runs. What a
// plain time.Sleep does to the same schedule is logged beside it.
func TestPacer(t *testing.T) {
	arr := Arrivals(3, 5000, 200*time.Millisecond, 0)
	p := Pacer{Start: time.Now().Add(time.Millisecond)}
	lags := make([]int64, len(arr))
	var wg sync.WaitGroup
	for i, at := range arr {
		late := p.Wait(at)
		if now := p.Now(); now < at {
			t.Fatalf("Wait(%v) returned at %v, early", at, now)
		}
		if late < 0 {
			t.Fatalf("negative lateness %v", late)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lags[i] = int64(p.Now() - at) // as the runner measures it
		}()
	}
	wg.Wait()
	slices.Sort(lags)

	sleepLags := make([]int64, 0, len(arr))
	start := time.Now()
	for _, at := range arr[:min(len(arr), 200)] {
		if d := at - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		sleepLags = append(sleepLags, int64(time.Since(start)-at))
	}
	slices.Sort(sleepLags)
	t.Logf("pacer: %d requests at 5,000/s, dispatch lag p50 %v p99 %v max %v; plain time.Sleep: p50 %v p99 %v",
		len(arr), time.Duration(Quantile(lags, 0.5)), time.Duration(Quantile(lags, 0.99)), time.Duration(lags[len(lags)-1]),
		time.Duration(Quantile(sleepLags, 0.5)), time.Duration(Quantile(sleepLags, 0.99)))
}

// A wait longer than the spin window sleeps first and still returns on
// time or later.
func TestPacerLongWait(t *testing.T) {
	p := Pacer{Start: time.Now(), SpinWindow: 500 * time.Microsecond}
	at := 5 * time.Millisecond
	late := p.Wait(at)
	if p.Now() < at || late < 0 {
		t.Fatalf("returned at %v, lateness %v", p.Now(), late)
	}
	t.Logf("5 ms wait: %v late", late)
}
