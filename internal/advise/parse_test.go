package advise

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDurations(t *testing.T) {
	tests := []struct {
		name, in string
		unit     time.Duration
		want     []time.Duration
		err      string // substring of the error; empty for none
	}{
		{"units", "12.5ms\n850us\n850µs\n1.2s\n", 0, []time.Duration{12500 * time.Microsecond, 850 * time.Microsecond, 850 * time.Microsecond, 1200 * time.Millisecond}, ""},
		{"comments and blanks", "# header\n\n 3ms \r\n", 0, []time.Duration{3 * time.Millisecond}, ""},
		{"space before unit", "3 ms\n", 0, []time.Duration{3 * time.Millisecond}, ""},
		{"bare with unit", "2.5\n", time.Millisecond, []time.Duration{2500 * time.Microsecond}, ""},
		{"bare without unit", "3ms\n2.5\n", 0, nil, "line 2: \"2.5\" has no unit"},
		{"garbage", "3ms\nfast\n", 0, nil, "line 2: \"fast\" is not a latency"},
		{"negative", "-3ms\n", 0, nil, "line 1: \"-3ms\" is negative"},
		{"empty", "# nothing\n", 0, nil, "no latencies found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseDurations(strings.NewReader(tt.in), tt.unit)
			checkParse(t, s, err, tt.want, tt.err)
		})
	}
}

func checkParse(t *testing.T, s *Sample, err error, want []time.Duration, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Latencies) != len(want) {
		t.Fatalf("got %v, want %v", s.Latencies, want)
	}
	for i := range want {
		if s.Latencies[i] != want[i] {
			t.Fatalf("got %v, want %v", s.Latencies, want)
		}
	}
}

func TestParseCSV(t *testing.T) {
	in := "ts,host,latency_ms\n2024-05-01T12:00:00Z,a,12.5\n1714564801.5,b,3\n"
	s, err := ParseCSV(strings.NewReader(in), Fields{Latency: "latency_ms", Replica: "host", Time: "ts", Unit: time.Millisecond})
	checkParse(t, s, err, []time.Duration{12500 * time.Microsecond, 3 * time.Millisecond}, "")
	if s.Replicas[0] != "a" || s.Replicas[1] != "b" {
		t.Errorf("replicas %v", s.Replicas)
	}
	if got := s.Times[1].Sub(s.Times[0]); got != 1500*time.Millisecond {
		t.Errorf("times %v, 1.5s apart expected", s.Times)
	}
	// By column number, durations with units.
	s, err = ParseCSV(strings.NewReader("a,b\nx,4ms\n"), Fields{Latency: "2"})
	checkParse(t, s, err, []time.Duration{4 * time.Millisecond}, "")

	for _, tt := range []struct{ in, col, err string }{
		{"a,b\n1,2\n", "latency", `line 1: no column "latency" in the header (a, b)`},
		{"latency\n3ms\nslow\n", "", `line 3: column latency: "slow" is not a latency`},
		{"x,latency\n1\n", "", "line 2: 1 fields: expected the latency in column 2"},
		{"latency\n", "", "no latencies found"},
		{"", "", "expected a header row"},
		{"latency\n\"3ms\n", "", "line 2"},
	} {
		_, err := ParseCSV(strings.NewReader(tt.in), Fields{Latency: tt.col})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseCSV(%q): error %v, want one containing %q", tt.in, err, tt.err)
		}
	}
}

func TestParseJSONLines(t *testing.T) {
	in := `{"latency": "12.5ms", "host": "a", "ts": "2024-05-01T12:00:00.5Z"}
{"latency": 3, "host": 7, "ts": 1714564801}

{"http": {"latency": "1ms"}, "latency": "2ms"}
`
	s, err := ParseJSONLines(strings.NewReader(in), Fields{Replica: "host", Time: "ts", Unit: time.Millisecond})
	checkParse(t, s, err, []time.Duration{12500 * time.Microsecond, 3 * time.Millisecond, 2 * time.Millisecond}, "")
	if s.Replicas[1] != "7" || s.Replicas[2] != "" {
		t.Errorf("replicas %q", s.Replicas)
	}
	if !s.Times[2].IsZero() || s.Times[1].Unix() != 1714564801 {
		t.Errorf("times %v", s.Times)
	}
	s, err = ParseJSONLines(strings.NewReader(`{"http": {"latency": "1ms"}}`), Fields{Latency: "http.latency"})
	checkParse(t, s, err, []time.Duration{time.Millisecond}, "")

	for _, tt := range []struct{ in, err string }{
		{`{"latency": "1ms"}` + "\n" + `{"latency": 3}`, `line 2: field latency: 3 has no unit`},
		{`{"latency": "1ms"}` + "\n[1]", "line 2: not a JSON object"},
		{`{"lat": "1ms"}`, `line 1: no field "latency"`},
		{`{"latency": true}`, "line 1: field latency: true"},
	} {
		_, err := ParseJSONLines(strings.NewReader(tt.in), Fields{})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseJSONLines(%q): error %v, want one containing %q", tt.in, err, tt.err)
		}
	}
}

