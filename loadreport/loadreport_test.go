package loadreport_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/loadreport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		name string
		l    hedge.Load
		want string
	}{
		{"the example", hedge.Load{Running: 3, Queued: 0, Workers: 4, Done: 12345},
			"TEXT application_utilization=0.750, named_metrics.hedge_running=3, named_metrics.hedge_queued=0, named_metrics.hedge_workers=4, named_metrics.hedge_done=12345"},
		{"idle", hedge.Load{Workers: 8},
			"TEXT application_utilization=0.000, named_metrics.hedge_running=0, named_metrics.hedge_queued=0, named_metrics.hedge_workers=8, named_metrics.hedge_done=0"},
		{"queued", hedge.Load{Running: 2, Queued: 3, Workers: 2, Done: 7},
			"TEXT application_utilization=2.500, named_metrics.hedge_running=2, named_metrics.hedge_queued=3, named_metrics.hedge_workers=2, named_metrics.hedge_done=7"},
		{"workers unknown, read as 1", hedge.Load{Running: 3},
			"TEXT application_utilization=3.000, named_metrics.hedge_running=3, named_metrics.hedge_queued=0, named_metrics.hedge_workers=0, named_metrics.hedge_done=0"},
		{"negative written as 0", hedge.Load{Running: -1, Queued: -2, Workers: -3, Done: -4},
			"TEXT application_utilization=0.000, named_metrics.hedge_running=0, named_metrics.hedge_queued=0, named_metrics.hedge_workers=0, named_metrics.hedge_done=0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := loadreport.Format(c.l)
			if got != c.want {
				t.Errorf("Format(%+v) =\n %q, want\n %q", c.l, got, c.want)
			}
			if _, err := loadreport.Parse(got); err != nil {
				t.Errorf("Parse(Format(%+v)): %v", c.l, err)
			}
		})
	}
}

func TestSet(t *testing.T) {
	h := http.Header{}
	h.Set(loadreport.Header, "stale")
	l := hedge.Load{Running: 1, Queued: 2, Workers: 3, Done: 4}
	loadreport.Set(h, l)
	if v := h.Values(loadreport.Header); len(v) != 1 || v[0] != loadreport.Format(l) {
		t.Fatalf("after Set: %q, want the one report %q", v, loadreport.Format(l))
	}
}

