package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tailcut/hedge/internal/advise"
)

// MaxAdviseBody is the largest file, in bytes, that POST /api/advise
// accepts (4 MiB: about 400,000 latencies of one per line). "hedge advise
// --in" reads a file of any size.
const MaxAdviseBody = 4 << 20

// MaxAdviseHistogram is the most latencies /api/advise spreads a
// histogram into (advise.Fields.MaxBinned). A histogram's counts say
// nothing of its size: 74 bytes may count 1e15 observations. Advise's work
// grows with the latencies, so the lab bounds them as an upload of lines
// would be: 100,000 latencies, about what a file of 700 KB holds, leave
// the p99.9 resting on 100 values and cost a fraction of a second.
const MaxAdviseHistogram = 100_000

// adviseQueueRequests is the queueing estimate's simulated requests per
// run, as "hedge advise" runs it, before the server's own bounds.
const adviseQueueRequests = 200_000

// AdviseRecommendation is the configuration a successful /api/advise
// recommends, in figures a page can show; times in milliseconds.
type AdviseRecommendation struct {
	// Delay names the hedge delay ("p95", or a fixed delay such as "20ms")
	// and DelayMs is its value.
	Delay   string  `json:"delay"`
	DelayMs float64 `json:"delay_ms"`
	// Budget reports whether the recommendation keeps the library's
	// default budget (hedge.DefaultBudget).
	Budget bool `json:"budget"`
	// HedgeRate is the share of requests that send a hedge, in percent.
	HedgeRate float64 `json:"hedge_rate_pct"`
	// P99Ms and P999Ms are the predicted percentiles with hedging.
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	// ExtraWork is the server time over today's, in percent.
	ExtraWork float64 `json:"extra_work_pct"`
	// RulesOn reports that the figures are the configuration as the
	// library runs it, its spare-capacity and payoff rules applied
	// (advise.Recommendation.Predicted). When false no prediction could
	// apply them (no load, no send times): the figures are plain
	// hedging's, and the hedge rate an upper bound.
	RulesOn bool `json:"rules_on"`
	// Kind is the prediction the figures come from ("independent",
	// "independent-local", "queue-fresh" or "queue-shared"), and Why how
	// the row was chosen.
	Kind string `json:"kind"`
	Why  string `json:"why"`
}

// AdviseResponse is the body of a successful /api/advise.
type AdviseResponse struct {
	// Report is advise's text report (advise.Report.WriteText), and SVG
	// its chart (advise.Report.WriteSVG), an SVG document to show as an
	// image.
	Report string `json:"report"`
	SVG    string `json:"svg"`
	// N and Source describe the sample; the Today percentiles are its
	// latency without hedging, in milliseconds.
	N           int     `json:"n"`
	Source      string  `json:"source"`
	TodayP50Ms  float64 `json:"today_p50_ms"`
	TodayP99Ms  float64 `json:"today_p99_ms"`
	TodayP999Ms float64 `json:"today_p999_ms"`
	// Where is where the sample suggests the slowness lives.
	Where string `json:"where"`
	// Headline is the report's first lines: what the library's default
	// (the zero hedge.Config) is predicted to do, then the recommended
	// configuration as the library runs it, or why there is none
	// (advise.Report.Headline). Verdict is the same in one paragraph.
	Headline []string `json:"headline"`
	Verdict  string   `json:"verdict"`
	// KeepDefault reports that the report advises keeping the library's
	// default over the recommended configuration, which does not cut the
	// tail clearly more (advise.Report.KeepDefault).
	KeepDefault bool `json:"keep_default"`
	// Recommended is the recommended configuration, or null when there
	// is none; NoAdvice then says why (it may also qualify a
	// recommendation).
	Recommended *AdviseRecommendation `json:"recommended"`
	NoAdvice    string                `json:"no_advice,omitempty"`
	// Queueing reports whether the queueing estimate ran (it needs the
	// load), and QueueRequests its simulated requests per run.
	Queueing      bool `json:"queueing"`
	QueueRequests int  `json:"queue_requests,omitempty"`
	// ServerMillis is the server time the request took.
	ServerMillis float64 `json:"server_ms"`
}

// adviseParams are a request's query parameters, validated.
type adviseParams struct {
	format advise.Format
	fields advise.Fields
	opts   advise.Options
}

