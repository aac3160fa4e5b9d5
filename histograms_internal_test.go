package hedge

import (
	"reflect"
	"testing"

	"github.com/tailcut/hedge/quantile"
)

// TestAddCounts checks that the counts of two histograms added together
// are those of one histogram that recorded the values of both: buckets
// in order, a bucket both hold counted once with both counts, and the
// sums added, whichever of them is empty.
func TestAddCounts(t *testing.T) {
	sets := [][]int64{nil, {5}, {5, 70, 70, 900}, {3, 70, 1000, 1 << 20}, {1 << 30}}
	for _, a := range sets {
		for _, b := range sets {
			var ha, hb, both quantile.Histogram
			for _, v := range a {
				ha.Record(v)
				both.Record(v)
			}
			for _, v := range b {
				hb.Record(v)
				both.Record(v)
			}
			got := addCounts(ha.Counts(nil), hb.Counts(nil))
			want := both.Counts(nil)
			if got.Count != want.Count || got.Sum != want.Sum || !reflect.DeepEqual(got.Buckets, want.Buckets) {
				t.Errorf("addCounts(%v, %v) = %+v; want %+v", a, b, got, want)
			}
		}
	}
}