const promScrape = `# HELP http_request_duration_seconds Latency.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{instance="a",le="0.01"} 600
http_request_duration_seconds_bucket{instance="a",le="0.1"} 990
http_request_duration_seconds_bucket{instance="a",le="1"} 1000
http_request_duration_seconds_bucket{instance="a",le="+Inf"} 1000
http_request_duration_seconds_sum{instance="a"} 20
http_request_duration_seconds_count{instance="a"} 1000
http_request_duration_seconds_bucket{instance="b",le="0.01"} 400
http_request_duration_seconds_bucket{instance="b",le="0.1"} 990
http_request_duration_seconds_bucket{instance="b",le="1"} 998
http_request_duration_seconds_bucket{instance="b",le="+Inf"} 1000
http_request_duration_seconds_sum{instance="b"} 20
http_request_duration_seconds_count{instance="b"} 1000
other_total 3
`

func TestParsePromText(t *testing.T) {
	for _, in := range []string{promScrape, stripTypeLines(promScrape)} {
		s, err := ParsePromText(strings.NewReader(in), Fields{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() != 2000 || !s.Binned {
			t.Fatalf("%d latencies (binned %v), want 2000", s.Len(), s.Binned)
		}
		e := newEmpirical(s.sorted())
		// 1000 of 2000 at or below 10ms, 1980 at or below 100ms.
		if p := e.percentiles(); p.P50 > 10*time.Millisecond || p.P99 <= 10*time.Millisecond || p.P99 > 100*time.Millisecond {
			t.Errorf("percentiles %+v outside their buckets", p)
		}
		if got := time.Duration(quantileOf(e.xs, 1)); got != time.Second {
			t.Errorf("max %v: the +Inf bucket's latencies should sit at the highest bound, 1s", got)
		}
		if !strings.Contains(strings.Join(s.Notes, " "), "above the highest finite bound") {
			t.Errorf("notes %q should warn about the +Inf bucket", s.Notes)
		}
	}
	for _, tt := range []struct{ in, metric, err string }{
		{"x_bucket{le=\"1\"} 3\nx_bucket{le=\"+Inf\"} 2\n", "", "bucket counts are cumulative"},
		{"other_total 3\n", "", "no histogram"},
		{promScrape, "nope", `no histogram "nope"`},
		{"x_bucket{le=\"1\"} 3\ny_bucket{le=\"1\"} 3\n", "", "2 histograms (x, y)"},
		{"x_bucket{le=\"1\" 3\n", "", "line 1"},
	} {
		_, err := ParsePromText(strings.NewReader(tt.in), Fields{Metric: tt.metric})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParsePromText(%q): error %v, want one containing %q", tt.in, err, tt.err)
		}
	}
	s, err := ParsePromText(strings.NewReader("lat_milliseconds_bucket{le=\"10\"} 5\nlat_milliseconds_bucket{le=\"+Inf\"} 5\n"), Fields{})
	if err != nil || s.Latencies[0] != time.Millisecond {
		t.Errorf("milliseconds histogram: %v, %v: bounds should be read in ms", s, err)
	}
}

func stripTypeLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestParsePromJSON(t *testing.T) {
	vector := `{"status":"success","data":{"resultType":"vector","result":[
 {"metric":{"le":"0.01"},"value":[1714564800,"500"]},
 {"metric":{"le":"0.1"},"value":[1714564800,"990"]},
 {"metric":{"le":"+Inf"},"value":[1714564800,"1000"]}]}}`
	s, err := ParsePromJSON(strings.NewReader(vector), Fields{})
	if err != nil || s.Len() != 1000 {
		t.Fatalf("vector: %v, %v", s, err)
	}
	matrix := `{"status":"success","data":{"resultType":"matrix","result":[
 {"metric":{"__name__":"x_bucket","le":"0.01"},"values":[[1,"100"],[2,"600"]]},
 {"metric":{"__name__":"x_bucket","le":"+Inf"},"values":[[1,"100"],[2,"1100"]]}]}}`
	s, err = ParsePromJSON(strings.NewReader(matrix), Fields{})
	if err != nil || s.Len() != 1000 {
		t.Fatalf("matrix: %v, %v (want the increase, 1000)", s, err)
	}
	if got := newEmpirical(s.sorted()).percentiles().P50; got > 10*time.Millisecond {
		t.Errorf("matrix p50 %v, want within the first bucket", got)
	}
	for _, tt := range []struct{ in, err string }{
		{`{"status":"error","error":"bad query"}`, "the query failed: bad query"},
		{"{\n\"status\": \"success\",\n\"data\": [}", "line 3"},
		{`{"status":"success","data":{"resultType":"scalar","result":[]}}`, `resultType "scalar"`},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"1"},"value":[1,"3"]}]}}`, `no le="+Inf" bucket`},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"+Inf"},"value":[1,3]}]}}`, "expected the count as a string"},
		{`{"status":"success","data":{"resultType":"vector","result":[]}}`, "no series with an le label"},
	} {
		_, err := ParsePromJSON(strings.NewReader(tt.in), Fields{})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParsePromJSON(%q): error %v, want one containing %q", tt.in, err, tt.err)
		}
	}
}

