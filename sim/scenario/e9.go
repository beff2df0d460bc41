package scenario

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"burrow/sim"
	"burrow/sim/plot"
)

const (
	e9PaperN = 225
	// e9Pairs pairs at every size: each costs a probe and a traced frame,
	// whatever n.
	e9Pairs = 300
	// WAN-like paths: 5 ms plus up to 40 ms more, fixed per pair of nodes.
	e9Latency = 5 * time.Millisecond
	e9Jitter  = 40 * time.Millisecond
)

// e9Method is how one forwarding method fared over the pairs.
type e9Method struct {
	hops, latency []float64
	load          map[[2]int32]int // flows per undirected link
}

func (m *e9Method) add(s *sim.Sim, path []int) {
	m.hops = append(m.hops, float64(len(path)-1))
	var d time.Duration
	for i := 1; i < len(path); i++ {
		d += s.Latency(s.Node(path[i-1]), s.Node(path[i]))
		m.load[undirected([2]int32{int32(path[i-1]), int32(path[i])})]++
	}
	m.latency = append(m.latency, float64(d.Microseconds())/1e3)
}

func runE9(o Options) (*Result, error) {
	sizes := o.paperSized(e9PaperN)
	r := newResult("e9", fmt.Sprintf("E9: Bounded Flood vs an 802.1D spanning tree on the same overlay (n=%s, s=2, k=log2 n)", sizesText(sizes)), o)
	t := r.table("paths", "",
		"forwarding", "avg hops", "max hops", "avg latency ms", "p90 latency ms", "links used", "busiest link (flows)", "flows on p90 link")
	tl := r.table("latency", "Share of pairs with a path latency under a threshold",
		"threshold", "Bounded Flood", "spanning tree")
	latency := plot.Chart{Title: "Path latency, BF vs STP (E9, Fig. 8)", XLabel: "one-way path latency (ms)", YLabel: "fraction of pairs", YMax: 1}
	hops := plot.Chart{Title: "Path length, BF vs STP (E9)", XLabel: "hops", YLabel: "fraction of pairs", YMax: 1}
	var graphs []string
	for _, z := range sizes {
		s := build(o, r, "e9", spec{n: z.n, node: uniform(2, 0, true), latency: e9Latency, jitter: e9Jitter})
		g := s.Graph()
		graphs = append(graphs, fmt.Sprintf("%d nodes, %d links", z.n, g.Edges()))
		bf, stp := e9Paths(o, r, z, s, g.SpanningTree())
		for _, m := range []struct {
			name string
			m    *e9Method
		}{{"Bounded Flood", bf}, {"spanning tree (802.1D)", stp}} {
			var loads []float64
			for _, c := range m.m.load {
				loads = append(loads, float64(c))
			}
			t.Add(z.label(m.name), mean(m.m.hops), int(maxOf(m.m.hops)), mean(m.m.latency), percentile(m.m.latency, 90), len(loads), int(maxOf(loads)), int(percentile(loads, 90)))
			r.Data[z.label(m.name)] = map[string]any{"hops": m.m.hops, "latency_ms": m.m.latency, "link_flows": loads}
		}
		for _, ms := range []float64{36, 60, 100} {
			tl.Add(z.label(fmt.Sprintf("%.0f ms", ms)), share(bf.latency, ms), share(stp.latency, ms))
		}
		latency.Series = append(latency.Series, plot.CDF(z.label("Bounded Flood"), bf.latency), plot.CDF(z.label("spanning tree"), stp.latency))
		hops.Series = append(hops.Series, plot.CDF(z.label("Bounded Flood"), bf.hops), plot.CDF(z.label("spanning tree"), stp.hops))
		r.Data[z.label("invariants")] = invariants(r, z.label("e9"), s)
	}
	t.Title = fmt.Sprintf("%d random pairs over the same overlay graph (%s)", e9Pairs, strings.Join(graphs, "; "))
	r.Figures = append(r.Figures, Figure{Name: "latency", Chart: latency}, Figure{Name: "hops", Chart: hops})
	r.note("latency is the sum of the simulated one-way link latencies along the path (%v plus up to %v per pair of nodes); the simulator has no bandwidth model, so link contention is shown as the number of flows sharing a link", e9Latency, e9Jitter)
	r.note("the spanning tree is the one 802.1D converges to with equal link costs: root = lowest node ID, each bridge's root port on a shortest path, ties to the lower ID")
	r.note("paper (E9, n=225): BF had 97%% more paths with latency under 36 ms than STP, and 2.2x as many paths above 60 Mbps (37%% vs 18%%)")
	return r, r.Err()
}

