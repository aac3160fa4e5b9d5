package loadreport

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tailcut/hedge"
)

// Header is the response header that carries a server's load report, in
// ORCA's TEXT form (see the package doc). It is in canonical form.
const Header = "Endpoint-Load-Metrics"

// The keys of the report that Format writes and Parse reads.
const (
	keyAppUtilization = "application_utilization"
	keyCPUUtilization = "cpu_utilization"
	keyRunning        = "named_metrics.hedge_running"
	keyQueued         = "named_metrics.hedge_queued"
	keyWorkers        = "named_metrics.hedge_workers"
	keyDone           = "named_metrics.hedge_done"
)

// UtilizationWorkers is the Workers of a Load that Parse makes of a report
// that carries only a utilization (an ORCA server's that is not the
// toolkit's): a utilization u reads as round(u*UtilizationWorkers)
// requests present.
const UtilizationWorkers = 100

// MaxCount is the most that Parse reads of hedge_running, hedge_queued
// and hedge_workers: a larger count, however large, reads as MaxCount. No
// server holds a billion requests; a count beyond that says only that it
// is as busy as can be, and capped it stays one that a client can add to
// others without overflow.
const MaxCount = 1 << 30

// maxUtilization caps the utilization that Parse reads, so that the
// requests present it makes of it stay few: 100 is a hundred times more
// work than workers.
const maxUtilization = 100

// Errors of Parse and Handler. Match them with errors.Is.
var (
	// ErrMalformed is wrapped by Parse's error for a header that is not a
	// report in ORCA's TEXT form, or whose values it cannot read: no
	// "TEXT " prefix (the JSON and BIN forms included), a pair without
	// '=', a value that is not a number, a count that is negative, not an
	// integer or infinite, a hedge_done beyond int64, a utilization that
	// is negative or not finite, or a key that it reads given twice.
	ErrMalformed = errors.New("loadreport: malformed load report")
	// ErrNoReport is wrapped by Parse's error for a header in the TEXT
	// form that reports nothing Parse reads: none of the hedge_* named
	// metrics, application_utilization or cpu_utilization. An empty
	// header is no report either.
	ErrNoReport = errors.New("loadreport: the header reports no load")
	// ErrInvalidConfig is wrapped by Handler's error for a mistaken
	// argument.
	ErrInvalidConfig = errors.New("loadreport: invalid configuration")
)

// Format returns l as the value of Header: "TEXT application_utilization=U,
// named_metrics.hedge_running=R, named_metrics.hedge_queued=Q,
// named_metrics.hedge_workers=W, named_metrics.hedge_done=D", where U is
// (R+Q)/W to three decimals (W 0 read as 1). A negative count, which no
// server has, is written as 0, so that Parse reads whatever Format writes.
func Format(l hedge.Load) string {
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

// Set sets Header in h to l's report (Format). Server middleware calls it
// before the response's status is written; Writer does it for a handler.
func Set(h http.Header, l hedge.Load) {
	h[Header] = []string{Format(l)}
}

// Parse reads a value of Header: "TEXT " followed by comma-separated
// key=value pairs, spaces allowed around each key and value, empty pairs
// skipped, every value a number. It reads the hedge_* named metrics of
// Format into the Load's fields; a hedge_* metric absent is 0 (Workers 0
// is unknown, Done 0 not counted); a count of Running, Queued or Workers
// above MaxCount reads as MaxCount. Without any of them it reads
// application_utilization, or failing that cpu_utilization, as an ORCA
// server's report (see the package doc): UtilizationWorkers workers, and
// round(u*UtilizationWorkers) requests present, u capped at 100, at most
// UtilizationWorkers of them running. Other keys (mem_utilization,
// rps_fractional, eps, utilization.*, request_cost.*, other
// named_metrics.*) are ignored, as is application_utilization when the
// hedge_* metrics are there.
//
// The error matches ErrMalformed for a header that is not such a report
// or that Parse cannot read, and ErrNoReport for one that reports none of
// the keys it reads.
func Parse(v string) (hedge.Load, error) {
	s := strings.TrimSpace(v)
	if s == "" {
		return hedge.Load{}, fmt.Errorf("%w: the %s header is empty", ErrNoReport, Header)
	}
	rest, ok := strings.CutPrefix(s, "TEXT")
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return hedge.Load{}, fmt.Errorf("%w: %s: only ORCA's TEXT form (\"TEXT key=value, ...\") is read, not its JSON or BIN forms", ErrMalformed, clip(s))
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
			return hedge.Load{}, fmt.Errorf("%w: the pair %s has no '=': write key=value", ErrMalformed, clip(pair))
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "" {
			return hedge.Load{}, fmt.Errorf("%w: the pair %s has no key", ErrMalformed, clip(pair))
		}
		i, limit := -1, int64(MaxCount)
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
				return hedge.Load{}, fmt.Errorf("%w: %s is given twice", ErrMalformed, key)
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
				return hedge.Load{}, fmt.Errorf("%w: %s=%s: not a number", ErrMalformed, clip(key), clip(val))
			}
			continue
		}
		if seen[i] {
			return hedge.Load{}, fmt.Errorf("%w: %s is given twice", ErrMalformed, key)
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
	return hedge.Load{}, fmt.Errorf("%w: %s has none of the hedge_* named metrics, %s or %s", ErrNoReport, clip(s), keyAppUtilization, keyCPUUtilization)
}

