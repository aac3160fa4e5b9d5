package loadreport_test

import (
	"errors"
	"testing"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/loadreport"
)

// FuzzParse checks that Parse never panics, that every error matches
// exactly one of ErrMalformed and ErrNoReport, that the counts it reads
// are at most MaxCount (a client can add them without overflow), and
// that whatever it accepts Format writes back so that Parse reads the
// same Load.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		loadreport.Format(hedge.Load{Running: 3, Queued: 0, Workers: 4, Done: 12345}),
		"TEXT application_utilization=0.5",
		"TEXT cpu_utilization=1.5, mem_utilization=0.2, rps_fractional=10, eps=1",
		"TEXT named_metrics.hedge_running=3.0, named_metrics.hedge_done=1e3, utilization.x=0.1, request_cost.y=2",
		"  TEXT  named_metrics.hedge_queued = 1 ,, ",
		`JSON {"cpu_utilization": 0.3}`,
		"BIN AAAA",
		"TEXT named_metrics.hedge_running 3",
		"TEXT named_metrics.hedge_done=9223372036854775808",
		"TEXT named_metrics.hedge_running=9223372036854775807, named_metrics.hedge_queued=9223372036854775807",
		"TEXT named_metrics.hedge_queued=1e19, named_metrics.hedge_workers=99999999999999999999",
		"TEXT named_metrics.hedge_workers=NaN, application_utilization=-1",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := loadreport.Parse(s)
		if err != nil {
			if errors.Is(err, loadreport.ErrMalformed) == errors.Is(err, loadreport.ErrNoReport) {
				t.Fatalf("Parse(%q): %v matches both or neither of ErrMalformed and ErrNoReport", s, err)
			}
			return
		}
		if l.Running < 0 || l.Queued < 0 || l.Workers < 0 || l.Done < 0 {
			t.Fatalf("Parse(%q) = %+v: a negative count", s, l)
		}
		if l.Running > loadreport.MaxCount || l.Queued > loadreport.MaxCount || l.Workers > loadreport.MaxCount {
			t.Fatalf("Parse(%q) = %+v: a count above MaxCount", s, l)
		}
		out := loadreport.Format(l)
		back, err := loadreport.Parse(out)
		if err != nil || back != l {
			t.Fatalf("Parse(%q) = %+v, Format wrote %q, read back as %+v, %v", s, l, out, back, err)
		}
	})
}
