package tied

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// A replica whose report's counts are too large to add has no free
// worker: a spare to it would be refused, and is not sent. Its counts do
// not wrap round to a negative load that reads as a free worker. The
// other replica is busy, so that a spare for a primary there is kept home
// only by the huge report, whichever replica the picker gives the
// primary. A report with a negative count is ignored.
func TestSpareSkippedByHugeReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, call := spareProbe(t)
		busy := hedge.Load{Running: 2, Queued: 1, Workers: 2}
		for _, huge := range []hedge.Load{
			{Running: 1, Queued: math.MaxInt, Workers: 4},
			{Running: math.MaxInt, Queued: math.MaxInt, Workers: 8},
			{Running: math.MaxInt / 2, Queued: math.MaxInt/2 + 2, Workers: 1},
		} {
			sent := 0
			for range 30 {
				c.ReportLoad(0, busy)
				c.ReportLoad(1, huge)
				if call() {
					sent++
				}
			}
			if sent != 0 {
				t.Errorf("replica 1 reports %+v, replica 0 is busy: %d of 30 spares sent, want none", huge, sent)
			}
		}
		// A negative count is no report: the stale ones send the spare.
		time.Sleep(time.Second)
		c.ReportLoad(0, hedge.Load{Running: -1, Workers: 2})
		c.ReportLoad(1, hedge.Load{Queued: math.MinInt, Workers: 2})
		if !call() {
			t.Error("reports with negative counts kept the spare home")
		}
	})
}
