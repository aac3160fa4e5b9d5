package advise

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Format is an input format of recorded latencies.
type Format int

// The input formats.
const (
	// Auto guesses the format from the content (see Detect).
	Auto Format = iota
	// Durations is one duration per line, with its unit: "12.5ms".
	Durations
	// CSV is comma-separated values with a header row; Fields.Latency
	// names the latency column.
	CSV
	// JSONLines is one JSON object per line; Fields names the latency,
	// replica and time fields.
	JSONLines
	// PromText is a Prometheus text-exposition scrape holding the _bucket
	// series of one histogram.
	PromText
	// PromJSON is a Prometheus HTTP API query result (vector or matrix)
	// over the _bucket series of a histogram, saved as JSON.
	PromJSON
)

var formatNames = []string{"auto", "durations", "csv", "jsonl", "prom", "prom-json"}

// String returns the format's name as --format takes it.
func (f Format) String() string {
	if f >= 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat parses a format name.
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if n == s {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("unknown format %q: use one of %s", s, strings.Join(formatNames, ", "))
}

// Fields names where a structured input keeps what advise reads.
type Fields struct {
	// Latency is the latency field (JSON lines) or column (CSV): a name,
	// or for CSV a 1-based column number. Empty means "latency".
	Latency string
	// Replica, if set, is the field or column naming the replica (host,
	// address) that served the request.
	Replica string
	// Time, if set, is the field or column holding when the request was
	// sent: RFC 3339 text, or a number of seconds since the Unix epoch
	// (numbers above 1e11 are taken as milliseconds).
	Time string
	// Unit is the unit of latencies given as bare numbers (12.5 with Unit
	// time.Millisecond is 12.5ms). Zero refuses bare numbers, except in a
	// Prometheus histogram, whose bounds are in seconds unless the metric
	// name ends in _milliseconds or _microseconds.
	Unit time.Duration
	// Metric, for the Prometheus formats, is the histogram's name, with
	// or without _bucket. Empty accepts the input's only histogram.
	Metric string
	// MaxBinned, for the Prometheus formats, is the most latencies a
	// histogram is spread into: larger counts are scaled down to it,
	// keeping every bucket's share. Zero means MaxBinned (1,000,000).
	// The work of Advise grows with the latencies, so a server taking
	// small uploads bounds it here.
	MaxBinned int
}

func (f Fields) latency() string {
	if f.Latency == "" {
		return "latency"
	}
	return f.Latency
}

// ParseError is a mistake at one line of the input.
type ParseError struct {
	Line int    // 1-based; 0 for the input as a whole
	Msg  string // what was found and what was expected
	err  error  // a sentinel it wraps (ErrCount), or nil
}

// Unwrap returns the sentinel error the mistake matches, if any.
func (e *ParseError) Unwrap() error { return e.err }

// Error returns "line N: msg".
func (e *ParseError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

func lineErr(line int, format string, a ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, a...)}
}

// maxLine is the longest line the line-based parsers read.
const maxLine = 1 << 20

// Detect guesses the format of an input from its first bytes: a
// Prometheus API result (a JSON object with "resultType": PromJSON), other
// JSON objects (JSONLines), "# HELP"/"# TYPE" or a name{le=...} line (PromText), a
// header row with a comma (CSV), else Durations.
func Detect(head []byte) Format {
	s := strings.TrimLeft(string(head), " \t\r\n\ufeff")
	// Comment lines (other than a scrape's HELP and TYPE) say nothing of
	// the format.
	for strings.HasPrefix(s, "#") && !strings.HasPrefix(s, "# HELP") && !strings.HasPrefix(s, "# TYPE") {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		s = strings.TrimLeft(s[i+1:], " \t\r\n")
	}
	switch {
	case strings.HasPrefix(s, "{"):
		if strings.Contains(s, `"resultType"`) {
			return PromJSON
		}
		return JSONLines
	case strings.HasPrefix(s, "# HELP") || strings.HasPrefix(s, "# TYPE") || strings.Contains(firstLine(s), `le="`):
		return PromText
	case strings.Contains(firstLine(s), ","):
		return CSV
	}
	return Durations
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Parse reads a sample in format f (Auto: Detect on the first 4 KiB).
func Parse(r io.Reader, f Format, fl Fields) (*Sample, error) {
	if f == Auto {
		br := bufio.NewReaderSize(r, 4096)
		head, _ := br.Peek(4096)
		f, r = Detect(head), br
	}
	var s *Sample
	var err error
	switch f {
	case Durations:
		s, err = ParseDurations(r, fl.Unit)
	case CSV:
		s, err = ParseCSV(r, fl)
	case JSONLines:
		s, err = ParseJSONLines(r, fl)
	case PromText:
		s, err = ParsePromText(r, fl)
	case PromJSON:
		s, err = ParsePromJSON(r, fl)
	default:
		return nil, fmt.Errorf("unknown format %v: use one of %s", f, strings.Join(formatNames, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return s, nil
}

// ParseLatency parses one latency: a Go duration with its unit ("12.5ms",
// "850µs", "850us", "1.2s"; a space before the unit is allowed), or a bare
// number of unit (refused when unit is 0). Negative latencies are refused.
func ParseLatency(s string, unit time.Duration) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty: expected a latency such as 12.5ms")
	}
	// "12.5 ms": drop the space between number and unit.
	if i := strings.IndexByte(t, ' '); i > 0 && !strings.ContainsAny(t[i+1:], " ") {
		t = t[:i] + t[i+1:]
	}
	if d, err := time.ParseDuration(t); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("%q is negative: expected a latency >= 0", s)
		}
		return d, nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a latency: expected a duration with its unit, such as 12.5ms", s)
	}
	if unit <= 0 {
		return 0, fmt.Errorf("%q has no unit: write it as %sms (or s, us, ns), or say the unit of bare numbers (--unit ms)", s, t)
	}
	return fromUnits(v, unit, s)
}

