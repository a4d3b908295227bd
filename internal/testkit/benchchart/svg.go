package main

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Colours of the charts.
const (
	colText   = "#222222"
	colMuted  = "#555555"
	colGrid   = "#e3e3e3"
	colAxis   = "#888888"
	colLib    = "#3b6fb6" // library bars
	colOver   = "#d1495b" // library bars above the target
	colRaw    = "#9a9a9a" // raw-driver bars
	colFull   = "#3b6fb6" // sync=FULL lines
	colNormal = "#e07b00" // sync=NORMAL lines
)

// Layout of every chart, in pixels.
const (
	minWidth  = 960.0
	margin    = 20.0
	titleY    = 32.0
	subtitleY = 54.0
	footerH   = 52.0 // two footer lines and the space above them
)

// canvas accumulates the elements of one SVG 1.1 document.
type canvas struct {
	b strings.Builder
}

// newCanvas starts a w×h document on a white background.
func newCanvas(w, h float64) *canvas {
	c := &canvas{}
	fmt.Fprintf(&c.b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"+
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "+
		"font-family=\"Helvetica, Arial, sans-serif\" fill=\"%s\">\n", w, h, w, h, colText)
	c.rect(0, 0, w, h, "#ffffff")
	return c
}

// rect draws a filled rectangle.
func (c *canvas) rect(x, y, w, h float64, fill string) {
	fmt.Fprintf(&c.b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y, w, h, fill)
}

// line draws a line; dash, when not empty, is its stroke-dasharray.
func (c *canvas) line(x1, y1, x2, y2 float64, stroke string, width float64, dash string) {
	fmt.Fprintf(&c.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"", x1, y1, x2, y2, stroke, width)
	if dash != "" {
		fmt.Fprintf(&c.b, " stroke-dasharray=\"%s\"", dash)
	}
	c.b.WriteString("/>\n")
}

// text draws s at (x, y); attrs are extra attributes, such as
// `font-size="13" text-anchor="end"`.
func (c *canvas) text(x, y float64, attrs, s string) {
	fmt.Fprintf(&c.b, "<text x=\"%.1f\" y=\"%.1f\" %s>%s</text>\n", x, y, attrs, html.EscapeString(s))
}

// header draws the title and the subtitle.
func (c *canvas) header(title, subtitle string) {
	c.text(margin, titleY, `font-size="18" font-weight="bold"`, title)
	c.text(margin, subtitleY, `font-size="12" fill="`+colMuted+`"`, subtitle)
}

// footer draws the lines of m's footer at the bottom of a chart h high.
func (c *canvas) footer(h float64, m meta) {
	for i, l := range m.footer() {
		c.text(margin, h-30+float64(i)*16, `font-size="11" fill="`+colMuted+`"`, l)
	}
}

// bytes closes the document and returns it.
func (c *canvas) bytes() []byte {
	c.b.WriteString("</svg>\n")
	return []byte(c.b.String())
}

// textWidth estimates the width of s in a sans-serif font of this size
// (a little generously, so that what is laid out with it fits).
func textWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * size * 0.58
}

// chartWidth returns the width a chart needs for its own content width
// and for its header and footer lines.
func chartWidth(content float64, title, subtitle string, m meta) float64 {
	w := max(minWidth, content, textWidth(title, 18)+2*margin, textWidth(subtitle, 12)+2*margin)
	for _, l := range m.footer() {
		w = max(w, textWidth(l, 11)+2*margin)
	}
	return math.Ceil(w)
}

// niceStep returns the smallest of 1, 2, 2.5 and 5 times a power of ten
// that is at least raw: the step between axis ticks.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// hbar is one horizontal bar.
type hbar struct {
	Label string  // left of the bar
	Value float64 // its length, in x-axis units
	Text  string  // printed after its end
	Color string
	Gap   bool // leave a little space above it: a new group starts
	// Lo and Hi, when Hi > 0, are drawn as a whisker across the bar: the
	// spread of the runs the Value is the median of.
	Lo, Hi float64
}

