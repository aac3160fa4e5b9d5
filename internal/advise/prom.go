package advise

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MaxBinned is the most latencies a histogram is spread into when
// Fields.MaxBinned is zero: larger counts are scaled down to it, keeping
// every bucket's share.
const MaxBinned = 1_000_000

// MaxCount is the largest count a histogram's bucket may hold: 2^53, the
// largest whole number a float64 counts exactly (about 9.0e15, a million
// requests a second for 285 years). A larger count is no counter's.
const MaxCount = 1 << 53

// ErrCount is wrapped by the error of a histogram whose counts exceed
// MaxCount.
var ErrCount = errors.New("histogram count too large")

// maxPromInput is the most bytes a Prometheus input may have.
const maxPromInput = 256 << 20

// histogram is a cumulative histogram: counts[i] latencies at or below
// bounds[i] (ascending; the last may be +Inf), in seconds unless scale says.
type histogram struct {
	name   string
	bounds []float64
	counts []float64
}

// ParsePromText reads a Prometheus text-exposition scrape and spreads the
// buckets of one histogram (fl.Metric, or the only one) into a sample:
// the latencies of bucket (lo, hi] evenly across it. Series of the
// histogram with different labels (instances, say) are added together;
// they must share their bucket bounds. Bounds are in seconds, the
// Prometheus base unit, unless the name ends in _milliseconds or
// _microseconds, or fl.Unit says otherwise.
func ParsePromText(r io.Reader, fl Fields) (*Sample, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPromInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(data) > maxPromInput {
		return nil, fmt.Errorf("more than %d MiB: give the histogram's series only", maxPromInput>>20)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		// expfmt's messages name the line.
		return nil, fmt.Errorf("%w: expected Prometheus text exposition with a histogram's _bucket{le=\"...\"} series", err)
	}
	want := strings.TrimSuffix(fl.Metric, "_bucket")
	var hs []histogram
	var names []string
	for name, mf := range fams {
		switch {
		case mf.GetType() == dto.MetricType_HISTOGRAM:
			if want != "" && name != want {
				names = append(names, name)
				continue
			}
			h, err := fromTypedHistogram(name, mf)
			if err != nil {
				return nil, err
			}
			hs = append(hs, h)
			names = append(names, name)
		case strings.HasSuffix(name, "_bucket"):
			base := strings.TrimSuffix(name, "_bucket")
			names = append(names, base)
			if want != "" && base != want {
				continue
			}
			h, err := fromUntypedBuckets(base, mf)
			if err != nil {
				return nil, err
			}
			if h != nil {
				hs = append(hs, *h)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	switch {
	case len(hs) == 0 && want != "":
		return nil, &ParseError{Msg: fmt.Sprintf("no histogram %q in the input (it has %s): name one with --metric", want, listOr(names, "none"))}
	case len(hs) == 0:
		return nil, fmt.Errorf("%w: no histogram (no _bucket series with an le label): give a scrape holding one", ErrEmpty)
	case len(hs) > 1:
		slices.SortFunc(hs, func(a, b histogram) int { return strings.Compare(a.name, b.name) })
		var ns []string
		for _, h := range hs {
			ns = append(ns, h.name)
		}
		return nil, &ParseError{Msg: fmt.Sprintf("%d histograms (%s): name the operation's with --metric", len(hs), strings.Join(ns, ", "))}
	}
	return hs[0].sample("prometheus histogram "+hs[0].name, fl.Unit, fl.MaxBinned)
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}

// fromTypedHistogram adds up the series of a histogram family.
func fromTypedHistogram(name string, mf *dto.MetricFamily) (histogram, error) {
	h := histogram{name: name}
	for i, m := range mf.GetMetric() {
		hg := m.GetHistogram()
		var bounds, counts []float64
		for _, b := range hg.GetBucket() {
			c := float64(b.GetCumulativeCount())
			if b.CumulativeCountFloat != nil {
				c = b.GetCumulativeCountFloat()
			}
			bounds, counts = append(bounds, b.GetUpperBound()), append(counts, c)
		}
		total := float64(hg.GetSampleCount())
		if hg.SampleCountFloat != nil {
			total = hg.GetSampleCountFloat()
		}
		if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
			bounds, counts = append(bounds, math.Inf(1)), append(counts, total)
		}
		if err := h.add(bounds, counts, fmt.Sprintf("series %d of %s", i+1, name)); err != nil {
			return h, err
		}
	}
	return h, nil
}

// fromUntypedBuckets adds up name_bucket series given without a TYPE line.
func fromUntypedBuckets(base string, mf *dto.MetricFamily) (*histogram, error) {
	type series struct {
		bounds, counts []float64
	}
	groups := map[string]*series{}
	for _, m := range mf.GetMetric() {
		le := ""
		var key []string
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "le" {
				le = lp.GetValue()
				continue
			}
			key = append(key, lp.GetName()+"="+lp.GetValue())
		}
		if le == "" {
			continue
		}
		b, err := parseBound(le)
		if err != nil {
			return nil, &ParseError{Msg: fmt.Sprintf("%s_bucket{le=%q}: %v", base, le, err)}
		}
		v := m.GetUntyped().GetValue()
		if m.Counter != nil {
			v = m.GetCounter().GetValue()
		}
		if m.Gauge != nil {
			v = m.GetGauge().GetValue()
		}
		slices.Sort(key)
		k := strings.Join(key, ",")
		g := groups[k]
		if g == nil {
			g = &series{}
			groups[k] = g
		}
		g.bounds, g.counts = append(g.bounds, b), append(g.counts, v)
	}
	if len(groups) == 0 {
		return nil, nil
	}
	h := &histogram{name: base}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g := groups[k]
		if err := h.add(g.bounds, g.counts, fmt.Sprintf("%s_bucket{%s}", base, k)); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func parseBound(le string) (float64, error) {
	b, err := strconv.ParseFloat(strings.TrimSpace(le), 64)
	if err != nil || math.IsNaN(b) || b < 0 {
		return 0, errors.New("le is not a bound >= 0: expected a number of seconds or +Inf")
	}
	return b, nil
}

// add adds one series (bounds in any order) to h.
func (h *histogram) add(bounds, counts []float64, what string) error {
	idx := make([]int, len(bounds))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return bounds[idx[a]] < bounds[idx[b]] })
	bs := make([]float64, len(idx))
	cs := make([]float64, len(idx))
	for i, j := range idx {
		bs[i], cs[i] = bounds[j], counts[j]
		if math.IsNaN(cs[i]) || math.IsInf(cs[i], 0) || cs[i] < 0 {
			return &ParseError{Msg: fmt.Sprintf("%s: bucket le=%g has count %v: expected a count >= 0", what, bs[i], cs[i])}
		}
		if cs[i] > MaxCount {
			return countErr(fmt.Sprintf("%s: bucket le=%g", what, bs[i]), cs[i])
		}
		if i > 0 && bs[i] == bs[i-1] {
			return &ParseError{Msg: fmt.Sprintf("%s: bucket le=%g is given twice: select one series per label set", what, bs[i])}
		}
	}
	if h.bounds == nil {
		h.bounds, h.counts = bs, cs
		return nil
	}
	if !slices.Equal(h.bounds, bs) {
		return &ParseError{Msg: fmt.Sprintf("%s has other bucket bounds than the series before it: give series with the same buckets (select one instance, or sum by (le))", what)}
	}
	for i := range cs {
		h.counts[i] += cs[i]
	}
	return nil
}

