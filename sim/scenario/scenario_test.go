package scenario

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"burrow/sim/plot"
)

func TestSameSeedSameResult(t *testing.T) {
	// The failures, if any, are part of the result compared.
	encode := func(seed uint64) string {
		r, _ := runE3(Options{Seed: seed})
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b := encode(3), encode(3)
	if a != b {
		t.Fatalf("seed 3 gave two different results:\n%s\n%s", a, b)
	}
	if encode(4) == a {
		t.Fatal("seeds 3 and 4 gave the same result; the comparison proves nothing")
	}
}

// TestFailoverAsInThePaper checks E3 and E4 on 32 nodes: with one
// successor, killing it cuts the node off its successor's successor for a
// while, but not off a long-distance peer; with two successors one
// failure costs nothing, two adjacent ones cut again.
func TestFailoverAsInThePaper(t *testing.T) {
	cases := []struct {
		c        failoverCase
		nearLost bool
	}{
		{failoverCase{label: "s=1, 1 killed", n: 32, s: 1, target: 2, kills: 1}, true},
		{failoverCase{label: "s=2, 1 killed", n: 32, s: 2, target: 3, kills: 1}, false},
		{failoverCase{label: "s=2, 2 killed", n: 32, s: 2, target: 3, kills: 2}, true},
	}
	for _, tc := range cases {
		r := newResult("test", "", Options{Seed: 1})
		o := failover(Options{Seed: 1}, r, failoverTable(r), tc.c)
		if err := r.Err(); err != nil {
			t.Fatalf("%s: %v", tc.c.label, err)
		}
		if got := o[0].lost > 0; got != tc.nearLost {
			t.Errorf("%s: near target lost %d probes, want losses: %v", tc.c.label, o[0].lost, tc.nearLost)
		}
		if o[1].lost > 0 {
			t.Errorf("%s: long-distance peer lost %d probes, want none", tc.c.label, o[1].lost)
		}
		// The overlay repairs itself within the dead-peer timeout and a
		// few seconds of stabilization.
		if o[0].back > 15e9 {
			t.Errorf("%s: near target answered again only %v after the kill", tc.c.label, o[0].back)
		}
	}
}

func TestMixedSettingsStayStable(t *testing.T) {
	if _, err := runE5(Options{Seed: 2}); err != nil {
		t.Fatal(err)
	}
}

func TestWriteSavesTablesAndFigures(t *testing.T) {
	r, err := runE3(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Figures = append(r.Figures, Figure{Name: "probe", Chart: testChart()})
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "e3-probes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n"); lines != 3 {
		t.Errorf("e3-probes.csv has %d lines, want a header and two rows:\n%s", lines, csv)
	}
	var back Result
	if b, err := os.ReadFile(filepath.Join(dir, "e3.json")); err != nil || json.Unmarshal(b, &back) != nil || back.Scenario != "e3" {
		t.Errorf("e3.json does not read back: %v", err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "e3-probe.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("SVG is not well-formed XML: %v", err)
	}
}

func testChart() plot.Chart {
	return plot.Chart{Title: "probes", LogX: true, Series: []plot.Series{{Name: "a & b", X: []float64{8, 128, 1000}, Y: []float64{1, 2.5, 3}, Lines: true}}}
}
