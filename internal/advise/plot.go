package advise

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

var plotColors = map[string]string{
	"independent":       "#1f77b4",
	"independent-local": "#9467bd",
	"queue-fresh":       "#2ca02c",
	"queue-shared":      "#d62728",
	"queue-stalls":      "#ff7f0e",
}

// WriteSVG draws the predictions as a standalone SVG document of two
// panels sharing the delay axis (log scale): the predicted p99 over
// today's (log scale; below 1 hedging helps), and the extra work in
// percent. Solid lines are with the default budget, dashed without.
func (r *Report) WriteSVG(w io.Writer) error {
	const (
		width, left, right, top = 820, 70, 230, 50
		panelH, gap, bottom     = 230, 60, 50
		pw                      = width - left - right
		height                  = top + 2*panelH + gap + bottom
	)
	dmin, dmax := math.Inf(1), math.Inf(-1)
	rmin, rmax, wmin, wmax := 1.0, 1.0, 0.0, 0.0
	for _, p := range r.Predictions {
		for _, o := range p.Rows {
			d := math.Max(float64(o.Choice.Delay), 1)
			dmin, dmax = math.Min(dmin, d), math.Max(dmax, d)
			if o.P99Ratio > 0 && !math.IsInf(o.P99Ratio, 0) {
				rmin, rmax = math.Min(rmin, o.P99Ratio), math.Max(rmax, o.P99Ratio)
			}
			wmin, wmax = math.Min(wmin, 100*o.ExtraWork), math.Max(wmax, 100*o.ExtraWork)
		}
	}
	if math.IsInf(dmin, 1) {
		dmin, dmax = float64(time.Millisecond), float64(time.Second)
	}
	lx0, lx1 := math.Log10(dmin)-0.05, math.Log10(dmax)+0.05
	if lx1-lx0 < 0.5 {
		lx0, lx1 = lx0-0.25, lx1+0.25
	}
	ly0, ly1 := math.Floor(math.Log10(rmin)*10)/10-0.05, math.Ceil(math.Log10(rmax)*10)/10+0.05
	wmin, wmax = math.Floor(wmin/5)*5, math.Ceil(wmax/5)*5+5
	px := func(d float64) float64 { return left + (math.Log10(math.Max(d, 1))-lx0)/(lx1-lx0)*pw }
	pyR := func(v float64) float64 { return top + (ly1-math.Log10(v))/(ly1-ly0)*panelH }
	y2 := float64(top + panelH + gap)
	pyW := func(v float64) float64 { return y2 + (wmax-v)/(wmax-wmin)*panelH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString("What hedging would buy: "+r.Source))
	fmt.Fprintf(&b, `<text x="%d" y="37" fill="#555">%s</text>`+"\n", left, html.EscapeString(fmt.Sprintf("%d latencies; today p99 %v, p99.9 %v. Solid: default budget; dashed: none.", r.N, round(r.Today.P99), round(r.Today.P999))))
	// Panels and x grid.
	for _, y0 := range []float64{top, y2} {
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, y0, pw, panelH)
		for _, d := range delayTicks(lx0, lx1) {
			x := px(d)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, y0, x, y0+panelH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+panelH+16, time.Duration(d))
		}
	}
	for _, v := range ratioTicks(ly0, ly1) {
		y := pyR(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"%s/>`+"\n", left, y, left+pw, y, map[bool]string{true: "#888", false: "#ddd"}[v == 1], map[bool]string{true: ` stroke-dasharray="4 3"`, false: ""}[v == 1])
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%g</text>`+"\n", left-6, y, v)
	}
	step := niceStep((wmax - wmin) / 5)
	for v := math.Ceil(wmin/step) * step; v <= wmax+1e-9; v += step {
		y := pyW(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", left, y, left+pw, y, map[bool]string{true: "#888", false: "#ddd"}[math.Abs(v) < 1e-9])
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%g%%</text>`+"\n", left-6, y, v)
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">p99 / today's (log)</text>`+"\n", top+panelH/2)
	fmt.Fprintf(&b, `<text transform="translate(18 %.0f) rotate(-90)" text-anchor="middle">extra work</text>`+"\n", y2+panelH/2)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">hedge delay (log)</text>`+"\n", left+pw/2, height-10)
	// Lines.
	li := 0
	for _, p := range r.Predictions {
		col := plotColors[p.Kind]
		for _, budget := range []bool{true, false} {
			var ptsR, ptsW []string
			for _, o := range p.Rows {
				if o.Budget != budget {
					continue
				}
				x := px(float64(o.Choice.Delay))
				if o.P99Ratio > 0 && !math.IsInf(o.P99Ratio, 0) {
					ptsR = append(ptsR, fmt.Sprintf("%.1f,%.1f", x, pyR(o.P99Ratio)))
				}
				ptsW = append(ptsW, fmt.Sprintf("%.1f,%.1f", x, pyW(100*o.ExtraWork)))
			}
			dash := ""
			if !budget {
				dash = ` stroke-dasharray="6 4"`
			}
			for _, pts := range [][]string{ptsR, ptsW} {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
			}
			ly := top + 10 + 20*li
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n", left+pw+12, ly, left+pw+36, ly, col, dash)
			fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", left+pw+42, ly, html.EscapeString(p.Kind+map[bool]string{true: ", budget", false: ", no budget"}[budget]))
			li++
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// delayTicks returns 1-2-5 ticks (ns) within the log range.
func delayTicks(l0, l1 float64) []float64 {
	var out []float64
	for e := math.Floor(l0); e <= math.Ceil(l1); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if l := math.Log10(v); l >= l0 && l <= l1 {
				out = append(out, v)
			}
		}
	}
	return out
}

// ratioTicks returns readable ratio ticks within the log range.
func ratioTicks(l0, l1 float64) []float64 {
	var out []float64
	for e := math.Floor(l0); e <= math.Ceil(l1); e++ {
		for _, m := range []float64{1, 1.5, 2, 3, 5, 7} {
			v := m * math.Pow(10, e)
			if l := math.Log10(v); l >= l0 && l <= l1 {
				out = append(out, math.Round(v*1000)/1000)
			}
		}
	}
	return out
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if !(x > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}