// countErr is the error of a count above MaxCount at where.
func countErr(where string, count float64) error {
	return &ParseError{Msg: fmt.Sprintf("%s counts %.3g, more than any counter holds: give counts of at most 2^53 (about 9.0e15) observations, such as a counter's increase() over an hour or a day", where, count), err: ErrCount}
}

// sample spreads h into at most maxBinned latencies (0: MaxBinned).
func (h *histogram) sample(source string, unit time.Duration, maxBinned int) (*Sample, error) {
	scale := unit
	switch {
	case scale > 0:
	case strings.HasSuffix(h.name, "_milliseconds") || strings.HasSuffix(h.name, "_ms"):
		scale = time.Millisecond
	case strings.HasSuffix(h.name, "_microseconds") || strings.HasSuffix(h.name, "_us"):
		scale = time.Microsecond
	default:
		scale = time.Second
	}
	// Per-bucket counts from the cumulative ones.
	n := len(h.bounds)
	per := make([]float64, n)
	prev := 0.0
	for i, c := range h.counts {
		if c < prev-1e-9*math.Max(1, prev) {
			return nil, &ParseError{Msg: fmt.Sprintf("bucket le=%g counts %g, fewer than the %g of the bucket below: bucket counts are cumulative and cannot fall (a counter reset? query increase() over a range without one)", h.bounds[i], c, prev)}
		}
		per[i] = math.Max(0, c-prev)
		prev = math.Max(prev, c)
	}
	total := prev
	if !(total >= 0.5) {
		return nil, fmt.Errorf("%w: histogram %s has no observations", ErrEmpty, h.name)
	}
	if total > MaxCount {
		return nil, countErr(fmt.Sprintf("histogram %s, its series added together,", h.name), total)
	}
	target := total
	if maxBinned <= 0 {
		maxBinned = MaxBinned
	}
	if limit := float64(maxBinned); target > limit {
		target = limit
	}
	counts := apportion(per, target/total)
	s := &Sample{Source: source, Binned: true}
	lo := 0.0
	var inf int
	for i, c := range counts {
		hi := h.bounds[i]
		if math.IsInf(hi, 1) {
			inf = c
			hi = lo
		}
		for j := range c {
			v := lo + (hi-lo)*(float64(j)+0.5)/float64(c)
			d, err := fromUnits(v, scale, strconv.FormatFloat(v, 'g', -1, 64))
			if err != nil {
				return nil, &ParseError{Msg: fmt.Sprintf("bucket le=%g: %v", h.bounds[i], err)}
			}
			s.Latencies = append(s.Latencies, d)
		}
		if !math.IsInf(h.bounds[i], 1) {
			lo = h.bounds[i]
		}
	}
	s.Notes = append(s.Notes, fmt.Sprintf("The histogram's %.0f observations are spread evenly within their buckets (%d buckets, bounds in %v): each quantile is known only to within its bucket.", total, n, scale))
	if target < total {
		s.Notes = append(s.Notes, fmt.Sprintf("The counts were scaled down to %d latencies, keeping each bucket's share.", len(s.Latencies)))
	}
	if inf > 0 {
		share := float64(inf) / float64(len(s.Latencies))
		s.Notes = append(s.Notes, fmt.Sprintf("%.3g%% of the latencies are above the highest finite bound, %v, and are taken as that bound: the tail beyond it is unknown, and any quantile there is a lower bound.", 100*share, time.Duration(lo*float64(scale))))
	}
	if len(s.Latencies) == 0 {
		return nil, fmt.Errorf("%w: histogram %s has no observations", ErrEmpty, h.name)
	}
	return s, nil
}