// refLine is a vertical reference line across the bars, labelled above
// them, its label on the side Anchor says ("end": left of the line).
type refLine struct {
	X      float64
	Label  string
	Dashed bool
	Anchor string
}

// hbarChart draws a horizontal bar chart: one labelled row per bar, an x
// axis from 0 with ticks formatted by tick, and reference lines.
func hbarChart(title, subtitle, xLabel string, bars []hbar, refs []refLine, tick func(float64) string, m meta) []byte {
	const (
		rowH, barH, groupGap = 26.0, 18.0, 10.0
		size                 = 13.0
		top                  = 92.0 // first bar; reference labels above it
	)
	labelW, textW, xmax := 0.0, 0.0, 0.0
	for _, b := range bars {
		labelW = max(labelW, textWidth(b.Label, size))
		textW = max(textW, textWidth(b.Text, size))
		xmax = max(xmax, b.Value, b.Hi)
	}
	for _, r := range refs {
		xmax = max(xmax, r.X)
	}
	step := niceStep(xmax * 1.05 / 6)
	xmax = math.Ceil(xmax*1.05/step) * step

	left := margin + labelW + 12
	w := chartWidth(left+560+textW+16+margin, title, subtitle, m)
	plotW := w - left - textW - 16 - margin
	x := func(v float64) float64 { return left + v/xmax*plotW }

	y := top
	rows := make([]float64, len(bars))
	for i, b := range bars {
		if b.Gap && i > 0 {
			y += groupGap
		}
		rows[i] = y
		y += rowH
	}
	bottom := y
	h := bottom + 50 + footerH

	c := newCanvas(w, h)
	c.header(title, subtitle)
	for v := 0.0; v <= xmax+step/1000; v += step {
		c.line(x(v), top-6, x(v), bottom, colGrid, 1, "")
		c.text(x(v), bottom+18, `font-size="11" text-anchor="middle" fill="`+colMuted+`"`, tick(v))
	}
	c.line(left, bottom, left+plotW, bottom, colAxis, 1, "")
	c.line(left, top-6, left, bottom, colAxis, 1, "")
	c.text(left+plotW/2, bottom+38, `font-size="12" text-anchor="middle"`, xLabel)
	for i, b := range bars {
		yb := rows[i] + (rowH-barH)/2
		c.rect(left, yb, math.Max(x(b.Value)-left, 1), barH, b.Color)
		c.text(left-8, yb+barH/2+4.5, `font-size="13" text-anchor="end"`, b.Label)
		end := x(b.Value)
		if b.Hi > 0 {
			ym := yb + barH/2
			c.line(x(b.Lo), ym, x(b.Hi), ym, colText, 1.5, "")
			c.line(x(b.Lo), ym-5, x(b.Lo), ym+5, colText, 1.5, "")
			c.line(x(b.Hi), ym-5, x(b.Hi), ym+5, colText, 1.5, "")
			end = max(end, x(b.Hi))
		}
		c.text(valueX(end+6, textWidth(b.Text, size), refs, x), yb+barH/2+4.5, `font-size="13"`, b.Text)
	}
	for _, r := range refs {
		dash := ""
		if r.Dashed {
			dash = "6 4"
		}
		c.line(x(r.X), top-14, x(r.X), bottom, colText, 1.5, dash)
		dx := 4.0
		if r.Anchor == "end" {
			dx = -4
		}
		c.text(x(r.X)+dx, top-8, `font-size="11" text-anchor="`+r.Anchor+`"`, r.Label)
	}
	c.footer(h, m)
	return c.bytes()
}

// valueX returns where a bar's value text of width w goes: at tx, or
// past the reference lines (at plot positions x(r.X)) it would cross.
func valueX(tx, w float64, refs []refLine, x func(float64) float64) float64 {
	rs := slices.Clone(refs)
	slices.SortFunc(rs, func(a, b refLine) int { return cmp.Compare(a.X, b.X) })
	for _, r := range rs {
		if rx := x(r.X); rx >= tx-3 && rx <= tx+w+3 {
			tx = rx + 5
		}
	}
	return tx
}

