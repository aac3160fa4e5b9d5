package sim

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// series is one line of a chart.
type series struct {
	name  string
	color string
	x, y  []float64 // NaN y values are gaps
}

// chart is a line chart rendered to SVG by hand: axes with ticks and
// labels, optional log scales, a dashed reference line and a legend.
type chart struct {
	title, subtitle string
	xlabel, ylabel  string
	logX, logY      bool
	refY            float64 // horizontal reference line, NaN for none
	refLabel        string
	yFormat         func(float64) string
	series          []series
}

var strategyColors = map[string]string{
	"hedge-p95-per-load": "#1f77b4",
	"hedge-p95-quiet":    "#ff7f0e",
	"hedge-p95-live":     "#2ca02c",
	"hedge-quiet-budget": "#9467bd",
	"tied":               "#d62728",
	"default":            "#000000",
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// Plots renders the study's charts: for each world, the headline
// percentile's ratio to "none" against load (log scale) and the extra work
// against load; and the ratio of hedge-p95-live against the mean stall
// length. It returns file name -> SVG text, for the charts that have data.
func Plots(res []PointResult) map[string]string {
	ix := indexResults(res)
	out := map[string]string{}
	for _, w := range []World{Noise, Stalls, BigJobs, Mixed} {
		loads := loadsOf(res, func(r *PointResult) bool {
			return r.World == w.String() && r.Routing == "two-choice" && slices.Contains(r.Groups, groupOf(w))
		})
		if len(loads) == 0 {
			continue
		}
		_, _, label := headlineOf(&PointResult{Headline: Headline(w)})
		var ratio, work []series
		for _, s := range StudyStrategies[1:] {
			rs := series{name: s.String(), color: strategyColors[s.String()]}
			ws := rs
			for _, l := range loads {
				r := ix.get(w, TwoChoice, s, l, nil)
				y, wy := math.NaN(), math.NaN()
				if r != nil {
					if _, rp, _ := headlineOf(r); rp != nil {
						y = *rp
					}
					wy = 100 * r.ExtraWork
				}
				rs.x, rs.y = append(rs.x, l), append(rs.y, y)
				ws.x, ws.y = append(ws.x, l), append(ws.y, wy)
			}
			ratio, work = append(ratio, rs), append(work, ws)
		}
		out["ratio-"+w.String()+".svg"] = chart{
			title:    fmt.Sprintf("%s world: %s latency relative to no hedging", w, label),
			subtitle: "10 servers, two-choice routing; below the dashed line hedging helps",
			xlabel:   "load (arrival rate / service capacity)",
			ylabel:   fmt.Sprintf("%s ratio to none (log scale)", label),
			logY:     true, refY: 1, refLabel: "none",
			yFormat: func(v float64) string { return trimFloat(v) },
			series:  ratio,
		}.svg()
		out["extra-work-"+w.String()+".svg"] = chart{
			title:    fmt.Sprintf("%s world: extra work of each strategy", w),
			subtitle: "work done on all copies over the size of one copy per request, minus 1",
			xlabel:   "load (arrival rate / service capacity)",
			ylabel:   "extra work (%)",
			refY:     0, refLabel: "none",
			yFormat: func(v float64) string { return trimFloat(v) + "%" },
			series:  work,
		}.svg()
	}
	var stall []series
	for i, l := range []float64{0.3, 0.7} {
		s := series{name: fmt.Sprintf("load %g", l), color: palette[i]}
		any := false
		for _, m := range StudyStallMeans {
			r := ix.get(Stalls, TwoChoice, HedgeP95Live, l, func(b, _, c *float64) (*float64, *float64, *float64) { return b, fptr(m), c })
			y := math.NaN()
			if r != nil && r.RatioP999 != nil {
				y, any = *r.RatioP999, true
			}
			s.x, s.y = append(s.x, m), append(s.y, y)
		}
		if any {
			stall = append(stall, s)
		}
	}
	if len(stall) > 0 {
		out["stall-length.svg"] = chart{
			title:    "stalls world: hedge-p95-live against stall length",
			subtitle: "servers stalled 2% of the time at 1/20 speed; two-choice routing",
			xlabel:   "mean stall length (time units, log scale)",
			ylabel:   "p99.9 ratio to none (log scale)",
			logX:     true, logY: true, refY: 1, refLabel: "none",
			yFormat: func(v float64) string { return trimFloat(v) },
			series:  stall,
		}.svg()
	}
	return out
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3g", v)
	if strings.Contains(s, "e") {
		s = fmt.Sprintf("%g", v)
	}
	return s
}

const (
	svgW, svgH                         = 820, 480
	padL, padR, padT, padB             = 80, 200, 64, 64
	plotW, plotH                       = svgW - padL - padR, svgH - padT - padB
	fontFamily                         = "Helvetica, Arial, sans-serif"
	axisColor, gridColor, refLineColor = "#333", "#e4e4e4", "#777"
)

type scale struct {
	lo, hi float64
	log    bool
	px0    float64 // pixel of lo
	pxLen  float64 // signed pixel length to hi
}

func (s scale) at(v float64) float64 {
	a, b, x := s.lo, s.hi, v
	if s.log {
		a, b, x = math.Log10(a), math.Log10(b), math.Log10(v)
	}
	return s.px0 + (x-a)/(b-a)*s.pxLen
}

// ticks returns tick values for the scale: 1-2-5 steps on a linear scale,
// and 1-2-5 (or finer) per decade on a log scale.
func (s scale) ticks() []float64 {
	if !s.log {
		step := niceStep((s.hi - s.lo) / 6)
		var t []float64
		for v := math.Ceil(s.lo/step) * step; v <= s.hi+step*1e-9; v += step {
			t = append(t, math.Round(v/step)*step)
		}
		return t
	}
	for _, mant := range [][]float64{{1}, {1, 2, 5}, {1, 1.5, 2, 3, 5, 7}} {
		var t []float64
		for e := math.Floor(math.Log10(s.lo)) - 1; e <= math.Ceil(math.Log10(s.hi)); e++ {
			for _, m := range mant {
				v := m * math.Pow(10, e)
				if v >= s.lo*(1-1e-9) && v <= s.hi*(1+1e-9) {
					t = append(t, v)
				}
			}
		}
		if len(t) >= 4 || len(mant) == 6 {
			if len(t) > 12 && len(mant) > 1 {
				continue
			}
			return t
		}
	}
	return nil
}

func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func (c chart) bounds() (xlo, xhi, ylo, yhi float64) {
	xlo, xhi, ylo, yhi = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for i, y := range s.y {
			if math.IsNaN(y) || (c.logY && y <= 0) {
				continue
			}
			xlo, xhi = math.Min(xlo, s.x[i]), math.Max(xhi, s.x[i])
			ylo, yhi = math.Min(ylo, y), math.Max(yhi, y)
		}
	}
	if !math.IsNaN(c.refY) {
		ylo, yhi = math.Min(ylo, c.refY), math.Max(yhi, c.refY)
	}
	if math.IsInf(xlo, 0) {
		xlo, xhi = 0, 1
	}
	if math.IsInf(ylo, 0) {
		ylo, yhi = 0.5, 2
		if !c.logY {
			ylo, yhi = 0, 1
		}
	}
	if xhi == xlo {
		xlo, xhi = xlo*0.9, xhi*1.1+1e-9
	}
	if c.logY {
		// Pad by a tenth of the range in log space, to round values.
		span := math.Log10(yhi / ylo)
		pad := math.Max(span*0.08, 0.04)
		ylo, yhi = ylo/math.Pow(10, pad), yhi*math.Pow(10, pad)
	} else {
		pad := math.Max((yhi-ylo)*0.08, 0.5)
		ylo, yhi = ylo-pad, yhi+pad
		step := niceStep((yhi - ylo) / 6)
		ylo, yhi = math.Floor(ylo/step)*step, math.Ceil(yhi/step)*step
	}
	if !c.logX {
		step := niceStep((xhi - xlo) / 8)
		xlo, xhi = math.Floor(xlo/step)*step, math.Ceil(xhi/step)*step
	}
	return
}

