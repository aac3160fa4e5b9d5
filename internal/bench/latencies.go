package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// keepLatencies remembers a configuration's kept runs that were not
// aborted, for WriteLatencies.
func (r *BackendResult) keepLatencies(config string, kept []*RunResult) {
	if r.latencies == nil {
		r.latencies = map[string][]*RunResult{}
	}
	for _, k := range kept {
		if k.Aborted == "" {
			r.latencies[config] = append(r.latencies[config], k)
		}
	}
}

// LatenciesFile is the name of the file WriteLatencies writes for one
// backend and configuration: latencies-<backend>-<config>.txt.
func LatenciesFile(backend, config string) string {
	return fmt.Sprintf("latencies-%s-%s.txt", cleanName(backend), cleanName(config))
}

// RequestsFile is the name of the JSON lines file WriteLatencies writes
// beside LatenciesFile: requests-<backend>-<config>.jsonl.
func RequestsFile(backend, config string) string {
	return fmt.Sprintf("requests-%s-%s.jsonl", cleanName(backend), cleanName(config))
}

// cleanName makes s safe in a file name.
func cleanName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, s)
}

// WriteLatencies writes, into dir, one file per configuration of r (see
// LatenciesFile) holding every measured latency of its kept runs, one
// duration per line with its unit ("1.234567ms"), the format that "hedge
// advise --in" reads. Lines starting with '#' say what the file holds.
// Within each run the latencies are in ascending order, not in the order
// the requests were sent: the runner keeps them sorted.
//
// Beside each, it writes RequestsFile: one JSON object per request, in the
// order they were sent, with its latency and its send time, so that
// "hedge advise --time-field sent" can infer the load and look for bursts
// of slowness:
//
//	{"sent":1764604800.123456,"latency":"1.234ms","repeat":1}
//
// sent is the request's intended start in Unix seconds. The repeats ran
// apart in time, with other configurations between them; each repeat's
// times are moved to follow the previous repeat's last request by one
// mean gap between requests, so that the file reads as one recording at
// the bench's rate. It returns the paths written.
func (r *BackendResult) WriteLatencies(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("writing latencies: %w", err)
	}
	var paths []string
	for _, c := range r.Configs {
		runs := r.latencies[c.Config]
		if len(runs) == 0 {
			continue
		}
		for _, f := range []struct {
			name  string
			write func(*bufio.Writer, *BackendResult, string, []*RunResult)
		}{
			{LatenciesFile(r.Backend, c.Config), writeLatencies},
			{RequestsFile(r.Backend, c.Config), writeRequests},
		} {
			p := filepath.Join(dir, f.name)
			if err := writeFile(p, func(w *bufio.Writer) { f.write(w, r, c.Config, runs) }); err != nil {
				return paths, err
			}
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// writeFile creates path and writes it through a buffer with write.
func writeFile(path string, write func(*bufio.Writer)) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing latencies: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("writing latencies: %w", cerr)
		}
	}()
	w := bufio.NewWriter(f)
	write(w)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing latencies: %w", err)
	}
	return nil
}

func writeLatencies(w *bufio.Writer, r *BackendResult, config string, runs []*RunResult) {
	n := 0
	for _, k := range runs {
		n += len(k.lat)
	}
	s := r.Scenario
	fmt.Fprintf(w, "# hedge bench latencies: backend %s, %d replicas, configuration %s\n", r.Backend, r.Replicas, config)
	fmt.Fprintf(w, "# %d latencies from %d kept runs; %g requests/s, stalls of %v on %g%% of the time, seed %d\n", n, len(runs), s.Rate, s.StallLength, 100*s.StallShare, s.Seed)
	fmt.Fprintf(w, "# measured from each request's intended start; ascending within each run\n")
	for _, k := range runs {
		for _, ns := range k.lat {
			w.WriteString(time.Duration(ns).String())
			w.WriteByte('\n')
		}
	}
}

func writeRequests(w *bufio.Writer, _ *BackendResult, _ string, runs []*RunResult) {
	var shift, next int64 // ns added to this repeat's times; where it should start
	for i, k := range runs {
		if len(k.sent) == 0 {
			continue
		}
		if i > 0 {
			shift = next - k.sent[0]
		}
		for j, ns := range k.seq {
			t := k.sent[j] + shift
			fmt.Fprintf(w, "{\"sent\":%d.%06d,\"latency\":%q,\"repeat\":%d}\n", t/1e9, t%1e9/1e3, time.Duration(ns).String(), k.Repeat+1)
		}
		first, last := k.sent[0]+shift, k.sent[len(k.sent)-1]+shift
		gap := int64(0)
		if len(k.sent) > 1 {
			gap = (last - first) / int64(len(k.sent)-1)
		}
		next = last + gap
	}
}