// apportion scales counts by f and rounds them to integers whose sum is the
// rounded scaled total (largest remainders).
func apportion(counts []float64, f float64) []int {
	out := make([]int, len(counts))
	sum := 0.0
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	got := 0
	for i, c := range counts {
		x := c * f
		sum += x
		out[i] = int(math.Floor(x))
		got += out[i]
		rems = append(rems, rem{i, x - math.Floor(x)})
	}
	want := int(math.Round(sum))
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; got < want && k < len(rems); k++ {
		out[rems[k].i]++
		got++
	}
	return out
}

// ParsePromJSON reads a Prometheus HTTP API query result saved as JSON
// (the body of /api/v1/query or /api/v1/query_range) over a histogram's
// _bucket series, such as the result of
// sum by (le) (increase(http_request_duration_seconds_bucket[1h])). A
// vector gives each bucket's value; a matrix gives each bucket's last value
// minus its first (the increase of a cumulative counter over the range).
// Series are grouped by their labels other than le and __name__, and the
// groups added together.
func ParsePromJSON(r io.Reader, fl Fields) (*Sample, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPromInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(data) > maxPromInput {
		return nil, fmt.Errorf("more than %d MiB: query the histogram's buckets only", maxPromInput>>20)
	}
	var doc struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   *struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string   `json:"metric"`
				Value  []json.RawMessage   `json:"value"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, jsonDocErr(data, err)
	}
	switch {
	case doc.Status == "error":
		return nil, &ParseError{Msg: fmt.Sprintf("the query failed: %s: fix the query and save its result again", doc.Error)}
	case doc.Data == nil:
		return nil, &ParseError{Line: 1, Msg: "no \"data\" object: expected the JSON body of Prometheus /api/v1/query, {\"status\": \"success\", \"data\": {\"resultType\": \"vector\", \"result\": [...]}}"}
	}
	rt := doc.Data.ResultType
	if rt != "vector" && rt != "matrix" {
		return nil, &ParseError{Msg: fmt.Sprintf("resultType %q: expected a vector or a matrix over the _bucket series", rt)}
	}
	want := strings.TrimSuffix(fl.Metric, "_bucket")
	type series struct{ bounds, counts []float64 }
	groups := map[string]*series{}
	name := want
	for i, res := range doc.Data.Result {
		le, ok := res.Metric["le"]
		if !ok {
			continue
		}
		if n := res.Metric["__name__"]; n != "" {
			base := strings.TrimSuffix(n, "_bucket")
			if want != "" && base != want {
				continue
			}
			if name == "" {
				name = base
			}
		}
		b, err := parseBound(le)
		if err != nil {
			return nil, &ParseError{Msg: fmt.Sprintf("result[%d] le=%q: %v", i, le, err)}
		}
		var v float64
		if rt == "vector" {
			if v, err = promValue(res.Value); err != nil {
				return nil, &ParseError{Msg: fmt.Sprintf("result[%d].value: %v", i, err)}
			}
		} else {
			if len(res.Values) == 0 {
				return nil, &ParseError{Msg: fmt.Sprintf("result[%d].values is empty: expected [time, \"count\"] pairs", i)}
			}
			first, err := promValue(res.Values[0])
			if err != nil {
				return nil, &ParseError{Msg: fmt.Sprintf("result[%d].values[0]: %v", i, err)}
			}
			last, err := promValue(res.Values[len(res.Values)-1])
			if err != nil {
				return nil, &ParseError{Msg: fmt.Sprintf("result[%d].values[%d]: %v", i, len(res.Values)-1, err)}
			}
			v = last - first
		}
		var key []string
		for k, val := range res.Metric {
			if k != "le" && k != "__name__" {
				key = append(key, k+"="+val)
			}
		}
		slices.Sort(key)
		k := strings.Join(key, ",")
		g := groups[k]
		if g == nil {
			g = &series{}
			groups[k] = g
		}
		g.bounds, g.counts = append(g.bounds, b), append(g.counts, v)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%w: no series with an le label: query the histogram's _bucket series, e.g. sum by (le) (increase(x_bucket[1h]))", ErrEmpty)
	}
	if name == "" {
		name = "histogram"
	}
	h := &histogram{name: name}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g := groups[k]
		if len(g.bounds) == 0 || !math.IsInf(slices.Max(g.bounds), 1) {
			return nil, &ParseError{Msg: fmt.Sprintf("series {%s} has no le=\"+Inf\" bucket: query every bucket of the histogram", k)}
		}
		if err := h.add(g.bounds, g.counts, "series {"+k+"}"); err != nil {
			return nil, err
		}
	}
	return h.sample("prometheus query result "+name, fl.Unit, fl.MaxBinned)
}

// promValue decodes a [time, "value"] pair.
func promValue(pair []json.RawMessage) (float64, error) {
	if len(pair) != 2 {
		return 0, errors.New("expected a [time, \"count\"] pair")
	}
	var s string
	if err := json.Unmarshal(pair[1], &s); err != nil {
		return 0, fmt.Errorf("%s: expected the count as a string, such as \"42\"", pair[1])
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: expected a finite count", s)
	}
	return v, nil
}

// jsonDocErr turns a decoding error of a whole JSON document into one
// that names the line.
func jsonDocErr(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return &ParseError{Msg: fmt.Sprintf("%v: expected the JSON body of a Prometheus query result", err)}
	}
	off = min(off, int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return &ParseError{Line: line, Msg: fmt.Sprintf("%v: expected the JSON body of a Prometheus query result", err)}
}