// fromUnits converts v units to a Duration, refusing what a Duration
// cannot hold.
func fromUnits(v float64, unit time.Duration, orig string) (time.Duration, error) {
	ns := v * float64(unit)
	switch {
	case math.IsNaN(ns) || math.IsInf(ns, 0):
		return 0, fmt.Errorf("%q is not a finite latency", orig)
	case ns < 0:
		return 0, fmt.Errorf("%q is negative: expected a latency >= 0", orig)
	case ns >= math.MaxInt64:
		return 0, fmt.Errorf("%q is too long a latency: at most about 292 years", orig)
	}
	return time.Duration(math.Round(ns)), nil
}

// lines calls fn for each line of r with its 1-based number, skipping
// blank lines and lines starting with '#'.
func lines(r io.Reader, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return lineErr(n+1, "longer than %d bytes: expected one latency per line", maxLine)
		}
		return fmt.Errorf("reading: %w", err)
	}
	return nil
}

func tooMany(line int) error {
	return lineErr(line, "more than %d latencies: thin the sample first (keep every k-th line) or give a histogram", MaxSample)
}

// ParseDurations reads one latency per line ("12.5ms"); blank lines and
// lines starting with '#' are skipped. Bare numbers are in unit (0
// refuses them).
func ParseDurations(r io.Reader, unit time.Duration) (*Sample, error) {
	s := &Sample{Source: "durations"}
	err := lines(r, func(n int, line string) error {
		d, err := ParseLatency(line, unit)
		if err != nil {
			return lineErr(n, "%v", err)
		}
		if len(s.Latencies) >= MaxSample {
			return tooMany(n)
		}
		s.Latencies = append(s.Latencies, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(s.Latencies) == 0 {
		return nil, fmt.Errorf("%w: expected one latency per line, such as 12.5ms", ErrEmpty)
	}
	return s, nil
}

// ParseCSV reads comma-separated values whose first row names the
// columns. fl.Latency names the latency column (or gives its 1-based
// number); fl.Replica and fl.Time, if set, name optional columns.
func ParseCSV(r io.Reader, fl Fields) (*Sample, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.Comment = '#'
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: expected a header row naming the columns, then one row per request", ErrEmpty)
		}
		return nil, csvErr(err)
	}
	header = append([]string(nil), header...)
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff")
	}
	col := func(name string, required bool) (int, error) {
		if name == "" {
			return -1, nil
		}
		for i, h := range header {
			if strings.TrimSpace(h) == name {
				return i, nil
			}
		}
		if k, err := strconv.Atoi(name); err == nil && k >= 1 && k <= len(header) {
			return k - 1, nil
		}
		return -1, lineErr(1, "no column %q in the header (%s): name one of them, or give its number from 1", name, strings.Join(header, ", "))
	}
	li, err := col(fl.latency(), true)
	if err != nil {
		return nil, err
	}
	ri, err := col(fl.Replica, false)
	if err != nil {
		return nil, err
	}
	ti, err := col(fl.Time, false)
	if err != nil {
		return nil, err
	}
	s := &Sample{Source: "csv column " + strings.TrimSpace(header[li])}
	if ri >= 0 {
		s.Replicas = []string{}
	}
	if ti >= 0 {
		s.Times = []time.Time{}
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, csvErr(err)
		}
		line, _ := cr.FieldPos(0)
		get := func(i int, what string) (string, error) {
			if i >= len(rec) {
				return "", lineErr(line, "%d fields: expected the %s in column %d (%s)", len(rec), what, i+1, header[i])
			}
			return rec[i], nil
		}
		v, err := get(li, "latency")
		if err != nil {
			return nil, err
		}
		d, err := ParseLatency(v, fl.Unit)
		if err != nil {
			return nil, lineErr(line, "column %s: %v", header[li], err)
		}
		if len(s.Latencies) >= MaxSample {
			return nil, tooMany(line)
		}
		s.Latencies = append(s.Latencies, d)
		if ri >= 0 {
			v, err := get(ri, "replica")
			if err != nil {
				return nil, err
			}
			s.Replicas = append(s.Replicas, strings.TrimSpace(v))
		}
		if ti >= 0 {
			v, err := get(ti, "time")
			if err != nil {
				return nil, err
			}
			t, err := parseTime(json.RawMessage(strconv.Quote(strings.TrimSpace(v))))
			if err != nil {
				return nil, lineErr(line, "column %s: %v", header[ti], err)
			}
			s.Times = append(s.Times, t)
		}
	}
	if len(s.Latencies) == 0 {
		return nil, fmt.Errorf("%w: the CSV has a header and no rows", ErrEmpty)
	}
	return s, nil
}

func csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return lineErr(pe.Line, "%v: expected comma-separated values with a header row", pe.Err)
	}
	return fmt.Errorf("reading CSV: %w", err)
}

// ParseJSONLines reads one JSON object per line: fl.Latency (default
// "latency") is a string with a unit ("12.5ms") or a number of fl.Unit;
// fl.Replica and fl.Time, if set, name optional fields. A field name with
// dots ("http.latency") reaches into nested objects.
func ParseJSONLines(r io.Reader, fl Fields) (*Sample, error) {
	s := &Sample{Source: "json lines field " + fl.latency()}
	if fl.Replica != "" {
		s.Replicas = []string{}
	}
	if fl.Time != "" {
		s.Times = []time.Time{}
	}
	err := lines(r, func(n int, line string) error {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil || obj == nil {
			return lineErr(n, "not a JSON object: expected one object per line, such as {\"%s\": \"12.5ms\"}", fl.latency())
		}
		raw, ok := lookup(obj, fl.latency())
		if !ok {
			return lineErr(n, "no field %q: expected it in every object (name the latency field with --field)", fl.latency())
		}
		d, err := jsonLatency(raw, fl.Unit)
		if err != nil {
			return lineErr(n, "field %s: %v", fl.latency(), err)
		}
		if len(s.Latencies) >= MaxSample {
			return tooMany(n)
		}
		s.Latencies = append(s.Latencies, d)
		if fl.Replica != "" {
			rep := ""
			if raw, ok := lookup(obj, fl.Replica); ok {
				var v any
				_ = json.Unmarshal(raw, &v)
				switch x := v.(type) {
				case string:
					rep = x
				case float64:
					rep = strconv.FormatFloat(x, 'g', -1, 64)
				case nil:
				default:
					return lineErr(n, "field %s: %s: expected a string or number naming the replica", fl.Replica, raw)
				}
			}
			s.Replicas = append(s.Replicas, rep)
		}
		if fl.Time != "" {
			var t time.Time
			if raw, ok := lookup(obj, fl.Time); ok {
				if t, err = parseTime(raw); err != nil {
					return lineErr(n, "field %s: %v", fl.Time, err)
				}
			}
			s.Times = append(s.Times, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(s.Latencies) == 0 {
		return nil, fmt.Errorf("%w: expected one JSON object per line, such as {\"%s\": \"12.5ms\"}", ErrEmpty, fl.latency())
	}
	return s, nil
}

// lookup finds a field, following dots into nested objects when the
// dotted name itself is not a field.
func lookup(obj map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if raw, ok := obj[name]; ok {
		return raw, true
	}
	head, rest, ok := strings.Cut(name, ".")
	if !ok {
		return nil, false
	}
	raw, ok := obj[head]
	if !ok {
		return nil, false
	}
	var inner map[string]json.RawMessage
	if json.Unmarshal(raw, &inner) != nil || inner == nil {
		return nil, false
	}
	return lookup(inner, rest)
}

// jsonLatency decodes a latency given as a string with a unit or a number
// of unit.
func jsonLatency(raw json.RawMessage, unit time.Duration) (time.Duration, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return 0, fmt.Errorf("%s: expected a string such as \"12.5ms\"", raw)
		}
		return ParseLatency(str, unit)
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("%s: expected a string such as \"12.5ms\" or a number with --unit", raw)
	}
	if unit <= 0 {
		return 0, fmt.Errorf("%s has no unit: say the unit of bare numbers (--unit ms), or write \"%sms\"", raw, raw)
	}
	return fromUnits(v, unit, string(raw))
}

// parseTime decodes a send time: RFC 3339 text, or a number (or numeric
// string) of seconds since the Unix epoch, milliseconds above 1e11.
func parseTime(raw json.RawMessage) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	var str string
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &str); err != nil {
			return time.Time{}, fmt.Errorf("%s: expected an RFC 3339 time or Unix seconds", raw)
		}
	} else {
		str = string(raw)
	}
	if t, err := time.Parse(time.RFC3339Nano, str); err == nil {
		return t, nil
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e15 {
		return time.Time{}, fmt.Errorf("%q: expected an RFC 3339 time such as 2024-05-01T12:00:00.123Z, or Unix seconds", str)
	}
	if v > 1e11 {
		v /= 1e3
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
}
