// Package plot draws the simulator's charts as small standalone SVG files:
// line, point and step series on linear or logarithmic axes, with ticks,
// labels and a legend. It knows just enough to redraw the EdgeVPN paper's
// figures from burrow's numbers.
package plot

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
)

// Series is one set of points.
type Series struct {
	Name string
	X, Y []float64
	// Lines joins the points; Step joins them as a staircase (for CDFs);
	// Points marks each one. With none set, points are drawn.
	Lines, Step, Points bool
	Dashed              bool
}

// Chart is a plot with axes.
type Chart struct {
	Title, XLabel, YLabel string
	LogX                  bool
	// YMin and YMax fix the y range when YMax > YMin; otherwise it fits.
	YMin, YMax float64
	Series     []Series
}

const (
	width, height            = 640, 400
	left, right, top, bottom = 70, 20, 40, 60
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// SVG renders the chart.
func (c Chart) SVG() []byte {
	xmin, xmax, ymin, ymax := c.bounds()
	px := func(x float64) float64 {
		if c.LogX {
			x, xmin, xmax := math.Log10(x), math.Log10(xmin), math.Log10(xmax)
			return left + (x-xmin)/(xmax-xmin)*(width-left-right)
		}
		return left + (x-xmin)/(xmax-xmin)*(width-left-right)
	}
	py := func(y float64) float64 {
		return height - bottom - (y-ymin)/(ymax-ymin)*(height-top-bottom)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="14">%s</text>`+"\n", width/2, html.EscapeString(c.Title))
	// Axes, grid and ticks.
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", left, top, width-left-right, height-top-bottom)
	for _, x := range c.xTicks(xmin, xmax) {
		X := px(x)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", X, top, X, height-bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", X, height-bottom+16, label(x))
	}
	for _, y := range ticks(ymin, ymax) {
		Y := py(y)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, Y, width-right, Y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, Y+4, label(y))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (left+width-right)/2, height-18, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", (top+height-bottom)/2, (top+height-bottom)/2, html.EscapeString(c.YLabel))
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		if (s.Lines || s.Step) && len(s.X) > 0 {
			var d bytes.Buffer
			for j := range s.X {
				switch {
				case j == 0:
					fmt.Fprintf(&d, "M%.1f %.1f", px(s.X[j]), py(s.Y[j]))
				case s.Step:
					fmt.Fprintf(&d, " H%.1f V%.1f", px(s.X[j]), py(s.Y[j]))
				default:
					fmt.Fprintf(&d, " L%.1f %.1f", px(s.X[j]), py(s.Y[j]))
				}
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", d.String(), color, dash)
		}
		if s.Points || !s.Lines && !s.Step {
			for j := range s.X {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", px(s.X[j]), py(s.Y[j]), color)
			}
		}
		// Legend, top left inside the frame.
		ly := top + 16 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+10, ly-4, left+34, ly-4, color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+40, ly, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// bounds fits the axes to the data, starting at zero unless the x axis
// is logarithmic or the y range fixed.
func (c Chart) bounds() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	ymax = math.Inf(-1)
	for _, s := range c.Series {
		for j := range s.X {
			xmin, xmax = math.Min(xmin, s.X[j]), math.Max(xmax, s.X[j])
			ymax = math.Max(ymax, s.Y[j])
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax, ymax = 0, 1, 1
	}
	if c.LogX {
		xmin = math.Pow(10, math.Floor(math.Log10(xmin)))
		xmax = math.Pow(10, math.Ceil(math.Log10(xmax)))
	} else if xmin > 0 {
		xmin = 0
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if c.YMax > c.YMin {
		return xmin, xmax, c.YMin, c.YMax
	}
	if ymax <= 0 {
		ymax = 1
	}
	return xmin, xmax, 0, ymax * 1.1
}

func (c Chart) xTicks(min, max float64) []float64 {
	if !c.LogX {
		return ticks(min, max)
	}
	var out []float64
	for x := min; x <= max*1.0001; x *= 10 {
		out = append(out, x)
	}
	return out
}

// ticks returns about six round values covering [min, max].
func ticks(min, max float64) []float64 {
	span := max - min
	step := math.Pow(10, math.Floor(math.Log10(span/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 7 {
			step *= m
			break
		}
	}
	var out []float64
	for v := math.Ceil(min/step) * step; v <= max+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func label(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// CDF returns the empirical cumulative distribution of values as a step
// series: for each distinct value, the fraction of values at or below it.
func CDF(name string, values []float64) Series {
	sorted := slices.Sorted(slices.Values(values))
	s := Series{Name: name, Step: true}
	for i, v := range sorted {
		if i+1 < len(sorted) && sorted[i+1] == v {
			continue
		}
		s.X = append(s.X, v)
		s.Y = append(s.Y, float64(i+1)/float64(len(sorted)))
	}
	return s
}
