package decide

import (
	"math"
	"testing"
	"time"
)

func TestAddSat(t *testing.T) {
	for _, tc := range []struct{ t, d, want time.Duration }{
		{0, 0, 0},
		{5, 7, 12},
		{0, Never, Never},
		{1, Never - 1, Never},
		{time.Hour, math.MaxInt64 - 1, Never},
		{time.Hour, Never - time.Hour - 1, Never - 1},
	} {
		if got := AddSat(tc.t, tc.d); got != tc.want {
			t.Errorf("AddSat(%d, %d) = %d, want %d", tc.t, tc.d, got, tc.want)
		}
	}
}
