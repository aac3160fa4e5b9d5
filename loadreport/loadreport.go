package loadreport

import (
	"errors"
	"net/http"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/wire"
)

// Header is the response header that carries a server's load report, in
// ORCA's TEXT form (see the package doc). It is in canonical form.
const Header = wire.LoadHeader

// UtilizationWorkers is the Workers of a Load that Parse makes of a report
// that carries only a utilization (an ORCA server's that is not the
// toolkit's): a utilization u reads as round(u*UtilizationWorkers)
// requests present.
const UtilizationWorkers = wire.LoadUtilizationWorkers

// MaxCount is the most that Parse reads of hedge_running, hedge_queued
// and hedge_workers: a larger count, however large, reads as MaxCount. No
// server holds a billion requests; a count beyond that says only that it
// is as busy as can be, and capped it stays one that a client can add to
// others without overflow.
const MaxCount = wire.LoadMaxCount

// Errors of Parse and Handler. Match them with errors.Is.
var (
	// ErrMalformed is wrapped by Parse's error for a header that is not a
	// report in ORCA's TEXT form, or whose values it cannot read: no
	// "TEXT " prefix (the JSON and BIN forms included), a pair without
	// '=', a value that is not a number, a count that is negative, not an
	// integer or infinite, a hedge_done beyond int64, a utilization that
	// is negative or not finite, or a key that it reads given twice.
	ErrMalformed = wire.ErrLoadMalformed
	// ErrNoReport is wrapped by Parse's error for a header in the TEXT
	// form that reports nothing Parse reads: none of the hedge_* named
	// metrics, application_utilization or cpu_utilization. An empty
	// header is no report either.
	ErrNoReport = wire.ErrNoLoadReport
	// ErrInvalidConfig is wrapped by Handler's error for a mistaken
	// argument.
	ErrInvalidConfig = errors.New("loadreport: invalid configuration")
)

// Format returns l as the value of Header: "TEXT application_utilization=U,
// named_metrics.hedge_running=R, named_metrics.hedge_queued=Q,
// named_metrics.hedge_workers=W, named_metrics.hedge_done=D", where U is
// (R+Q)/W to three decimals (W 0 read as 1). A negative count, which no
// server has, is written as 0, so that Parse reads whatever Format writes.
func Format(l hedge.Load) string { return wire.FormatLoad(l) }

// Set sets Header in h to l's report (Format). Server middleware calls it
// before the response's status is written; Writer does it for a handler.
func Set(h http.Header, l hedge.Load) { wire.SetLoad(h, l) }

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
func Parse(v string) (hedge.Load, error) { return wire.ParseLoad(v) }
