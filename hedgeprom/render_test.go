package hedgeprom_test

import (
	"context"
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeprom"
	"github.com/tailcut/hedge/hedgewatch"
	"github.com/tailcut/hedge/internal/promtest"
)

var renderDashboard = flag.String("render-dashboard", "",
	"write an SVG of the Grafana dashboard's panels, from a real run scraped by a real Prometheus, to this file (about 30 s)")

// TestRenderDashboard draws the dashboard's panels with the numbers of a
// real run, since no Grafana server renders them here: the hedged HTTP
// traffic of liveTraffic for 20 s, in three phases (healthy, a slowdown
// of half the primaries, healthy again) with a hedgewatch.Watcher on the
// "items" Hedger (AutoShadow, judged every second), scraped every 200 ms
// by a real Prometheus; then every query of the dashboard is evaluated by
// that Prometheus over the run, with $__rate_interval at 2s, and drawn.
// It runs only with -render-dashboard:
//
//	go test ./hedgeprom -run TestRenderDashboard -render-dashboard ../docs/grafana/hedge-dashboard-example.svg -v
func TestRenderDashboard(t *testing.T) {
	if *renderDashboard == "" {
		t.Skip("renders only with -render-dashboard FILE")
	}
	promtest.Need(t)
	d := loadDashboard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // hang guard
	defer cancel()

	lt := startTraffic(t)
	lt.slowFor.Store(int64(30 * time.Millisecond)) // the watcher puts items in Shadow, where nothing cancels a slow primary
	w, err := hedgewatch.New(lt.items, hedgewatch.Config{AutoShadow: true, Baseline: 5})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hedgeprom.New("hedge", map[string]*hedge.Hedger{"items": lt.items, "direct": lt.direct}, hedgeprom.WithWatcher("items", w))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	prom := promtest.Start(t, promtest.Options{Targets: []string{serveMetrics(t, reg)}, ScrapeInterval: 200 * time.Millisecond,
		Args: []string{"--enable-feature=native-histograms"}}) // the holdout panel's p99 reads the native histograms

	// Prometheus applies a new target a few seconds after it starts:
	// the run begins once the target was scraped.
	if _, err := prom.WaitScrapedAfter(ctx, "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w.Check()
	for _, ph := range []struct {
		slowEvery int64
		span      time.Duration
	}{{10, 7 * time.Second}, {2, 5 * time.Second}, {10, 8 * time.Second}} {
		lt.slowEvery.Store(ph.slowEvery)
		end := time.Now().Add(ph.span)
		next := time.Now().Add(time.Second)
		for time.Now().Before(end) {
			if err := lt.run(ctx, 40, 4); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // pacing of the generator, not a wait for a result
			if time.Now().After(next) {
				s := w.Check()
				t.Logf("%5.1fs watcher: %v", time.Since(start).Seconds(), s)
				next = next.Add(time.Second)
			}
		}
	}
	stopped := time.Now()
	if _, err := prom.WaitScrapedAfter(ctx, "hedge_requests_total", stopped); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "2s", "$hedger", ".+", "${datasource}", "", "$budget_ratio", "0.05")
	var panels []renderedPanel
	for _, p := range d.Panels {
		rp := renderedPanel{title: p.Title, unit: unitOf(p.Title)}
		for _, tg := range p.Targets {
			series, err := prom.QueryRange(ctx, vars.Replace(tg.Expr), start, stopped, 250*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range series {
				rp.lines = append(rp.lines, renderedLine{legend: legend(tg.LegendFormat, s.Labels), points: s.Points})
			}
		}
		panels = append(panels, rp)
	}
	for name, h := range map[string]*hedge.Hedger{"items": lt.items, "direct": lt.direct} {
		for _, s := range h.Stats() {
			t.Logf("%s: %v", name, s)
		}
	}
	svg := renderSVG(d.Title, panels, start, stopped)
	if err := os.WriteFile(*renderDashboard, []byte(svg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d panels)", *renderDashboard, len(panels))
}

type renderedLine struct {
	legend string
	points []promtest.Point
}

type renderedPanel struct {
	title, unit string
	lines       []renderedLine
}

// unitOf is the unit the dashboard gives each panel, by title.
func unitOf(title string) string {
	switch title {
	case "Hedge rate against budget", "Win rate":
		return "percentunit"
	case "p99 with and without hedging", "Hedge-path latency", "Wasted work", "With vs without hedging (holdout)", "Replicas":
		return "s"
	case "Refusals by reason", "Traffic", "Rescues":
		return "reqps"
	}
	return "short"
}

var legendVar = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

func legend(format string, labels map[string]string) string {
	return legendVar.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendVar.FindStringSubmatch(m)[1]]
	})
}

