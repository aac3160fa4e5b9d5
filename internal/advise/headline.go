package advise

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/drill"
	"github.com/tailcut/hedge/internal/sim"
)

// LibraryConfig returns the hedge.Config that a recommendation of o
// runs: the row's (Choice.Config) with the library's spare-capacity and
// payoff rules back on, unless plain keeps them off as the rows model
// them (Options.PlainHedging).
func (o Outcome) LibraryConfig(plain bool) hedge.Config {
	cfg := o.Choice.Config(o.Budget)
	if !plain {
		cfg.MaxReplicaLoad, cfg.PayoffWinRate = 0, 0
	}
	return cfg
}

// lead returns the prediction whose line for the library's default leads
// the report, and by which a recommendation is predicted as the library
// runs it: the moment-local replay when it ran (the library's own
// decision on the sample's own requests), else the deciding queueing
// estimate (shared sizes when the slowness looks like it lives in the
// requests, fresh otherwise). Nil when none has a default line: the rules
// need replicas with queues or send times to act on.
func lead(rep *Report) *Prediction {
	kinds := []string{"independent-local", "queue-fresh"}
	if rep.Diagnosis.Where == InRequests {
		kinds[1] = "queue-shared"
	}
	for _, k := range kinds {
		for i := range rep.Predictions {
			if p := &rep.Predictions[i]; p.Kind == k && p.Default != nil {
				return p
			}
		}
	}
	return nil
}

// predictRecommended predicts the recommended configuration as the
// library runs it (Outcome.LibraryConfig), by the leading prediction: the
// moment-local replay, or the queueing simulation on the same script as
// the rows, either driving the library's own decision with the rules on.
// It leaves Recommendation.Predicted nil when no prediction can apply the
// rules.
func predictRecommended(ctx context.Context, rep *Report, e *empirical, s *Sample, lat []float64, order []int, o Options) error {
	rec := rep.Recommended
	p := lead(rep)
	if rec == nil || p == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	row := rec.Outcome
	cfg := row.LibraryConfig(o.PlainHedging)
	var out Outcome
	switch p.Kind {
	case "independent-local":
		cfg.Replicas = o.Replicas
		if cfg.Replicas == 0 {
			cfg.Replicas = s.replicaCount()
		}
		rp, err := replayConfig(ctx, e, s, lat, order, cfg, o.SendLag, o.Seed)
		if err != nil {
			return err
		}
		out = momentOutcome(e, lat, rp.hedged, rp.work)
	default:
		sz := Fresh
		if p.Kind == "queue-shared" {
			sz = Shared
		}
		m := *rep.Queue
		mean := e.mean()
		// The simulator's clock: one unit is sim.Unit, and here one unit
		// is the sample's mean latency, as in queueIn.
		cfg.Delay = hedge.Fixed(time.Duration(math.Round(float64(row.Choice.Delay+o.SendLag) / mean * float64(sim.Unit))))
		var sm sim.Simulator
		r, err := runQueue(ctx, &sm, m, stallWorld{}, m.script(e, sz), mean, &cfg)
		if err != nil {
			return err
		}
		out = Outcome{HedgeRate: r.hedged, ExtraWork: r.extraWork}
		out.P50, out.P99, out.P999 = r.p.P50, r.p.P99, r.p.P999
	}
	out.Choice, out.Budget = row.Choice, row.Budget
	out.ratios(p.Today)
	out.Verdict = o.Objective.Judge(out)
	rec.Predicted, rec.PredictedKind = &out, p.Kind
	return nil
}

// Headline returns the report's first lines: what the library's default
// (the zero hedge.Config) is predicted to do, then the recommended
// configuration as the library runs it, its rules on, and whether it does
// better than the default. Ratios compare with the leading prediction's
// own latency without hedging.
func (r *Report) Headline() []string {
	p := lead(r)
	var lines []string
	if p == nil {
		lines = append(lines, "The library's default (the zero hedge.Config): not predicted here. Its rules act on the replicas' queues and on which hedges win: give the load (--load), or send times (--time-field) with the replicas (--replicas or --replica-field), for a prediction that applies them.")
	} else {
		lines = append(lines, fmt.Sprintf("The library's default (the zero hedge.Config, delay about %v), %s: %s.", round(p.Default.Choice.Delay), kindName(p.Kind), outcomeLine(*p.Default)))
	}
	rec := r.Recommended
	if rec == nil {
		lines = append(lines, "No configuration to recommend over it: "+r.NoAdvice)
		return lines
	}
	o := rec.Outcome
	budget := map[bool]string{true: "the default budget", false: "no budget"}[o.Budget]
	rules := "the library's rules on"
	if r.PlainHedging {
		rules = "the library's rules off (--plain-hedging)"
	}
	what := fmt.Sprintf("Recommended: a fixed delay of %v (%s) with %s, %s", round(o.Choice.Delay), o.Choice.Label, budget, rules)
	if rec.Predicted == nil {
		lines = append(lines, fmt.Sprintf("%s: not predicted with the rules. As plain hedging the %s estimate gives %s; the rules can only hold hedges back, so it hedges at most that often. Give the load (--load) to predict it as the library runs it.", what, rec.Kind, outcomeLine(o)))
	} else {
		pr := *rec.Predicted
		lines = append(lines, fmt.Sprintf("%s, %s: %s.", what, kindName(rec.PredictedKind), outcomeLine(pr)))
		if r.KeepDefault() {
			lines = append(lines, fmt.Sprintf("It does not cut the %s clearly more than the default: keep the default, which needs no tuning and follows the latency as it moves.", r.Objective))
		}
	}
	if r.NoAdvice != "" {
		lines = append(lines, "But: "+r.NoAdvice)
	}
	return lines
}

// KeepDefault reports whether the report advises keeping the library's
// default over its recommendation: the recommendation, predicted as the
// library runs it, is no TAIL CUT by the objective, or cuts the
// objective's percentile by less than TailMargin (in ratio) beyond the
// default's line in the same prediction.
func (r *Report) KeepDefault() bool {
	p := lead(r)
	if r.Recommended == nil || r.Recommended.Predicted == nil || p == nil {
		return false
	}
	pr := *r.Recommended.Predicted
	return pr.Verdict != drill.TailCut || r.Objective.ratio(pr) > r.Objective.ratio(*p.Default)-TailMargin
}

// outcomeLine is an outcome in one clause: hedge rate, tail ratios, work
// and verdict.
func outcomeLine(o Outcome) string {
	return fmt.Sprintf("hedged %.1f%%, p99 %v (%s), p99.9 %v (%s), extra work %+.1f%%, %s",
		100*o.HedgeRate, round(o.P99), ratio(o.P99Ratio), round(o.P999), ratio(o.P999Ratio), 100*o.ExtraWork, o.Verdict)
}

// kindName names a prediction's kind in a sentence.
func kindName(kind string) string {
	switch kind {
	case "independent-local":
		return "replayed on the sample's requests"
	case "queue-fresh":
		return "simulated (queueing, fresh sizes)"
	case "queue-shared":
		return "simulated (queueing, shared sizes)"
	case "queue-stalls":
		return "simulated (queueing, stalling servers)"
	}
	return kind + " estimate"
}
