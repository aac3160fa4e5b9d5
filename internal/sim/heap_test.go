package sim

import (
	"math"
	"testing"
)

// TestDepTree checks the completion tree against a scan: after every
// update, at tree sizes that do and do not fill their last level, the
// root names a server whose time is the earliest, and that time.
func TestDepTree(t *testing.T) {
	r := seedRNG(4, 4)
	for _, servers := range []int{1, 2, 3, 7, 10, 16, 33} {
		var d depTree
		d.reset(servers)
		times := make([]float64, servers)
		for i := range times {
			times[i] = math.Inf(1)
		}
		for step := range 5000 {
			s := int32(r.IntN(servers))
			v := math.Inf(1)
			switch r.IntN(4) {
			case 0: // idle
			case 1: // a tie with another server's time
				v = times[r.IntN(servers)]
			default:
				v = math.Floor(r.Float64()*100) / 4 // ties are common
			}
			times[s] = v
			d.set(s, v)
			want := math.Inf(1)
			for _, x := range times {
				want = min(want, x)
			}
			got, gt := d.min()
			if gt != want || (!math.IsInf(want, 1) && times[got] != want) {
				t.Fatalf("%d servers, step %d: min() = server %d at %v, want time %v (times %v)", servers, step, got, gt, want, times)
			}
		}
	}
}