// parseCount reads the value of a count: a non-negative integer, written
// as an integer or as a number with no fraction ("12", "12.0", "1.2e1").
// A finite count above limit reads as limit when limit is MaxCount, and
// is out of range otherwise (hedge_done, whose limit is int64's).
func parseCount(key, val string, limit int64) (int64, error) {
	n, err := strconv.ParseInt(val, 10, 64)
	switch {
	case err == nil && n < 0:
		return 0, fmt.Errorf("%w: %s=%s: a count cannot be negative", ErrMalformed, key, clip(val))
	case err == nil && n > limit && limit == MaxCount:
		return MaxCount, nil
	case err == nil && n > limit:
		return 0, fmt.Errorf("%w: %s=%s: out of range", ErrMalformed, key, clip(val))
	case err == nil:
		return n, nil
	}
	f, ferr := strconv.ParseFloat(val, 64)
	switch {
	case ferr != nil && !errors.Is(ferr, strconv.ErrRange), math.IsNaN(f):
		return 0, fmt.Errorf("%w: %s=%s: not a number", ErrMalformed, key, clip(val))
	case f < 0:
		return 0, fmt.Errorf("%w: %s=%s: a count cannot be negative", ErrMalformed, key, clip(val))
	case math.IsInf(f, 1):
		return 0, fmt.Errorf("%w: %s=%s: not finite", ErrMalformed, key, clip(val))
	case f != math.Trunc(f):
		return 0, fmt.Errorf("%w: %s=%s: a count must be a whole number", ErrMalformed, key, clip(val))
	case f > float64(limit) && limit == MaxCount:
		return MaxCount, nil
	case f >= 0x1p63 || int64(f) > limit:
		return 0, fmt.Errorf("%w: %s=%s: out of range", ErrMalformed, key, clip(val))
	}
	return int64(f), nil
}

// parseUtilization reads the value of a utilization: a finite number, not
// negative.
func parseUtilization(key, val string) (float64, error) {
	u, err := strconv.ParseFloat(val, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(u):
		return 0, fmt.Errorf("%w: %s=%s: not a number", ErrMalformed, key, clip(val))
	case u < 0:
		return 0, fmt.Errorf("%w: %s=%s: a utilization cannot be negative", ErrMalformed, key, clip(val))
	case math.IsInf(u, 1):
		return 0, fmt.Errorf("%w: %s=%s: out of range", ErrMalformed, key, clip(val))
	}
	return u, nil
}

// fromUtilization is the Load of a server that reports utilization u only
// (see Parse).
func fromUtilization(u float64) hedge.Load {
	n := int(math.Round(min(u, maxUtilization) * UtilizationWorkers))
	r := min(n, UtilizationWorkers)
	return hedge.Load{Running: r, Queued: n - r, Workers: UtilizationWorkers}
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