func TestParse(t *testing.T) {
	load := func(r, q, w int, d int64) hedge.Load { return hedge.Load{Running: r, Queued: q, Workers: w, Done: d} }
	for _, c := range []struct {
		name string
		in   string
		want hedge.Load
		err  error // nil, ErrMalformed or ErrNoReport
	}{
		{"ours", "TEXT application_utilization=0.750, named_metrics.hedge_running=3, named_metrics.hedge_queued=0, named_metrics.hedge_workers=4, named_metrics.hedge_done=12345",
			load(3, 0, 4, 12345), nil},
		{"spaces anywhere", "  TEXT   named_metrics.hedge_running = 3 ,named_metrics.hedge_queued=\t1,  named_metrics.hedge_workers =4 , ",
			load(3, 1, 4, 0), nil},
		{"empty pairs skipped", "TEXT ,, named_metrics.hedge_running=1,,", load(1, 0, 0, 0), nil},
		{"other ORCA keys ignored", "TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=1000, eps=2.5, utilization.disk=0.1, request_cost.db=12, named_metrics.foo=7, named_metrics.hedge_running=2, named_metrics.hedge_workers=4, named_metrics.hedge_done=9",
			load(2, 0, 4, 9), nil},
		{"application_utilization ignored beside ours", "TEXT application_utilization=0.9, named_metrics.hedge_running=0, named_metrics.hedge_workers=4",
			load(0, 0, 4, 0), nil},
		{"counts written as floats", "TEXT named_metrics.hedge_running=3.0, named_metrics.hedge_queued=1e1, named_metrics.hedge_done=1.2e3",
			load(3, 10, 0, 1200), nil},
		{"a huge counter", "TEXT named_metrics.hedge_done=9223372036854775807", load(0, 0, 0, 1<<63-1), nil},
		{"the sign plus", "TEXT named_metrics.hedge_running=+2", load(2, 0, 0, 0), nil},
		{"counts at the cap", "TEXT named_metrics.hedge_running=1073741824, named_metrics.hedge_queued=1073741824, named_metrics.hedge_workers=1073741824",
			load(loadreport.MaxCount, loadreport.MaxCount, loadreport.MaxCount, 0), nil},
		{"counts beyond the cap read as it", "TEXT named_metrics.hedge_running=9223372036854775807, named_metrics.hedge_queued=9223372036854775807, named_metrics.hedge_workers=1073741825",
			load(loadreport.MaxCount, loadreport.MaxCount, loadreport.MaxCount, 0), nil},
		{"a count beyond int64 reads as the cap", "TEXT named_metrics.hedge_queued=99999999999999999999", load(0, loadreport.MaxCount, 0, 0), nil},
		{"a huge count written as a float reads as the cap", "TEXT named_metrics.hedge_running=1e19, named_metrics.hedge_queued=1.5e300", load(loadreport.MaxCount, loadreport.MaxCount, 0, 0), nil},
		{"minus zero", "TEXT named_metrics.hedge_running=-0", load(0, 0, 0, 0), nil},

		{"application_utilization alone", "TEXT application_utilization=0.5", load(50, 0, 100, 0), nil},
		{"cpu_utilization alone", "TEXT cpu_utilization=0.25, mem_utilization=0.9", load(25, 0, 100, 0), nil},
		{"application before cpu", "TEXT cpu_utilization=0.9, application_utilization=0.1", load(10, 0, 100, 0), nil},
		{"utilization rounded", "TEXT application_utilization=0.994", load(99, 0, 100, 0), nil},
		{"full", "TEXT application_utilization=1", load(100, 0, 100, 0), nil},
		{"over full", "TEXT cpu_utilization=1.5", load(100, 50, 100, 0), nil},
		{"utilization capped", "TEXT application_utilization=1e300", load(100, 9900, 100, 0), nil},
		{"idle", "TEXT application_utilization=0", load(0, 0, 100, 0), nil},

		{"empty", "", hedge.Load{}, loadreport.ErrNoReport},
		{"blank", " \t ", hedge.Load{}, loadreport.ErrNoReport},
		{"TEXT alone", "TEXT", hedge.Load{}, loadreport.ErrNoReport},
		{"nothing we read", "TEXT mem_utilization=0.5, rps_fractional=10, named_metrics.foo=1", hedge.Load{}, loadreport.ErrNoReport},

		{"JSON", `JSON {"cpu_utilization": 0.3}`, hedge.Load{}, loadreport.ErrMalformed},
		{"BIN", "BIN CAESDgoIaGVsbG8=", hedge.Load{}, loadreport.ErrMalformed},
		{"no prefix", "named_metrics.hedge_running=3", hedge.Load{}, loadreport.ErrMalformed},
		{"prefix glued", "TEXTcpu_utilization=0.3", hedge.Load{}, loadreport.ErrMalformed},
		{"prefix in lower case", "text cpu_utilization=0.3", hedge.Load{}, loadreport.ErrMalformed},
		{"pair without =", "TEXT named_metrics.hedge_running 3", hedge.Load{}, loadreport.ErrMalformed},
		{"pair without a key", "TEXT =3", hedge.Load{}, loadreport.ErrMalformed},
		{"not a number", "TEXT named_metrics.hedge_running=three", hedge.Load{}, loadreport.ErrMalformed},
		{"empty value", "TEXT named_metrics.hedge_running=", hedge.Load{}, loadreport.ErrMalformed},
		{"unknown key, not a number", "TEXT rps_fractional=fast, named_metrics.hedge_running=1", hedge.Load{}, loadreport.ErrMalformed},
		{"negative count", "TEXT named_metrics.hedge_queued=-1", hedge.Load{}, loadreport.ErrMalformed},
		{"negative float count", "TEXT named_metrics.hedge_queued=-1.5", hedge.Load{}, loadreport.ErrMalformed},
		{"fractional count", "TEXT named_metrics.hedge_running=2.5", hedge.Load{}, loadreport.ErrMalformed},
		{"count out of range", "TEXT named_metrics.hedge_done=9223372036854775808", hedge.Load{}, loadreport.ErrMalformed},
		{"count overflows a float", "TEXT named_metrics.hedge_running=1e999", hedge.Load{}, loadreport.ErrMalformed},
		{"count NaN", "TEXT named_metrics.hedge_workers=NaN", hedge.Load{}, loadreport.ErrMalformed},
		{"count Inf", "TEXT named_metrics.hedge_workers=Inf", hedge.Load{}, loadreport.ErrMalformed},
		{"negative utilization", "TEXT application_utilization=-0.5", hedge.Load{}, loadreport.ErrMalformed},
		{"utilization NaN", "TEXT cpu_utilization=NaN", hedge.Load{}, loadreport.ErrMalformed},
		{"utilization Inf", "TEXT application_utilization=+Inf", hedge.Load{}, loadreport.ErrMalformed},
		{"a count twice", "TEXT named_metrics.hedge_running=1, named_metrics.hedge_running=2", hedge.Load{}, loadreport.ErrMalformed},
		{"a utilization twice", "TEXT cpu_utilization=0.1, cpu_utilization=0.2", hedge.Load{}, loadreport.ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := loadreport.Parse(c.in)
			if c.err == nil {
				if err != nil || got != c.want {
					t.Fatalf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
				}
				return
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("Parse(%q) = %+v, %v; want an error matching %v", c.in, got, err, c.err)
			}
			other := loadreport.ErrMalformed
			if c.err == loadreport.ErrMalformed {
				other = loadreport.ErrNoReport
			}
			if errors.Is(err, other) {
				t.Errorf("Parse(%q): %v matches %v too", c.in, err, other)
			}
			if got != (hedge.Load{}) {
				t.Errorf("Parse(%q) returned %+v with its error, want the zero Load", c.in, got)
			}
		})
	}
}

