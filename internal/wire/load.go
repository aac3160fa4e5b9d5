package wire

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tailcut/hedge"
)

// LoadHeader is the response header that carries a server's load report, in
// ORCA's TEXT form (package loadreport's doc says more). It is in canonical form.
const LoadHeader = "Endpoint-Load-Metrics"

// The keys of the report that FormatLoad writes and ParseLoad reads.
const (
	keyAppUtilization = "application_utilization"
	keyCPUUtilization = "cpu_utilization"
	keyRunning        = "named_metrics.hedge_running"
	keyQueued         = "named_metrics.hedge_queued"
	keyWorkers        = "named_metrics.hedge_workers"
	keyDone           = "named_metrics.hedge_done"
)

// LoadUtilizationWorkers is the Workers of a Load that ParseLoad makes of a report
// that carries only a utilization (an ORCA server's that is not the
// toolkit's): a utilization u reads as round(u*LoadUtilizationWorkers)
// requests present.
const LoadUtilizationWorkers = 100

// LoadMaxCount is the most that ParseLoad reads of hedge_running, hedge_queued
// and hedge_workers: a larger count, however large, reads as LoadMaxCount. No
// server holds a billion requests; a count beyond that says only that it
// is as busy as can be, and capped it stays one that a client can add to
// others without overflow.
const LoadMaxCount = 1 << 30

// maxUtilization caps the utilization that ParseLoad reads, so that the
// requests present it makes of it stay few: 100 is a hundred times more
// work than workers.
const maxUtilization = 100

// Errors of ParseLoad. Match them with errors.Is.
var (
	// ErrLoadMalformed is wrapped by ParseLoad's error for a header that is not a
	// report in ORCA's TEXT form, or whose values it cannot read: no
	// "TEXT " prefix (the JSON and BIN forms included), a pair without
	// '=', a value that is not a number, a count that is negative, not an
	// integer or infinite, a hedge_done beyond int64, a utilization that
	// is negative or not finite, or a key that it reads given twice.
	ErrLoadMalformed = errors.New("loadreport: malformed load report")
	// ErrNoLoadReport is wrapped by ParseLoad's error for a header in the TEXT
	// form that reports nothing ParseLoad reads: none of the hedge_* named
	// metrics, application_utilization or cpu_utilization. An empty
	// header is no report either.
	ErrNoLoadReport = errors.New("loadreport: the header reports no load")
)

// FormatLoad returns l as the value of LoadHeader: "TEXT application_utilization=U,
// named_metrics.hedge_running=R, named_metrics.hedge_queued=Q,
// named_metrics.hedge_workers=W, named_metrics.hedge_done=D", where U is
// (R+Q)/W to three decimals (W 0 read as 1). A negative count, which no
// server has, is written as 0, so that ParseLoad reads whatever FormatLoad writes.
func FormatLoad(l hedge.Load) string {
	r, q, w, d := max(l.Running, 0), max(l.Queued, 0), max(l.Workers, 0), max(l.Done, 0)
	u := (float64(r) + float64(q)) / float64(max(w, 1))
	var buf [192]byte // on the stack: the string is the one allocation
	b := buf[:0]
	b = append(b, "TEXT "+keyAppUtilization+"="...)
	b = strconv.AppendFloat(b, u, 'f', 3, 64)
	b = append(b, ", "+keyRunning+"="...)
	b = strconv.AppendInt(b, int64(r), 10)
	b = append(b, ", "+keyQueued+"="...)
	b = strconv.AppendInt(b, int64(q), 10)
	b = append(b, ", "+keyWorkers+"="...)
	b = strconv.AppendInt(b, int64(w), 10)
	b = append(b, ", "+keyDone+"="...)
	b = strconv.AppendInt(b, d, 10)
	return string(b)
}

// SetLoad sets LoadHeader in h to l's report (FormatLoad). Server middleware calls it
// before the response's status is written; loadreport.Writer does it for a handler.
func SetLoad(h http.Header, l hedge.Load) {
	h[LoadHeader] = []string{FormatLoad(l)}
}

