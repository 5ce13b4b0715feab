package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	svgW, svgH             = 720, 420
	padL, padR, padT, padB = 70, 180, 40, 50
	plotW, plotH           = svgW - padL - padR, svgH - padT - padB
	yTicks                 = 5
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"}

// renderSVG draws c: x values evenly spaced in order (fanout 1..500 would
// crush a linear axis, and the published pages label each measured value),
// a linear y axis from 0 (log10 for latency), one coloured line per series, min-max whiskers,
// and the dashed companion line where a point has one.
func renderSVG(c chart) string {
	xs := distinctX(c.points)
	ymin, ymax := math.Inf(1), 0.0
	for _, p := range c.points {
		ymax = max(ymax, p.yhi, p.y, p.y2)
		ymin = min(ymin, p.ylo, p.y)
	}
	ymax = niceCeil(ymax)
	ypos := func(y float64) float64 { return padT + plotH - y/ymax*plotH }
	ticks := make([]float64, 0, yTicks+1)
	for i := 0; i <= yTicks; i++ {
		ticks = append(ticks, ymax*float64(i)/yTicks)
	}
	if c.logY {
		// Decades from the one below the smallest value: latency spans
		// hundreds of µs to tens of ms, which a linear axis flattens.
		lo := math.Pow(10, math.Floor(math.Log10(max(ymin, 1))))
		span := math.Log10(ymax / lo)
		ypos = func(y float64) float64 { return padT + plotH - math.Log10(max(y, lo)/lo)/span*plotH }
		ticks = ticks[:0]
		for v := lo; v <= ymax*1.001; v *= 10 {
			ticks = append(ticks, v)
		}
	}
	xpos := func(x int) float64 {
		i := slices.Index(xs, x)
		if len(xs) == 1 {
			return padL + plotW/2
		}
		return padL + float64(i)*plotW/float64(len(xs)-1)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15">%s</text>`+"\n", padL, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT, padL, padT+plotH)
	for _, v := range ticks {
		y := ypos(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", padL, y, padL+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y+4, tickLabel(v))
	}
	for _, x := range xs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", xpos(x), padT+plotH+18, x)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-10, html.EscapeString(c.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, html.EscapeString(c.yLabel))
	for i, s := range seriesNames(c.points) {
		col := palette[i%len(palette)]
		var line, dashed []string
		for _, p := range c.points {
			if p.series != s {
				continue
			}
			x := xpos(p.x)
			line = append(line, fmt.Sprintf("%.1f,%.1f", x, ypos(p.y)))
			if p.y2 > 0 {
				dashed = append(dashed, fmt.Sprintf("%.1f,%.1f", x, ypos(p.y2)))
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x, ypos(p.ylo), x, ypos(p.yhi), col)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d: %.1f (%.1f-%.1f)</title></circle>`+"\n",
				x, ypos(p.y), col, html.EscapeString(s), p.x, p.y, p.ylo, p.yhi)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(line, " "), col)
		if len(dashed) > 0 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-dasharray="5,4"/>`+"\n", strings.Join(dashed, " "), col)
		}
		ly := padT + 10 + i*18
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", svgW-padR+15, ly, svgW-padR+35, ly, col)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", svgW-padR+40, ly+4, html.EscapeString(s))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func distinctX(ps []point) []int {
	var xs []int
	for _, p := range ps {
		if !slices.Contains(xs, p.x) {
			xs = append(xs, p.x)
		}
	}
	slices.Sort(xs)
	return xs
}

func seriesNames(ps []point) []string {
	var out []string
	for _, p := range ps {
		if !slices.Contains(out, p.series) {
			out = append(out, p.series)
		}
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(v float64) string {
	if v >= 10000 {
		return fmt.Sprintf("%.0fk", v/1000)
	}
	return fmt.Sprintf("%g", math.Round(v*10)/10)
}
