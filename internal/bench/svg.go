package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Series is one line of a CCDF plot.
type Series struct {
	Name   string
	Points []Point
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// WriteCCDFSVG draws the series as a log-log CCDF plot: latency on x,
// P(latency >= x) on y, one line per series, and writes it as a standalone
// SVG document.
func WriteCCDFSVG(w io.Writer, title string, series []Series) error {
	const (
		width, height          = 760, 500
		left, right, top, bott = 70, 190, 40, 55
		pw, ph                 = width - left - right, height - top - bott
	)
	xmin, xmax, ymin := math.Inf(1), math.Inf(-1), 1.0
	for _, s := range series {
		for _, p := range s.Points {
			x := math.Max(float64(p.X), float64(time.Microsecond))
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			if p.Y > 0 {
				ymin = math.Min(ymin, p.Y)
			}
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax = float64(time.Microsecond), float64(time.Second)
	}
	// Whole decades on both axes.
	lx0, lx1 := math.Floor(math.Log10(xmin)), math.Ceil(math.Log10(xmax))
	if lx1 <= lx0 {
		lx1 = lx0 + 1
	}
	ly0 := math.Floor(math.Log10(ymin))
	if ly0 >= 0 {
		ly0 = -1
	}
	px := func(x float64) float64 {
		x = math.Max(x, float64(time.Microsecond))
		return left + (math.Log10(x)-lx0)/(lx1-lx0)*pw
	}
	py := func(y float64) float64 { return top + (0-math.Log10(y))/(0-ly0)*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	// Grid and ticks.
	for d := lx0; d <= lx1; d++ {
		x := px(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, top, x, top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, top+ph+18, durLabel(math.Pow(10, d)))
	}
	for d := ly0; d <= 0; d++ {
		y := py(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+pw, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-6, y, probLabel(d))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">latency from intended start (log)</text>`+"\n", left+pw/2, height-12)
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">P(latency ≥ x) (log)</text>`+"\n", top+ph/2)
	// Lines: a step at each point, the CCDF being a step function.
	for i, s := range series {
		if len(s.Points) == 0 {
			continue
		}
		col := palette[i%len(palette)]
		var pts []string
		prevY := 1.0
		for _, p := range s.Points {
			x := px(float64(p.X))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, py(prevY)), fmt.Sprintf("%.1f,%.1f", x, py(p.Y)))
			prevY = p.Y
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		ly := top + 10 + 20*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", left+pw+12, ly, left+pw+36, ly, col)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", left+pw+42, ly, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func durLabel(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%gs", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%gms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%gµs", ns/1e3)
	}
	return fmt.Sprintf("%gns", ns)
}

func probLabel(decade float64) string {
	if decade == 0 {
		return "1"
	}
	return fmt.Sprintf("1e%d", int(decade))
}