// point is one point of a line chart's series.
type point struct{ X, Y float64 }

// series is one line of a line chart.
type series struct {
	Name   string
	Color  string
	Dashed bool
	Points []point
}

// lineChart draws series against a log2 x axis with ticks at xTicks, a
// y axis from 0, and a legend on the right.
func lineChart(title, subtitle, xLabel, yLabel string, xTicks []float64, ss []series, m meta) []byte {
	const (
		left, top, plotW, plotH = 100.0, 84.0, 600.0, 360.0
		legendRow               = 22.0
	)
	legendW, ymax := 0.0, 0.0
	for _, s := range ss {
		legendW = max(legendW, 36+textWidth(s.Name, 12))
		for _, p := range s.Points {
			ymax = max(ymax, p.Y)
		}
	}
	step := niceStep(max(ymax, 1) * 1.08 / 5)
	ymax = math.Ceil(max(ymax, 1)*1.08/step) * step
	w := chartWidth(left+plotW+30+legendW+margin, title, subtitle, m)
	bottom := top + plotH
	h := bottom + 56 + footerH

	lo, hi := math.Log2(xTicks[0]), math.Log2(xTicks[len(xTicks)-1])
	x := func(v float64) float64 { return left + 20 + (math.Log2(v)-lo)/(hi-lo)*(plotW-40) }
	y := func(v float64) float64 { return bottom - v/ymax*plotH }

	c := newCanvas(w, h)
	c.header(title, subtitle)
	for v := 0.0; v <= ymax+step/1000; v += step {
		c.line(left, y(v), left+plotW, y(v), colGrid, 1, "")
		c.text(left-8, y(v)+4, `font-size="11" text-anchor="end" fill="`+colMuted+`"`, groupDigits(v))
	}
	for _, t := range xTicks {
		c.line(x(t), bottom, x(t), bottom+5, colAxis, 1, "")
		c.text(x(t), bottom+19, `font-size="11" text-anchor="middle" fill="`+colMuted+`"`, fmt.Sprintf("%g", t))
	}
	c.line(left, bottom, left+plotW, bottom, colAxis, 1, "")
	c.line(left, top, left, bottom, colAxis, 1, "")
	c.text(left+plotW/2, bottom+42, `font-size="12" text-anchor="middle"`, xLabel)
	cy := top + plotH/2
	c.text(28, cy, fmt.Sprintf(`font-size="12" text-anchor="middle" transform="rotate(-90 28 %.1f)"`, cy), yLabel)

	for i, s := range ss {
		dash := ""
		if s.Dashed {
			dash = "7 5"
		}
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.X), y(p.Y)))
		}
		fmt.Fprintf(&c.b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"", strings.Join(pts, " "), s.Color)
		if dash != "" {
			fmt.Fprintf(&c.b, " stroke-dasharray=\"%s\"", dash)
		}
		c.b.WriteString("/>\n")
		fill := s.Color
		if s.Dashed {
			fill = "#ffffff"
		}
		for _, p := range s.Points {
			fmt.Fprintf(&c.b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>\n", x(p.X), y(p.Y), fill, s.Color)
		}
		ly := top + 10 + float64(i)*legendRow
		lx := left + plotW + 30
		c.line(lx, ly, lx+28, ly, s.Color, 2, dash)
		c.text(lx+36, ly+4, `font-size="12"`, s.Name)
	}
	c.footer(h, m)
	return c.bytes()
}

// groupDigits formats v rounded to an integer with thousands separators:
// 1234567 → "1,234,567".
func groupDigits(v float64) string {
	s := fmt.Sprintf("%.0f", math.Abs(v))
	var b strings.Builder
	if v <= -0.5 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