// ParseLoad reads a value of LoadHeader: "TEXT " followed by comma-separated
// key=value pairs, spaces allowed around each key and value, empty pairs
// skipped, every value a number. It reads the hedge_* named metrics of
// FormatLoad into the Load's fields; a hedge_* metric absent is 0 (Workers 0
// is unknown, Done 0 not counted); a count of Running, Queued or Workers
// above LoadMaxCount reads as LoadMaxCount. Without any of them it reads
// application_utilization, or failing that cpu_utilization, as an ORCA
// server's report (package loadreport's doc says more): LoadUtilizationWorkers workers, and
// round(u*LoadUtilizationWorkers) requests present, u capped at 100, at most
// LoadUtilizationWorkers of them running. Other keys (mem_utilization,
// rps_fractional, eps, utilization.*, request_cost.*, other
// named_metrics.*) are ignored, as is application_utilization when the
// hedge_* metrics are there.
//
// The error matches ErrLoadMalformed for a header that is not such a report
// or that ParseLoad cannot read, and ErrNoLoadReport for one that reports none of
// the keys it reads.
func ParseLoad(v string) (hedge.Load, error) {
	s := strings.TrimSpace(v)
	if s == "" {
		return hedge.Load{}, fmt.Errorf("%w: the %s header is empty", ErrNoLoadReport, LoadHeader)
	}
	rest, ok := strings.CutPrefix(s, "TEXT")
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return hedge.Load{}, fmt.Errorf("%w: %s: only ORCA's TEXT form (\"TEXT key=value, ...\") is read, not its JSON or BIN forms", ErrLoadMalformed, clip(s))
	}
	var (
		counts [4]int64 // running, queued, workers, done
		seen   [4]bool
		named  bool
		util   [2]float64 // application, cpu
		hasU   [2]bool
	)
	for rest != "" {
		var pair string
		pair, rest, _ = strings.Cut(rest, ",")
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		key, val, ok := strings.Cut(pair, "=")
		if !ok {
			return hedge.Load{}, fmt.Errorf("%w: the pair %s has no '=': write key=value", ErrLoadMalformed, clip(pair))
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "" {
			return hedge.Load{}, fmt.Errorf("%w: the pair %s has no key", ErrLoadMalformed, clip(pair))
		}
		i, limit := -1, int64(LoadMaxCount)
		switch key {
		case keyRunning:
			i = 0
		case keyQueued:
			i = 1
		case keyWorkers:
			i = 2
		case keyDone:
			i, limit = 3, math.MaxInt64
		case keyAppUtilization, keyCPUUtilization:
			j := 0
			if key == keyCPUUtilization {
				j = 1
			}
			if hasU[j] {
				return hedge.Load{}, fmt.Errorf("%w: %s is given twice", ErrLoadMalformed, key)
			}
			u, err := parseUtilization(key, val)
			if err != nil {
				return hedge.Load{}, err
			}
			util[j], hasU[j] = u, true
			continue
		default:
			// Not ours, but every ORCA value is a number.
			if _, err := strconv.ParseFloat(val, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
				return hedge.Load{}, fmt.Errorf("%w: %s=%s: not a number", ErrLoadMalformed, clip(key), clip(val))
			}
			continue
		}
		if seen[i] {
			return hedge.Load{}, fmt.Errorf("%w: %s is given twice", ErrLoadMalformed, key)
		}
		n, err := parseCount(key, val, limit)
		if err != nil {
			return hedge.Load{}, err
		}
		counts[i], seen[i], named = n, true, true
	}
	switch {
	case named:
		return hedge.Load{Running: int(counts[0]), Queued: int(counts[1]), Workers: int(counts[2]), Done: counts[3]}, nil
	case hasU[0]:
		return fromUtilization(util[0]), nil
	case hasU[1]:
		return fromUtilization(util[1]), nil
	}
	return hedge.Load{}, fmt.Errorf("%w: %s has none of the hedge_* named metrics, %s or %s", ErrNoLoadReport, clip(s), keyAppUtilization, keyCPUUtilization)
}

// parseCount reads the value of a count: a non-negative integer, written
// as an integer or as a number with no fraction ("12", "12.0", "1.2e1").
// A finite count above limit reads as limit when limit is LoadMaxCount, and
// is out of range otherwise (hedge_done, whose limit is int64's).
func parseCount(key, val string, limit int64) (int64, error) {
	n, err := strconv.ParseInt(val, 10, 64)
	switch {
	case err == nil && n < 0:
		return 0, fmt.Errorf("%w: %s=%s: a count cannot be negative", ErrLoadMalformed, key, clip(val))
	case err == nil && n > limit && limit == LoadMaxCount:
		return LoadMaxCount, nil
	case err == nil && n > limit:
		return 0, fmt.Errorf("%w: %s=%s: out of range", ErrLoadMalformed, key, clip(val))
	case err == nil:
		return n, nil
	}
	f, ferr := strconv.ParseFloat(val, 64)
	switch {
	case ferr != nil && !errors.Is(ferr, strconv.ErrRange), math.IsNaN(f):
		return 0, fmt.Errorf("%w: %s=%s: not a number", ErrLoadMalformed, key, clip(val))
	case f < 0:
		return 0, fmt.Errorf("%w: %s=%s: a count cannot be negative", ErrLoadMalformed, key, clip(val))
	case math.IsInf(f, 1):
		return 0, fmt.Errorf("%w: %s=%s: not finite", ErrLoadMalformed, key, clip(val))
	case f != math.Trunc(f):
		return 0, fmt.Errorf("%w: %s=%s: a count must be a whole number", ErrLoadMalformed, key, clip(val))
	case f > float64(limit) && limit == LoadMaxCount:
		return LoadMaxCount, nil
	case f >= 0x1p63 || int64(f) > limit:
		return 0, fmt.Errorf("%w: %s=%s: out of range", ErrLoadMalformed, key, clip(val))
	}
	return int64(f), nil
}

// parseUtilization reads the value of a utilization: a finite number, not
// negative.
func parseUtilization(key, val string) (float64, error) {
	u, err := strconv.ParseFloat(val, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(u):
		return 0, fmt.Errorf("%w: %s=%s: not a number", ErrLoadMalformed, key, clip(val))
	case u < 0:
		return 0, fmt.Errorf("%w: %s=%s: a utilization cannot be negative", ErrLoadMalformed, key, clip(val))
	case math.IsInf(u, 1):
		return 0, fmt.Errorf("%w: %s=%s: out of range", ErrLoadMalformed, key, clip(val))
	}
	return u, nil
}

// fromUtilization is the Load of a server that reports utilization u only
// (see ParseLoad).
func fromUtilization(u float64) hedge.Load {
	n := int(math.Round(min(u, maxUtilization) * LoadUtilizationWorkers))
	r := min(n, LoadUtilizationWorkers)
	return hedge.Load{Running: r, Queued: n - r, Workers: LoadUtilizationWorkers}
}

// clip quotes s for an error message, cut short if it is long: a header
// is the peer's to fill.
func clip(s string) string {
	const most = 48
	if len(s) > most {
		return strconv.Quote(s[:most]) + "..."
	}
	return strconv.Quote(s)
}
