package recovery

import "testing"

func TestFirst(t *testing.T) {
	// ok: which windows are recovered; the slowdown ends after window 2.
	ok := []bool{true, true, false, true, false, true, true, true, true}
	eligible := func(i int) bool { return i > 2 }
	recovered := func(i int) bool { return ok[i] }
	for _, c := range []struct{ from, n, settle, want int }{
		{0, len(ok), 1, 3},
		{0, len(ok), 2, 5},
		{0, len(ok), 3, 5},
		{0, len(ok), 4, -1}, // 5..8 would do, but the last window never counts
		{6, len(ok), 2, 6},
		{0, 4, 1, -1}, // window 3 is the last
	} {
		if got := First(c.from, c.n, c.settle, eligible, recovered); got != c.want {
			t.Errorf("First(%d, %d, %d) = %d, want %d", c.from, c.n, c.settle, got, c.want)
		}
	}
}
