package scenario

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/sim"
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

// TestE8MeasuresAnOutageFrameByFrame feeds E8's measures a flow whose
// frames sent during 300 ms after an event are lost and whose path is
// 10 ms longer afterwards.
func TestE8MeasuresAnOutageFrameByFrame(t *testing.T) {
	const ms = time.Millisecond
	event, outageEnd := 10*time.Second, 10300*ms
	f := &e8Flow{Flow: &sim.Flow{}}
	for sent := time.Duration(0); sent < 20*time.Second; sent += e8FrameEvery {
		fr := sim.Frame{Sent: sent, Arrived: sent + 20*ms, Acked: -1}
		switch {
		case sent >= event && sent < outageEnd:
			fr.Arrived = -1
		case sent >= outageEnd:
			fr.Arrived += 10 * ms
		}
		if fr.Arrived >= 0 {
			fr.Copies = 1
			if sent/e8FrameEvery%sim.AckEvery == 0 {
				fr.Acked = fr.Arrived + 20*ms
			}
		}
		f.Frames = append(f.Frames, fr)
	}
	f.arrivals, f.acks = deliveries(f.Frames)
	x := f.effect(event, 15*time.Second)
	perSecond := float64(time.Second / e8FrameEvery)
	if x.rateBefore != perSecond {
		t.Errorf("rate before = %v frames/s, want %v", x.rateBefore, perSecond)
	}
	// The last frame before the outage arrives 20 ms after its sending,
	// one spacing before the event, the first after it at 10.33 s: 310 ms
	// beyond the spacing.
	if x.lostTime != 310*ms || x.longestSilence != 310*ms {
		t.Errorf("lost time %v, longest silence %v; want 310ms each", x.lostTime, x.longestSilence)
	}
	lostFrames := int((outageEnd - event) / e8FrameEvery)
	if x.framesLost != lostFrames {
		t.Errorf("%d frames lost, want %d", x.framesLost, lostFrames)
	}
	// Delivery per bin falls in the first (it holds only the frames sent
	// during the last 20 ms before the event) and is back by the end of a
	// bin after delivery resumed at 10.33 s, within a bin.
	if x.fell != 0 || x.back < 330*ms || x.back > 330*ms+e8Bin {
		t.Errorf("fell below 80%% after %v, back after %v; want 0 and within a bin after 330ms", x.fell, x.back)
	}
	if ackSpacing := sim.AckEvery * e8FrameEvery; x.ackLostTime < 300*ms || x.ackLostTime > 300*ms+2*ackSpacing {
		t.Errorf("acks lost time %v, want 300ms plus up to two acks' spacing", x.ackLostTime)
	}
	quiet := f.effect(15*time.Second, 19*time.Second)
	if quiet.touched() || quiet.fell != -1 || quiet.back != -1 {
		t.Errorf("a quiet window measured %+v", quiet)
	}
	if sent, lost, dups := frameLosses(f.Frames, 0, 20*time.Second); sent != len(f.Frames) || lost != lostFrames || dups != 0 {
		t.Errorf("whole flow: %d sent, %d lost, %d duplicates; want %d, %d, 0", sent, lost, dups, len(f.Frames), lostFrames)
	}
}

// TestE8ChurnHitsTheFlowsPaths runs E8 on 16 nodes: every stop and kill
// hits a node inside a flow's path unless all such nodes are flows' ends,
// and each hit is reported.
func TestE8ChurnHitsTheFlowsPaths(t *testing.T) {
	r := newResult("e8", "", Options{Seed: 1})
	phases, events := r.table("flows", ""), r.table("events", "")
	data := runE8Size(Options{Seed: 1}, r, 16, phases, events)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	ends := map[int]bool{}
	for _, f := range data["flows"].([]map[string]any) {
		ends[f["src"].(int)], ends[f["dst"].(int)] = true, true
	}
	evs := data["events"].([]e8Event)
	hits := 0
	for _, e := range evs {
		if e.Kind == e8Restart {
			continue
		}
		hits += len(e.OnPath)
		for _, p := range e.Paths {
			for i := 1; len(e.OnPath) == 0 && i < len(p)-1; i++ {
				if !ends[p[i]] {
					t.Errorf("%s of %s at %v hit no flow's path, though %d is inside one: %v", e.Kind, e.Node, e.at, p[i], e.Paths)
				}
			}
		}
	}
	if len(evs) != 2*e8Churned || len(events.Rows) < hits {
		t.Errorf("%d events, %d rows for %d hits", len(evs), len(events.Rows), hits)
	}
	if len(phases.Rows) == 0 || len(phases.Rows)%2 != 0 || len(r.Figures) != 1 {
		t.Errorf("%d flow rows, %d figures", len(phases.Rows), len(r.Figures))
	}
}

