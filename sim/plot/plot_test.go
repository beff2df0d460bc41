package plot

import (
	"encoding/xml"
	"slices"
	"strings"
	"testing"
)

func TestCDFStepsThroughDistinctValues(t *testing.T) {
	s := CDF("x", []float64{3, 1, 2, 2})
	if !slices.Equal(s.X, []float64{1, 2, 3}) || !slices.Equal(s.Y, []float64{0.25, 0.75, 1}) {
		t.Fatalf("CDF = %v %v", s.X, s.Y)
	}
}

func TestTicksAreRoundAndCoverTheRange(t *testing.T) {
	got := ticks(0, 13.2)
	if !slices.Equal(got, []float64{0, 2, 4, 6, 8, 10, 12}) {
		t.Fatalf("ticks(0, 13.2) = %v", got)
	}
}

func TestSVGIsWellFormedWithEscapedText(t *testing.T) {
	c := Chart{Title: "a < b", XLabel: "n", YLabel: "hops", LogX: true, Series: []Series{
		{Name: "BF & more", X: []float64{8, 32, 10000}, Y: []float64{1, 2, 4}, Lines: true, Points: true},
		CDF("cdf", []float64{1, 2, 3}),
	}}
	svg := c.SVG()
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, svg)
	}
	for _, want := range []string{"a &lt; b", "BF &amp; more", ">10000<", ">1<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}
