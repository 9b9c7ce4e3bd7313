package main

import (
	"fmt"
	"math"
	"strings"
)

// plotSeries is one line of a latency plot: points of (load, milliseconds).
type plotSeries struct {
	name, color, dash string
	pts               [][2]float64
}

// latencyPlot is an SVG plot of latencies against a load, both on log
// scales, with a legend on the right: the shape of both of the report's
// plots (latency against events per second, and against answers at once).
type latencyPlot struct {
	title, xLabel string
	// xs are the loads with a tick, ascending.
	xs     []int
	series []plotSeries
	// limit, when above 0, is drawn as a dashed line labelled limitLabel.
	limit      float64
	limitLabel string
}

func (p latencyPlot) svg() string {
	const W, H, L, R, T, B = 640.0, 400.0, 70.0, 170.0, 30.0, 50.0
	minY, maxY := math.Inf(1), math.Inf(-1)
	if p.limit > 0 {
		minY, maxY = p.limit, p.limit
	}
	for _, s := range p.series {
		for _, pt := range s.pts {
			minY, maxY = math.Min(minY, pt[1]), math.Max(maxY, pt[1])
		}
	}
	lo, hi := math.Floor(math.Log10(math.Max(minY, 0.01))), math.Ceil(math.Log10(math.Max(maxY, 0.1)))
	if hi <= lo {
		hi = lo + 1
	}
	xlo, xhi := 0.0, 1.0
	if len(p.xs) > 0 {
		xlo, xhi = math.Log10(float64(p.xs[0])), math.Log10(float64(p.xs[len(p.xs)-1]))
	}
	if xhi <= xlo {
		xhi = xlo + 1
	}
	x := func(v float64) float64 { return L + (math.Log10(v)-xlo)/(xhi-xlo)*(W-L-R) }
	y := func(v float64) float64 { return H - B - (math.Log10(math.Max(v, 0.01))-lo)/(hi-lo)*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">%s</text>`+"\n", L, p.title)
	for e := lo; e <= hi; e++ {
		v := math.Pow(10, e)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%g ms</text>`+"\n",
			L, W-R, y(v), y(v), L-6, y(v)+4, v)
	}
	for _, n := range p.xs {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n",
			x(float64(n)), x(float64(n)), T, H-B, x(float64(n)), H-B+16, n)
	}
	if p.limit > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="2 3"/><text x="%.1f" y="%.1f" fill="#666">%s</text>`+"\n",
			L, W-R, y(p.limit), y(p.limit), L+4, y(p.limit)-4, p.limitLabel)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (L+W-R)/2, H-12, p.xLabel)
	for i, s := range p.series {
		var pts []string
		for _, pt := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt[0]), y(pt[1])))
		}
		dash := ""
		if s.dash != "" {
			dash = ` stroke-dasharray="` + s.dash + `"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		for _, pt := range s.pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(pt[0]), y(pt[1]), s.color)
		}
		ly := T + 20 + float64(i)*20
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			W-R+10, W-R+40, ly, ly, s.color, dash, W-R+46, ly+4, s.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