func formatUnit(unit string, v float64) string {
	switch unit {
	case "percentunit":
		return fmt.Sprintf("%.1f%%", 100*v)
	case "s":
		switch {
		case v == 0:
			return "0"
		case v < 1e-3:
			return fmt.Sprintf("%.0fµs", v*1e6)
		case v < 1:
			return fmt.Sprintf("%.1fms", v*1e3)
		}
		return fmt.Sprintf("%.2fs", v)
	case "reqps":
		return fmt.Sprintf("%.3g/s", v)
	}
	return fmt.Sprintf("%.3g", v)
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// renderSVG draws the panels in two columns, each a line chart over the
// run with its legend and each line's last value.
func renderSVG(title string, panels []renderedPanel, start, end time.Time) string {
	const (
		width, colW, plotH, legendLine = 1240, 610, 170, 15
		left, top                      = 70, 34
	)
	var b strings.Builder
	type placed struct {
		p    renderedPanel
		x, y int
		h    int
	}
	var list []placed
	y := [2]int{50, 50}
	for i, p := range panels {
		col := i % 2
		if i == len(panels)-1 && len(panels)%2 == 1 {
			col = 0
			if y[1] > y[0] {
				y[0] = y[1]
			}
		}
		h := top + plotH + 30 + legendLine*len(p.lines) + 10
		list = append(list, placed{p, 10 + col*(colW+10), y[col], h})
		y[col] += h + 10
	}
	height := max(y[0], y[1]) + 10
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">A real run: hedged HTTP on loopback, scraped every 200 ms by Prometheus, %s; the dashboard's queries with $__rate_interval = 2s, $budget_ratio = 0.05. Healthy, then half the primaries slow (%.0f s to %.0f s), then healthy.</text>`+"\n",
		start.UTC().Format("2006-01-02 15:04 UTC"), 7.0, 12.0)
	span := end.Sub(start).Seconds()
	for _, pl := range list {
		p := pl.p
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)">`+"\n", pl.x, pl.y)
		fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fafafa" stroke="#ccc"/>`+"\n", colW, pl.h)
		fmt.Fprintf(&b, `<text x="8" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", html.EscapeString(p.title))
		lo, hi := 0.0, 0.0
		for _, l := range p.lines {
			for _, pt := range l.points {
				if !math.IsNaN(pt.Value) && !math.IsInf(pt.Value, 0) {
					hi = max(hi, pt.Value)
					lo = min(lo, pt.Value)
				}
			}
		}
		if hi == lo {
			hi = lo + 1
		}
		plotW := colW - left - 20
		sx := func(t time.Time) float64 { return left + float64(plotW)*t.Sub(start).Seconds()/span }
		sy := func(v float64) float64 { return top + float64(plotH)*(1-(v-lo)/(hi-lo)) }
		for i := 0; i <= 4; i++ {
			v := lo + (hi-lo)*float64(i)/4
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/>`, left, left+plotW, sy(v), sy(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", left-4, sy(v)+4, html.EscapeString(formatUnit(p.unit, v)))
		}
		for s := 0.0; s <= span; s += 5 {
			x := left + float64(plotW)*s/span
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%.0fs</text>`, x, top+plotH+14, s)
		}
		fmt.Fprintf(&b, "\n")
		for i, l := range p.lines {
			color := palette[i%len(palette)]
			var seg []string
			flush := func() {
				if len(seg) > 1 {
					fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", color, strings.Join(seg, " "))
				}
				seg = seg[:0]
			}
			last := math.NaN()
			for _, pt := range l.points {
				if math.IsNaN(pt.Value) || math.IsInf(pt.Value, 0) {
					flush()
					continue
				}
				seg = append(seg, fmt.Sprintf("%.1f,%.1f", sx(pt.Time), sy(pt.Value)))
				last = pt.Value
			}
			flush()
			ly := top + plotH + 30 + legendLine*i
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/>`, left, ly-4, color)
			lastText := "n/a"
			if !math.IsNaN(last) {
				lastText = formatUnit(p.unit, last)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">last %s</text>`+"\n",
				left+18, ly, html.EscapeString(l.legend), colW-20, ly, html.EscapeString(lastText))
		}
		if len(p.lines) == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#999">no data</text>`+"\n", left+10, top+plotH/2)
		}
		fmt.Fprintf(&b, "</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}
