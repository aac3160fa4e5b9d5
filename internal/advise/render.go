package advise

import (
	"encoding/json"
	"fmt"
	"go/format"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the full report: the summary first (WriteSummary's:
// the headline, the sample, and what no hedging, the library's default
// and the recommendation are predicted to do), then the details: the
// replicas' latencies, one table per prediction with what it assumes, and the
// recommendation as Go code and as a gRPC service-config snippet.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	r.writeSummary(&b)
	b.WriteString("\nDetails\n")
	if len(r.Diagnosis.Replicas) > 0 {
		b.WriteString("\nThe replicas:\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  replica\tlatencies\tp50\tp99\tshare of the slowest 1%")
		for _, rs := range r.Diagnosis.Replicas {
			fmt.Fprintf(tw, "  %s\t%d\t%v\t%v\t%.2gx\n", rs.Replica, rs.Count, round(rs.P50), round(rs.P99), rs.TailShare)
		}
		tw.Flush()
	}
	for _, p := range r.Predictions {
		fmt.Fprintf(&b, "\n%s\n", p.Title)
		for _, a := range p.Assumes {
			fmt.Fprintf(&b, "  assumes: %s\n", a)
		}
		if p.Kind != "independent" {
			fmt.Fprintf(&b, "  without hedging here: p50 %v, p99 %v, p99.9 %v\n", round(p.Today.P50), round(p.Today.P99), round(p.Today.P999))
		}
		writeRows(&b, p.Rows)
		if d := p.Default; d != nil {
			how := "simulated alike"
			if p.Kind == "independent-local" {
				how = "its own decision replayed on the sample's own occupancy"
			}
			fmt.Fprintf(&b, "  the library's default (the zero hedge.Config: a live p95 delay, about %v here; the default budget; hedges only to an idle replica, and only while they pay), %s:\n", round(d.Choice.Delay), how)
			fmt.Fprintf(&b, "    hedged %.1f%%, p50 %v (%s), p99 %v (%s), p99.9 %v (%s), extra work %+.1f%%, %s\n",
				100*d.HedgeRate, round(d.P50), ratio(d.P50Ratio), round(d.P99), ratio(d.P99Ratio), round(d.P999), ratio(d.P999Ratio), 100*d.ExtraWork, d.Verdict)
		}
	}
	fmt.Fprintf(&b, "\nVerdicts use the drill's words, judged by the %s (--objective): EXCESS LOAD when the extra requests or the extra work exceed 25%%; TAIL CUT when the %s falls by more than 5%% and the %s rises by no more than 5%%; NO TAIL GAIN otherwise.\n",
		r.Objective, r.Objective, r.Objective.other())
	b.WriteString("Extra work is server time over today's: a hedge runs only until a copy answers, and a cancelled slow primary stops costing, so it can be far from the extra requests.\n")
	b.WriteString("No estimate counts hedging's own work on the client (timers, copies, connections), which a client short of CPU pays in latency below the tail: on hedge bench's two shared cores the default's p99 measured 1.2 to 1.4 times no hedging's where these estimates promised 0.93 to 0.97, while its hedge rate and p99.9 ratio came out close to the moment-local default line's.\n")
	b.WriteString("\nRecommendation\n")
	if r.Recommended == nil {
		fmt.Fprintf(&b, "  %s\n", r.NoAdvice)
	} else {
		o := r.Recommended.Outcome
		fmt.Fprintf(&b, "  Hedge at %s (%v)%s: as plain hedging, hedge rate %.1f%%, p99 %v -> %v, p99.9 %v -> %v, extra work %+.1f%% (%s estimate).\n",
			o.Choice.Label, round(o.Choice.Delay), map[bool]string{true: " with the default budget", false: " without a budget"}[o.Budget],
			100*o.HedgeRate, round(r.Today.P99), round(o.P99), round(r.Today.P999), round(o.P999), 100*o.ExtraWork, r.Recommended.Kind)
		if pr := r.Recommended.Predicted; pr != nil {
			fmt.Fprintf(&b, "  As the library runs it, its rules %s, %s: %s.\n", map[bool]string{true: "off", false: "on"}[r.PlainHedging], kindName(r.Recommended.PredictedKind), outcomeLine(*pr))
		}
		fmt.Fprintf(&b, "  Why: %s\n", r.Recommended.Why)
		if r.NoAdvice != "" {
			fmt.Fprintf(&b, "  But: %s\n", r.NoAdvice)
		}
		b.WriteString("\nAs Go:\n\n")
		b.WriteString(indent(GoConfig(o, r.PlainHedging), "    "))
		b.WriteString("\nAs a gRPC service config (hedgegrpc.ParseServiceConfig, then hedgegrpc.NewFromServiceConfig(sc, base)):\n\n")
		b.WriteString(indent(ServiceConfigJSON(o.Choice.Delay, r.GRPCService, r.GRPCMethod), "    "))
		base := "Budget: hedge.DefaultBudget()"
		if !o.Budget {
			base = "NoBudget: true"
		}
		if r.PlainHedging {
			base += ", MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1"
		}
		fmt.Fprintf(&b, "\n    with base hedge.Config{%s}: a service config cannot say the budget.\n", base)
		if r.GRPCService == "" {
			b.WriteString("    \"name\": [{}] applies to every method of the channel: name the service and method (--grpc-service, --grpc-method) to hedge this one only.\n")
		}
		if o.Choice.Percentile > 0 {
			fmt.Fprintf(&b, "\n  The delay is today's p%s. To follow the latency as it changes, hedge.Percentile{P: %s} is the live equivalent (it learns from primaries, so its delay and hedge rate differ somewhat from these predictions).\n",
				strconv.FormatFloat(o.Choice.Percentile, 'f', -1, 64), strconv.FormatFloat(o.Choice.Percentile, 'f', -1, 64))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRows(w io.Writer, rows []Outcome) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  delay\t\tbudget\thedged\tp50\t\tp99\t\tp99.9\t\textra work\tverdict\t")
	for _, o := range rows {
		bud := "none"
		if o.Budget {
			bud = "10%"
		}
		fmt.Fprintf(tw, "  %s\t%v\t%s\t%.1f%%\t%v\t(%s)\t%v\t(%s)\t%v\t(%s)\t%+.1f%%\t%s\t\n",
			o.Choice.Label, round(o.Choice.Delay), bud, 100*o.HedgeRate,
			round(o.P50), ratio(o.P50Ratio), round(o.P99), ratio(o.P99Ratio), round(o.P999), ratio(o.P999Ratio),
			100*o.ExtraWork, o.Verdict)
	}
	tw.Flush()
}

func ratio(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", v)
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = by + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// GoConfig returns the hedge.Config of an outcome as Go source. It keeps
// the library's spare-capacity and payoff rules on (they send fewer
// hedges than the rows predict, where hedges find every replica busy or
// do not win) unless plain, which turns them off as the rows model it.
func GoConfig(o Outcome, plain bool) string {
	var b strings.Builder
	b.WriteString("h, err := hedge.New(hedge.Config{\n")
	comment := "a fixed delay"
	if o.Choice.Percentile > 0 {
		comment = "today's p" + strconv.FormatFloat(o.Choice.Percentile, 'f', -1, 64)
	}
	fmt.Fprintf(&b, "\tDelay:       hedge.Fixed(%s), // %s\n", GoDuration(o.Choice.Delay), comment)
	if o.Budget {
		b.WriteString("\tBudget:      hedge.DefaultBudget(),      // at most 10% of requests hedge, bursts of 10\n")
	} else {
		b.WriteString("\tNoBudget:    true,                       // no cap on hedges: doubles the load when everything is slow\n")
	}
	b.WriteString("\tMaxAttempts: 2,\n")
	if plain {
		b.WriteString("\t// As predicted: plain hedging (--plain-hedging). Drop these two\n")
		b.WriteString("\t// lines to let the library stop hedges that find every replica\n")
		b.WriteString("\t// busy or do not win.\n")
		b.WriteString("\tMaxReplicaLoad: hedge.AnyReplicaLoad,\n")
		b.WriteString("\tPayoffWinRate:     -1,\n")
	} else {
		b.WriteString("\t// The library's spare-capacity and payoff rules stay on: they hold\n")
		b.WriteString("\t// back hedges that find every replica busy or do not win, so it\n")
		b.WriteString("\t// hedges at most as often as predicted.\n")
	}
	b.WriteString("})\n")
	// Aligned as gofmt aligns it, whatever the delay's width.
	out, err := format.Source([]byte(b.String()))
	if err != nil {
		return b.String() // a statement built above: cannot fail
	}
	return string(out)
}

// GoDuration formats d as a Go expression: "12500 * time.Microsecond",
// "3 * time.Millisecond", "time.Second".
func GoDuration(d time.Duration) string {
	units := []struct {
		u    time.Duration
		name string
	}{{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"}, {time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"}, {time.Nanosecond, "time.Nanosecond"}}
	if d == 0 {
		return "0"
	}
	for _, u := range units {
		if d%u.u == 0 {
			if d == u.u {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.u, u.name)
		}
	}
	return strconv.FormatInt(int64(d), 10)
}

// ProtoDuration formats d (not negative) as the JSON form of a
// google.protobuf.Duration: seconds with 0, 3, 6 or 9 fractional digits
// and an "s" suffix, such as "0.012500s".
func ProtoDuration(d time.Duration) string {
	secs := strconv.FormatInt(int64(d/time.Second), 10)
	ns := int64(d % time.Second)
	switch {
	case ns == 0:
		return secs + "s"
	case ns%1e6 == 0:
		return fmt.Sprintf("%s.%03ds", secs, ns/1e6)
	case ns%1e3 == 0:
		return fmt.Sprintf("%s.%06ds", secs, ns/1e3)
	}
	return fmt.Sprintf("%s.%09ds", secs, ns)
}

// ServiceConfigJSON returns a gRPC service config whose hedgingPolicy
// sends one hedge after delay, for service/method (both empty: every
// method).
func ServiceConfigJSON(delay time.Duration, service, method string) string {
	type name struct {
		Service string `json:"service,omitempty"`
		Method  string `json:"method,omitempty"`
	}
	type policy struct {
		MaxAttempts  int    `json:"maxAttempts"`
		HedgingDelay string `json:"hedgingDelay"`
	}
	type mc struct {
		Name          []name `json:"name"`
		HedgingPolicy policy `json:"hedgingPolicy"`
	}
	doc := struct {
		MethodConfig []mc `json:"methodConfig"`
	}{[]mc{{Name: []name{{Service: service, Method: method}}, HedgingPolicy: policy{MaxAttempts: 2, HedgingDelay: ProtoDuration(delay)}}}}
	out, _ := json.MarshalIndent(doc, "", "  ") // plain structs: cannot fail
	return string(out) + "\n"
}