// e9Paths draws e9Pairs random pairs of s's nodes and returns their paths
// under Bounded Flood, traced, and through tree.
func e9Paths(o Options, r *Result, z sized, s *sim.Sim, tree sim.Tree) (bf, stp *e9Method) {
	rng := rand.New(rand.NewPCG(o.Seed, 9))
	var pairs [][2]int
	for len(pairs) < e9Pairs {
		if a, b := rng.IntN(z.n), rng.IntN(z.n); a != b {
			pairs = append(pairs, [2]int{a, b})
		}
	}
	// BF: the path a unicast frame takes once the pair has talked (a
	// probe and its answer teach both ways), traced hop by hop.
	for k, p := range pairs {
		s.AddFlow(sim.FlowConfig{Kind: sim.Probes, Src: p[0], Dst: p[1], Start: s.Elapsed() + time.Duration(k)*5*time.Millisecond})
	}
	s.RunFor(e9Pairs*5*time.Millisecond + 2*time.Second)
	var frames []*sim.Flow
	for k, p := range pairs {
		frames = append(frames, s.AddFlow(sim.FlowConfig{Kind: sim.OneWay, Src: p[0], Dst: p[1], Start: s.Elapsed() + time.Duration(k)*5*time.Millisecond, Trace: true}))
	}
	s.RunFor(e9Pairs*5*time.Millisecond + 2*time.Second)
	bf = &e9Method{load: map[[2]int32]int{}}
	stp = &e9Method{load: map[[2]int32]int{}}
	untraced, flooded := 0, 0
	var why []string
	for k, f := range frames {
		path, err := f.Path()
		if err != nil {
			untraced++
			if len(why) < 3 {
				why = append(why, err.Error())
			}
			continue
		}
		if crossedOffPath(f, path) {
			flooded++ // a bridge on the way did not know the destination
		}
		bf.add(s, path)
		stp.add(s, tree.Path(pairs[k][0], pairs[k][1]))
	}
	if untraced > 0 {
		r.check(z.label("bf paths"), fmt.Errorf("%d of %d frames were not delivered: %v", untraced, len(frames), why))
	}
	r.sizedNote(z, "%d of %d traced frames were flooded on the way by a bridge that did not know the destination; their path is the flood's", flooded, len(frames))
	return bf, stp
}

// crossedOffPath reports whether the traced flow f sent a datagram over
// a link that is not one of its path's, either way: a bridge flooded it.
// The frame's path links, both ways, carry the link probes it caused and
// their answers too.
func crossedOffPath(f *sim.Flow, path []int) bool {
	onPath := map[[2]int32]bool{}
	for i := 1; i < len(path); i++ {
		a, b := int32(path[i-1]), int32(path[i])
		onPath[[2]int32{a, b}], onPath[[2]int32{b, a}] = true, true
	}
	for l := range f.Links() {
		if !onPath[l] {
			return true
		}
	}
	return false
}

// share is the percentage of values below limit.
func share(v []float64, limit float64) string {
	c := 0
	for _, x := range v {
		if x < limit {
			c++
		}
	}
	return fmt.Sprintf("%.0f%%", 100*float64(c)/float64(max(len(v), 1)))
}