// TestARevocationReachesEveryMember: in a formed overlay of 100 the run
// checks that every member learns a revocation handed to one of them and
// that the revoked member ends with no link.
func TestARevocationReachesEveryMember(t *testing.T) {
	r, err := runRevocation(Options{Seed: 3, Sizes: []int{100}})
	if err != nil {
		t.Fatal(err)
	}
	row := r.Tables[0].Rows[0]
	if row[1] != "99 of 99" {
		t.Fatalf("%s members learned the revocation, want 99 of 99", row[1])
	}
}

// TestPaperSizedScenariosTakeSizes runs E9, whose default is the paper's
// 225 nodes, at two other sizes: a row per size and method, labelled with
// its size, the graph of each size in the title, a CDF per size and
// method, and the invariants held at both sizes.
func TestPaperSizedScenariosTakeSizes(t *testing.T) {
	r, err := runE9(Options{Seed: 1, Sizes: []int{40, 64}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Title, "n=40,64") {
		t.Errorf("title %q does not name both sizes", r.Title)
	}
	paths := r.Tables[0]
	var labels []string
	for _, row := range paths.Rows {
		labels = append(labels, row[0])
	}
	want := []string{"n=40: Bounded Flood", "n=40: spanning tree (802.1D)", "n=64: Bounded Flood", "n=64: spanning tree (802.1D)"}
	if !slices.Equal(labels, want) {
		t.Errorf("rows %q, want %q", labels, want)
	}
	if !strings.Contains(paths.Title, "40 nodes, ") || !strings.Contains(paths.Title, "; 64 nodes, ") {
		t.Errorf("table title %q lacks a graph per size", paths.Title)
	}
	if len(r.Tables[1].Rows) != 6 || len(r.Figures) != 2 || len(r.Figures[0].Chart.Series) != 4 {
		t.Errorf("%d latency rows, %d figures; want 6 rows and 2 figures of 4 series", len(r.Tables[1].Rows), len(r.Figures))
	}
	for _, key := range []string{"n=40: invariants", "n=64: invariants"} {
		if _, ok := r.Data[key]; !ok {
			t.Errorf("no %q in the data", key)
		}
	}
	// Each pair talked before its frame was traced, so no bridge floods
	// it; the link probes the frame causes, and their answers, cross its
	// own path's links and are no flood.
	for _, note := range r.Notes {
		if strings.Contains(note, "traced frames were flooded") && !strings.Contains(note, ": 0 of ") {
			t.Errorf("frames flooded after their pairs talked: %s", note)
		}
	}
}

func TestE5GroupsAreQuarters(t *testing.T) {
	for _, n := range []int{32, 1000, 1003} {
		groups := e5Groups(n)
		if groups[0].from != 0 || groups[3].to != n {
			t.Errorf("n=%d: groups %v do not cover the nodes", n, groups)
		}
		for i, g := range groups {
			if g.to-g.from < n/4 || (i > 0 && g.from != groups[i-1].to) {
				t.Errorf("n=%d: group %d is %v", n, i, g)
			}
		}
	}
}

func TestOverlaysTooLargeToGrowAreColdStarted(t *testing.T) {
	for _, c := range []struct {
		asked bool
		n     int
		want  bool
	}{
		{false, failoverPaperN, false},
		{false, staggeredUpTo, false},
		{false, staggeredUpTo + 1, true},
		{false, 10000, true},
		{true, e9PaperN, true},
	} {
		if got := coldStarts(c.asked, c.n); got != c.want {
			t.Errorf("coldStarts(%v, %d) = %v, want %v", c.asked, c.n, got, c.want)
		}
	}
}

func TestAColdStartedCoreGrowsThroughItsMembers(t *testing.T) {
	const n, cold = 400, 100
	r := newResult("grow", "", Options{})
	s := sim.New(sim.Config{Seed: 3})
	nodes := make([]*sim.Node, n)
	for i := range nodes {
		nodes[i] = s.AddNode(uniform(2, 4, false)(i))
	}
	coldStartAndGrow(Options{}, r, "grow", s, nodes, cold)
	if err := r.Err(); err != nil {
		t.Fatalf("the cold-started core: %v", err)
	}
	if up := len(s.Ring()); up != n {
		t.Fatalf("%d nodes up after the growth, want %d", up, n)
	}
	if _, err := s.Converge(convergeLimit(n), convergeStable); err != nil {
		t.Fatal(err)
	}
	if have, want := s.LongDistance(); have != want {
		t.Errorf("%d of %d long-distance links up", have, want)
	}
	if _, err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}