func TestDetect(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Format
	}{
		{"12ms\n3ms\n", Durations},
		{"ts,latency\n1,2\n", CSV},
		{`{"latency":"1ms"}` + "\n", JSONLines},
		{`{"status":"success","data":{"resultType":"vector"}}`, PromJSON},
		{"# HELP x y\n", PromText},
		{`x_bucket{le="0.1"} 3`, PromText},
	} {
		if got := Detect([]byte(tt.in)); got != tt.want {
			t.Errorf("Detect(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	s, err := Parse(strings.NewReader("ts,latency\n1,2ms\n"), Auto, Fields{})
	if err != nil || s.Len() != 1 {
		t.Errorf("Parse auto CSV: %v, %v", s, err)
	}
	if _, err := Parse(strings.NewReader("x\n"), Durations, Fields{}); err == nil || !strings.HasPrefix(err.Error(), "durations: line 1") {
		t.Errorf("error %v should start with the format and the line", err)
	}
}

func TestCheckTooSmall(t *testing.T) {
	s := &Sample{Latencies: make([]time.Duration, MinSample-1)}
	if err := s.Check(); !errors.Is(err, ErrTooSmall) || !strings.Contains(err.Error(), "999 latencies: give at least 1000") {
		t.Errorf("Check: %v", err)
	}
	if err := (&Sample{}).Check(); !errors.Is(err, ErrTooSmall) {
		t.Errorf("Check of an empty sample: %v", err)
	}
}

// checkSample is what every parser promises of a sample it returns.
func checkSample(t *testing.T, s *Sample, err error) {
	t.Helper()
	if err != nil {
		if s != nil {
			t.Fatalf("a sample and an error: %v", err)
		}
		return
	}
	if s.Len() == 0 || s.Len() > MaxSample {
		t.Fatalf("%d latencies", s.Len())
	}
	for _, d := range s.Latencies {
		if d < 0 {
			t.Fatalf("negative latency %v", d)
		}
	}
	if (s.Replicas != nil && len(s.Replicas) != s.Len()) || (s.Times != nil && len(s.Times) != s.Len()) {
		t.Fatalf("%d latencies, %d replicas, %d times", s.Len(), len(s.Replicas), len(s.Times))
	}
}

func FuzzParseDurations(f *testing.F) {
	for _, s := range []string{"12.5ms\n3s\n", "# x\n\n2\n", "1h2m3s", "-1ms", "9999999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseDurations(strings.NewReader(in), time.Millisecond)
		checkSample(t, s, err)
	})
}

func FuzzParseCSV(f *testing.F) {
	f.Add("ts,host,latency\n2024-05-01T12:00:00Z,a,12.5ms\n")
	f.Add("latency\n\"3ms\"\n1e308\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseCSV(strings.NewReader(in), Fields{Replica: "host", Time: "ts", Unit: time.Millisecond})
		checkSample(t, s, err)
	})
}