// parseAdvise reads advise's parameters from a raw query string, with the
// rules of "hedge advise"'s flags of the same names.
func parseAdvise(raw string) (adviseParams, []ParamError) {
	var p adviseParams
	f := newForm(raw)
	if f.malformed() {
		return p, f.errs
	}
	if s, ok := f.get("format"); ok {
		format, err := advise.ParseFormat(s)
		if err != nil {
			f.bad("format", "%v", err)
		}
		p.format = format
	}
	p.fields.Latency = "latency"
	p.fields.MaxBinned = MaxAdviseHistogram
	if s, ok := f.get("field"); ok && s != "" {
		p.fields.Latency = s
	}
	p.fields.Replica, _ = f.get("replica-field")
	p.fields.Time, _ = f.get("time-field")
	p.fields.Metric, _ = f.get("metric")
	if s, ok := f.get("unit"); ok && s != "" {
		u, err := advise.ParseUnit(s)
		if err != nil {
			f.bad("unit", "%v", err)
		}
		p.fields.Unit = u
	}
	if s, ok := f.get("load"); ok && s != "" {
		x, err := strconv.ParseFloat(s, 64)
		switch {
		case err != nil || math.IsNaN(x):
			f.bad("load", "%s is not a number: give the servers' utilisation without hedging, in (0, 1), such as 0.5, or leave it empty", quote(s))
		case x != 0 && !(x > 0 && x < 1):
			f.bad("load", "%g is out of range: give a utilisation in (0, 1), such as 0.5, or 0 to infer it", x)
		default:
			p.opts.Load = x
		}
	}
	p.opts.Replicas = count(f, "replicas", 2, "how many replicas the requests were spread over, such as 3 (a copy needs another one)")
	p.opts.Concurrency = count(f, "concurrency", 1, "how many requests each replica serves at once, such as 4")
	p.opts.Servers = count(f, "servers", 2, "the queueing estimate's servers, replicas x concurrency, such as 12; or give replicas and concurrency")
	if s, ok := f.get("objective"); ok && s != "" {
		obj, err := advise.ParseObjective(s)
		if err != nil {
			f.bad("objective", "%s: use p99 or p99.9", quote(s))
		}
		p.opts.Objective = obj
	}
	if s, ok := f.get("plain-hedging"); ok && s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			f.bad("plain-hedging", "%s is not true or false", quote(s))
		}
		p.opts.PlainHedging = b
	}
	if s, ok := f.get("percentiles"); ok {
		pcts, errs := advise.ParsePercentiles(s)
		for _, err := range errs {
			f.bad("percentiles", "%v", err)
		}
		for _, v := range pcts {
			if !(v >= 1 && v <= 99.99) {
				f.bad("percentiles", "%g is out of range: use 1 to 99.99", v)
			}
		}
		p.opts.Percentiles = pcts
	}
	if s, ok := f.get("delays"); ok {
		delays, errs := advise.ParseDelays(s)
		for _, err := range errs {
			f.bad("delays", "%v", err)
		}
		p.opts.Delays = delays
	}
	if p.opts.Percentiles != nil && len(p.opts.Percentiles) == 0 && len(p.opts.Delays) == 0 && len(f.errs) == 0 {
		f.bad("percentiles", "percentiles and delays are both empty: give at least one delay to try")
	}
	p.opts.SendLag = duration(f, "send-lag")
	p.opts.SendLagP99 = duration(f, "send-lag-p99")
	f.unknown()
	return p, f.errs
}

// count reads a whole number from lo to 10000, what says what it is;
// absent or empty is 0 (advise's default).
func count(f *form, name string, lo int, what string) int {
	s, ok := f.get(name)
	if !ok || s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		f.bad(name, "%s is not a whole number: give %s, or leave it empty", quote(s), what)
	case n < lo || n > 10000:
		f.bad(name, "%d is out of range: give %d to 10000, %s, or leave it empty", n, lo, what)
	default:
		return n
	}
	return 0
}

// duration reads a Go duration >= 0 ("500us"); absent or empty is 0.
func duration(f *form, name string) time.Duration {
	s, ok := f.get(name)
	if !ok || s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		f.bad(name, "%s is not a duration >= 0: give one such as 500us or 1ms", quote(s))
		return 0
	}
	return d
}