// Parse's errors say what is wrong, and quote a long header only in part.
func TestParseErrorMessages(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`JSON {"cpu_utilization": 0.3}`, "only ORCA's TEXT form"},
		{"TEXT named_metrics.hedge_running 3", "has no '='"},
		{"TEXT named_metrics.hedge_running=2.5", "whole number"},
		{"TEXT named_metrics.hedge_running=-2", "negative"},
		{"TEXT named_metrics.hedge_done=1e30", "out of range"},
		{"TEXT named_metrics.hedge_queued=1e999", "not finite"},
		{"TEXT named_metrics.hedge_done=x", "not a number"},
		{"TEXT eps=1", "none of the hedge_* named metrics"},
	} {
		_, err := loadreport.Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): %v, want a message saying %q", c.in, err, c.want)
		}
	}
	_, err := loadreport.Parse("JSON " + strings.Repeat("x", 10000))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("a long malformed header: an error of %d bytes, want it cut short", len(err.Error()))
	}
}

func BenchmarkFormat(b *testing.B) {
	l := hedge.Load{Running: 3, Queued: 1, Workers: 16, Done: 1234567}
	b.ReportAllocs()
	for b.Loop() {
		_ = loadreport.Format(l)
	}
}

func BenchmarkParse(b *testing.B) {
	v := loadreport.Format(hedge.Load{Running: 3, Queued: 1, Workers: 16, Done: 1234567})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := loadreport.Parse(v); err != nil {
			b.Fatal(err)
		}
	}
}
