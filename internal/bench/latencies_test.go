package bench

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tailcut/hedge/internal/advise"
)

// TestWriteLatencies writes two repeats' requests and reads both files
// back as hedge advise reads them: the durations file has every latency;
// the requests file has every request in the order sent, with its
// latency, and send times that keep each repeat's gaps and put the second
// repeat one mean gap after the first, although it ran a minute later.
func TestWriteLatencies(t *testing.T) {
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	run := func(repeat int, start int64, lat ...time.Duration) *RunResult {
		k := &RunResult{Config: "none-random", Repeat: repeat}
		for i, l := range lat {
			k.seq = append(k.seq, int64(l))
			k.sent = append(k.sent, start+int64(i)*int64(time.Millisecond))
		}
		k.lat = slices.Sorted(slices.Values(k.seq))
		return k
	}
	r1 := run(0, base, 3*time.Millisecond, time.Millisecond, 2*time.Millisecond)
	r2 := run(1, base+int64(time.Minute), 5*time.Millisecond, 4*time.Millisecond)
	br := &BackendResult{Backend: "http", Replicas: 3, Configs: []ConfigResult{{Config: "none-random"}}}
	br.keepLatencies("none-random", []*RunResult{r1, r2, {Config: "none-random", Aborted: "collapsed"}})
	dir := t.TempDir()
	paths, err := br.WriteLatencies(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, LatenciesFile("http", "none-random")), filepath.Join(dir, RequestsFile("http", "none-random"))}
	if !slices.Equal(paths, want) {
		t.Fatalf("wrote %q, want %q", paths, want)
	}

	f, err := os.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := advise.Parse(f, advise.Durations, advise.Fields{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Latencies; !slices.Equal(got, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond}) {
		t.Errorf("durations file: %v", got)
	}

	g, err := os.Open(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s, err = advise.Parse(g, advise.JSONLines, advise.Fields{Time: "sent"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Latencies; !slices.Equal(got, []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 4 * time.Millisecond}) {
		t.Errorf("requests file latencies %v, want the order sent", got)
	}
	var offsets []time.Duration
	for _, ts := range s.Times {
		offsets = append(offsets, ts.Sub(time.Unix(0, base)).Round(time.Microsecond))
	}
	if want := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}; !slices.Equal(offsets, want) {
		t.Errorf("send times %v after the first, want %v: each repeat's own gaps, the second one mean gap after the first", offsets, want)
	}
}
