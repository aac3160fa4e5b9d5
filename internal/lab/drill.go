package lab

import (
	"errors"
	"net/http"
	"time"

	"github.com/tailcut/hedge/internal/drill"
)

// DrillRequest is one request of a DrillResponse; times in milliseconds.
type DrillRequest struct {
	N         int     `json:"n"`
	PrimaryMs float64 `json:"primary_ms"`
	BackupMs  float64 `json:"backup_ms"`
	Hedged    bool    `json:"hedged"`
	Refused   bool    `json:"refused"`
	Winner    string  `json:"winner"`
	LatencyMs float64 `json:"latency_ms"`
	LoserMs   float64 `json:"loser_work_ms"`
	Writes    int     `json:"writes"`
	Deduped   int     `json:"deduped"`
}

// DrillEvent is one line of the drill's trace.
type DrillEvent struct {
	AtMs float64 `json:"at_ms"`
	Req  int     `json:"req"`
	Copy string  `json:"copy"`
	Kind string  `json:"kind"`
	Text string  `json:"text"`
}

// DrillResponse is the body of a successful /api/drill: drill.Result with
// times in milliseconds.
type DrillResponse struct {
	Hedge         bool           `json:"hedge"`
	DelayMs       float64        `json:"delay_ms"`
	Budget        int            `json:"budget"`
	Cancel        bool           `json:"cancel"`
	Op            string         `json:"op"`
	Describe      string         `json:"describe"`
	Requests      []DrillRequest `json:"requests"`
	Events        []DrillEvent   `json:"events"`
	BaselineP50Ms float64        `json:"baseline_p50_ms"`
	BaselineP95Ms float64        `json:"baseline_p95_ms"`
	P50Ms         float64        `json:"p50_ms"`
	P95Ms         float64        `json:"p95_ms"`
	Hedges        int            `json:"hedges"`
	HedgeBudget   int            `json:"hedge_budget"`
	ExtraLoad     float64        `json:"extra_load_pct"`
	LoadLimit     int            `json:"load_limit_pct"`
	LoserWorkMs   float64        `json:"loser_work_ms"`
	Duplicates    int            `json:"duplicate_writes"`
	Deduplicated  int            `json:"deduplicated"`
	Outcome       string         `json:"outcome"`
	Summary       string         `json:"summary"`
	EndMs         float64        `json:"end_ms"`
	WriteCommitMs float64        `json:"write_commit_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (s *Server) handleDrill(w http.ResponseWriter, r *http.Request) {
	p, errs := parseDrill(r.URL.RawQuery)
	if len(errs) > 0 {
		writeParamErrors(w, errs)
		return
	}
	res, err := drill.Run(p)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, drill.ErrInvalid) {
			code = http.StatusBadRequest
		}
		writeError(w, code, err.Error(), nil)
		return
	}
	writeJSON(w, http.StatusOK, drillView(&res))
}

// parseDrill reads the drill's parameters from a raw query string.
func parseDrill(raw string) (drill.Params, []ParamError) {
	d := drill.DefaultParams()
	f := newForm(raw)
	if f.malformed() {
		return d, f.errs
	}
	p := drill.Params{
		Hedge:  f.boolean("hedge", d.Hedge),
		Delay:  f.millis("delay", d.Delay, drill.MaxDelay),
		Budget: f.integer("budget", d.Budget, 0, 100),
		Cancel: f.boolean("cancel", d.Cancel),
	}
	op := f.choice("op", d.Op.String(), []string{"read", "write", "write-key"})
	p.Op, _ = drill.ParseOp(op)
	f.unknown()
	return p, f.errs
}

func drillView(r *drill.Result) DrillResponse {
	v := DrillResponse{
		Hedge: r.Params.Hedge, DelayMs: ms(r.Params.Delay), Budget: r.Params.Budget, Cancel: r.Params.Cancel,
		Op: r.Params.Op.String(), Describe: r.Params.String(),
		BaselineP50Ms: ms(r.BaselineP50), BaselineP95Ms: ms(r.BaselineP95), P50Ms: ms(r.P50), P95Ms: ms(r.P95),
		Hedges: r.Hedges, HedgeBudget: r.HedgeBudget, ExtraLoad: r.ExtraLoad, LoadLimit: drill.LoadLimit,
		LoserWorkMs: ms(r.LoserWork), Duplicates: r.DuplicateWrites, Deduplicated: r.Deduplicated,
		Outcome: string(r.Outcome), Summary: r.Summary, EndMs: ms(r.End), WriteCommitMs: ms(drill.WriteCommit),
	}
	for _, q := range r.Requests {
		v.Requests = append(v.Requests, DrillRequest{
			N: q.N, PrimaryMs: ms(q.Primary), BackupMs: ms(q.Backup), Hedged: q.Hedged, Refused: q.Refused,
			Winner: q.Winner.String(), LatencyMs: ms(q.Latency), LoserMs: ms(q.LoserWork), Writes: q.Writes, Deduped: q.Deduped,
		})
	}
	for _, e := range r.Events {
		v.Events = append(v.Events, DrillEvent{AtMs: ms(e.At), Req: e.Req, Copy: e.Copy.String(), Kind: e.Kind.String(), Text: e.Text})
	}
	return v
}
