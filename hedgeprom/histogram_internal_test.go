package hedgeprom

import (
	"math"
	"testing"

	"github.com/tailcut/hedge/quantile"
)

func TestNativeKey(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want int
	}{
		{1, 0}, {0.5, -64}, {2, 64}, {math.Nextafter(1, 2), 1}, {math.Nextafter(1, 0), 0},
		{math.Exp2(1.0 / 64), 1}, {math.Exp2(-1.0 / 64), -1}, {1e-9, -1913},
	} {
		if got := nativeKey(tc.x); got != tc.want {
			t.Errorf("nativeKey(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
	for x := 1e-9; x < 1e4; x *= 1.0007 {
		k := nativeKey(x)
		if lo, hi := math.Exp2(float64(k-1)/64), math.Exp2(float64(k)/64); !(lo < x && x <= hi*(1+1e-15)) {
			t.Fatalf("nativeKey(%v) = %d: bucket (%v, %v]", x, k, lo, hi)
		}
	}
}

// TestRebucketingError checks the bound the package documentation states,
// on every bucket of the Hedger's layout: each value a log-linear bucket
// holds lies within quantile.RelativeError of the native bucket its
// midpoint is counted in, (a, b] widened to (a(1-e), b(1+e)].
func TestRebucketingError(t *testing.T) {
	const e = quantile.RelativeError
	check := func(b quantile.Bucket) {
		mid := b.Mid()
		if mid == 0 {
			return // the zero bucket holds exactly 0
		}
		k := nativeKey(seconds(mid))
		a, c := math.Exp2(float64(k-1)/64), math.Exp2(float64(k)/64)
		if lo, hi := seconds(b.Lo), seconds(b.Hi-1); !(lo > a*(1-e) && hi <= c*(1+e)) {
			t.Errorf("bucket [%d, %d) counted in (%v, %v]: its values reach %v and %v", b.Lo, b.Hi, a, c, lo, hi)
		}
	}
	n := 0
	for v := int64(1); v < 64; v++ {
		check(quantile.Bucket{Lo: v, Hi: v + 1})
		n++
	}
	for shift := range 37 {
		for sub := int64(64); sub < 128; sub++ {
			check(quantile.Bucket{Lo: sub << shift, Hi: (sub + 1) << shift})
			n++
		}
	}
	if last := int64(127+1) << 36; last != quantile.MaxValue+1 {
		t.Fatalf("layout changed: last bucket ends at %d, MaxValue+1 is %d", last, quantile.MaxValue+1)
	}
	t.Logf("%d buckets checked", n)
}