func (c chart) svg() string {
	xlo, xhi, ylo, yhi := c.bounds()
	xs := scale{lo: xlo, hi: xhi, log: c.logX, px0: padL, pxLen: plotW}
	ys := scale{lo: ylo, hi: yhi, log: c.logY, px0: padT + plotH, pxLen: -plotH}
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n",
		svgW, svgH, svgW, svgH, fontFamily)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", padL, esc(c.title))
	if c.subtitle != "" {
		fmt.Fprintf(&b, `<text x="%d" y="44" fill="#555">%s</text>`+"\n", padL, esc(c.subtitle))
	}
	// Grid and ticks.
	for _, t := range ys.ticks() {
		y := ys.at(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, y, padL+plotW, y, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", padL-6, y, esc(c.yFormat(t)))
	}
	xt := xs.ticks()
	if c.logX {
		xt = nil
		for _, s := range c.series {
			for _, x := range s.x {
				if !slices.Contains(xt, x) {
					xt = append(xt, x)
				}
			}
		}
	}
	for _, t := range xt {
		x := xs.at(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, padT, x, padT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, padT+plotH+18, esc(trimFloat(t)))
	}
	// Axes and labels.
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", padL, padT, plotW, plotH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-18, esc(c.xlabel))
	fmt.Fprintf(&b, `<text transform="translate(20 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, esc(c.ylabel))
	// Reference line.
	if !math.IsNaN(c.refY) {
		y := ys.at(c.refY)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n",
			padL, y, padL+plotW, y, refLineColor)
	}
	// Series.
	for i, s := range c.series {
		color := s.color
		if color == "" {
			color = palette[i%len(palette)]
		}
		var path strings.Builder
		pen := false
		for j := range s.x {
			if math.IsNaN(s.y[j]) || (c.logY && s.y[j] <= 0) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, xs.at(s.x[j]), ys.at(s.y[j]))
			pen = true
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(path.String()), color)
		for j := range s.x {
			if math.IsNaN(s.y[j]) || (c.logY && s.y[j] <= 0) {
				continue
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s at %s</title></circle>`+"\n",
				xs.at(s.x[j]), ys.at(s.y[j]), color, esc(s.name), esc(c.yFormat(s.y[j])), esc(trimFloat(s.x[j])))
		}
	}
	// Legend.
	lx, ly := padL+plotW+20, padT+10
	for i, s := range c.series {
		color := s.color
		if color == "" {
			color = palette[i%len(palette)]
		}
		y := ly + 20*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", lx, y, lx+24, y, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, y, esc(s.name))
	}
	if !math.IsNaN(c.refY) && c.refLabel != "" {
		y := ly + 20*len(c.series)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n", lx, y, lx+24, y, refLineColor)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, y, esc(c.refLabel))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