func FuzzParseJSONLines(f *testing.F) {
	f.Add(`{"latency": "12.5ms", "host": "a", "ts": 1714564801}`)
	f.Add(`{"latency": 1e300, "host": null, "ts": "x"}`)
	f.Add(`{"a": {"latency": 3}}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseJSONLines(strings.NewReader(in), Fields{Replica: "host", Time: "ts", Unit: time.Millisecond})
		checkSample(t, s, err)
	})
}

func FuzzParsePromText(f *testing.F) {
	f.Add(promScrape)
	f.Add(stripTypeLines(promScrape))
	f.Add("x_bucket{le=\"1e300\"} 1e300\nx_bucket{le=\"+Inf\"} 1e300\n")
	f.Add("x_bucket{le=\"0.01\"} 5e11\nx_bucket{le=\"+Inf\"} 1e12\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParsePromText(strings.NewReader(in), Fields{MaxBinned: fuzzBinned})
		checkSample(t, s, err)
		checkBinned(t, s, err)
	})
}

func FuzzParsePromJSON(f *testing.F) {
	f.Add(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"0.1"},"value":[1,"5"]},{"metric":{"le":"+Inf"},"value":[1,"9"]}]}}`)
	f.Add(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"le":"+Inf"},"values":[[1,"1"],[2,"1e9"]]}]}}`)
	f.Add(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"+Inf"},"value":[1,"1e300"]}]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParsePromJSON(strings.NewReader(in), Fields{MaxBinned: fuzzBinned})
		checkSample(t, s, err)
		checkBinned(t, s, err)
	})
}

// fuzzBinned is the Fields.MaxBinned the histogram parsers are fuzzed with.
const fuzzBinned = 20_000

// checkBinned is what a histogram parser promises beyond checkSample:
// a sample of at most fuzzBinned latencies, whatever the counts, and a
// count refused only for exceeding MaxCount.
func checkBinned(t *testing.T, s *Sample, err error) {
	t.Helper()
	if err == nil && (s.Len() > fuzzBinned || !s.Binned) {
		t.Fatalf("%d latencies (binned %v), want at most %d", s.Len(), s.Binned, fuzzBinned)
	}
	if errors.Is(err, ErrCount) && !strings.Contains(err.Error(), "at most 2^53") {
		t.Fatalf("a count refused without saying what is accepted: %v", err)
	}
}

// A histogram's counts say nothing of its size: 74 bytes may count 1e300
// observations, which no counter holds (refused with ErrCount), or 1e12,
// which spread into at most Fields.MaxBinned latencies, so that the work
// of advising follows MaxBinned, not the counts.
func TestPromCountBounds(t *testing.T) {
	absurd := "x_bucket{le=\"0.01\"} 1e300\nx_bucket{le=\"0.1\"} 1e300\nx_bucket{le=\"+Inf\"} 1e300\n"
	summed := "x_bucket{le=\"0.01\",i=\"a\"} 5e15\nx_bucket{le=\"+Inf\",i=\"a\"} 5e15\nx_bucket{le=\"0.01\",i=\"b\"} 5e15\nx_bucket{le=\"+Inf\",i=\"b\"} 5e15\n"
	absurdJSON := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"0.1"},"value":[1,"1e300"]},{"metric":{"le":"+Inf"},"value":[1,"1e300"]}]}}`
	for name, parse := range map[string]func() (*Sample, error){
		"text":   func() (*Sample, error) { return ParsePromText(strings.NewReader(absurd), Fields{}) },
		"summed": func() (*Sample, error) { return ParsePromText(strings.NewReader(summed), Fields{}) },
		"json":   func() (*Sample, error) { return ParsePromJSON(strings.NewReader(absurdJSON), Fields{}) },
		"auto":   func() (*Sample, error) { return Parse(strings.NewReader(absurd), Auto, Fields{}) },
	} {
		s, err := parse()
		if s != nil || !errors.Is(err, ErrCount) || !strings.Contains(err.Error(), "at most 2^53") {
			t.Errorf("%s: %v (sample %v); want ErrCount, saying what is accepted", name, err, s != nil)
		}
	}
	big := "x_bucket{le=\"0.01\"} 5e11\nx_bucket{le=\"0.1\"} 1e12\nx_bucket{le=\"+Inf\"} 1e12\n"
	for _, c := range []struct {
		max, want int
	}{{0, MaxBinned}, {5000, 5000}, {-1, MaxBinned}} {
		s, err := ParsePromText(strings.NewReader(big), Fields{MaxBinned: c.max})
		if err != nil || s.Len() != c.want {
			t.Fatalf("MaxBinned %d: %d latencies, %v; want %d", c.max, s.Len(), err, c.want)
		}
		below := 0
		for _, d := range s.Latencies {
			if d <= 10*time.Millisecond {
				below++
			}
		}
		if below != c.want/2 {
			t.Errorf("MaxBinned %d: %d latencies within the first bucket, want half, %d", c.max, below, c.want/2)
		}
	}
}