func (s *Server) handleAdvise(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	p, errs := parseAdvise(r.URL.RawQuery)
	if len(errs) > 0 {
		writeParamErrors(w, errs)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAdviseBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
				"the file is larger than the lab's limit of %s: thin it (keep every k-th line) or give a histogram, or run \"hedge advise --in FILE\", which has no limit", mib(MaxAdviseBody)), nil)
		}
		return // otherwise the client has gone
	}
	s.inSlot(w, r, func(ctx context.Context) (int, any) { return s.advise(ctx, p, body, start) })
}

// queueRequests is the queueing estimate's simulated requests per run:
// "hedge advise"'s 200,000, bounded as an explorer run is (MaxRequests
// and MaxMemory), and at least the fewest advise accepts.
func (s *Server) queueRequests() int {
	n := min(adviseQueueRequests, s.o.MaxRequests, int(min(s.o.MaxMemory/runBytesPerRequest, math.MaxInt32)))
	return max(n, advise.MinSample)
}

// advise answers an advise request that holds a simulation slot (ctx
// bounded by the lab's time limit): the status and body to send, or 0
// when the client has gone.
func (s *Server) advise(ctx context.Context, p adviseParams, body []byte, start time.Time) (int, any) {
	sample, err := parseUpload(p, body)
	if err != nil {
		return http.StatusBadRequest, ErrorResponse{Error: err.Error()}
	}
	o := p.opts
	o.Requests = s.queueRequests()
	rep, err := advise.Advise(ctx, sample, o)
	if code, body, failed := s.failed(err, "analysis", "try fewer percentiles or delays, or run \"hedge advise --in FILE\"", advise.ErrOptions, advise.ErrTooSmall); failed {
		return code, body
	}
	var text, svg strings.Builder
	if err := rep.WriteText(&text); err != nil {
		return http.StatusInternalServerError, ErrorResponse{Error: "writing the report: " + err.Error()}
	}
	if err := rep.WriteSVG(&svg); err != nil {
		return http.StatusInternalServerError, ErrorResponse{Error: "drawing the chart: " + err.Error()}
	}
	resp := AdviseResponse{
		Report: text.String(), SVG: svg.String(), N: rep.N, Source: rep.Source,
		TodayP50Ms: ms(rep.Today.P50), TodayP99Ms: ms(rep.Today.P99), TodayP999Ms: ms(rep.Today.P999),
		Where: rep.Diagnosis.Where.String(), NoAdvice: rep.NoAdvice, Queueing: rep.Queue != nil,
	}
	if rep.Queue != nil {
		resp.QueueRequests = rep.Queue.Requests
	}
	if rec := rep.Recommended; rec != nil {
		oc, kind := rec.Outcome, rec.Kind
		if rec.Predicted != nil {
			oc, kind = *rec.Predicted, rec.PredictedKind
		}
		resp.Recommended = &AdviseRecommendation{
			Delay: oc.Choice.Label, DelayMs: ms(oc.Choice.Delay), Budget: oc.Budget, HedgeRate: 100 * oc.HedgeRate,
			P99Ms: ms(oc.P99), P999Ms: ms(oc.P999), ExtraWork: 100 * oc.ExtraWork, RulesOn: rec.Predicted != nil, Kind: kind, Why: rec.Why,
		}
	}
	resp.Headline = rep.Headline()
	resp.Verdict = strings.Join(resp.Headline, " ")
	resp.KeepDefault = rep.KeepDefault()
	resp.ServerMillis = millis(time.Since(start))
	return http.StatusOK, resp
}

// parseUpload reads an uploaded file as a sample advise accepts: at most
// MaxAdviseHistogram latencies from a histogram, whatever its counts, and
// at most one per line otherwise. Its error is the message for a 400.
func parseUpload(p adviseParams, body []byte) (*advise.Sample, error) {
	sample, err := advise.Parse(bytes.NewReader(body), p.format, p.fields)
	if err != nil {
		return nil, fmt.Errorf("the file: %w", err)
	}
	sample.Source = "uploaded file, " + sample.Source
	if err := sample.Check(); err != nil {
		return nil, err
	}
	return sample, nil
}
