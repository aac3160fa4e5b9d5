package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// keepLatencies remembers the measured latencies of a configuration's
// kept runs that were not aborted, for WriteLatencies.
func (r *BackendResult) keepLatencies(config string, kept []*RunResult) {
	if r.latencies == nil {
		r.latencies = map[string][][]int64{}
	}
	for _, k := range kept {
		if k.Aborted == "" {
			r.latencies[config] = append(r.latencies[config], k.lat)
		}
	}
}

// LatenciesFile is the name of the file WriteLatencies writes for one
// backend and configuration: latencies-<backend>-<config>.txt.
func LatenciesFile(backend, config string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '/' || r == '\\' || r == ' ' || r == ':' {
				return '_'
			}
			return r
		}, s)
	}
	return fmt.Sprintf("latencies-%s-%s.txt", clean(backend), clean(config))
}

// WriteLatencies writes, into dir, one file per configuration of r (see
// LatenciesFile) holding every measured latency of its kept runs, one
// duration per line with its unit ("1.234567ms"), the format that "hedge
// advise --in" reads. Lines starting with '#' say what the file holds.
// Within each run the latencies are in ascending order, not in the order
// the requests were sent: the runner keeps them sorted. It returns the
// paths written.
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
		p := filepath.Join(dir, LatenciesFile(r.Backend, c.Config))
		if err := writeLatencyFile(p, r, c.Config, runs); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func writeLatencyFile(path string, r *BackendResult, config string, runs [][]int64) (err error) {
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
	n := 0
	for _, lat := range runs {
		n += len(lat)
	}
	s := r.Scenario
	fmt.Fprintf(w, "# hedge bench latencies: backend %s, %d replicas, configuration %s\n", r.Backend, r.Replicas, config)
	fmt.Fprintf(w, "# %d latencies from %d kept runs; %g requests/s, stalls of %v on %g%% of the time, seed %d\n", n, len(runs), s.Rate, s.StallLength, 100*s.StallShare, s.Seed)
	fmt.Fprintf(w, "# measured from each request's intended start; ascending within each run\n")
	for _, lat := range runs {
		for _, ns := range lat {
			w.WriteString(time.Duration(ns).String())
			w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing latencies: %w", err)
	}
	return nil
}
