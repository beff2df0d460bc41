package scenario

import (
	"fmt"
	"math"
	"time"

	"burrow/link"
	"burrow/overlay"
	"burrow/sim"
	"burrow/sim/plot"
)

// hopStats is what one node saw of the broadcasts it received: the
// average and the largest number of links they crossed.
type hopStats struct {
	avg  []float64 // by node index; NaN for nodes that are down
	max  []int
	nets []float64 // averages of the nodes that are up
}

// broadcastHops sends a broadcast from each source, 20 ms apart, checks
// that each reached every other running node exactly once, and returns
// the hops each node saw.
func broadcastHops(r *Result, what string, s *sim.Sim, sources []int) hopStats {
	ids := make([]int, len(sources))
	for k, src := range sources {
		s.RunFor(broadcastSpacing)
		ids[k] = s.Broadcast(src)
	}
	s.RunFor(3 * time.Second)
	_, err := s.CheckBroadcasts(ids)
	r.check(what+" broadcasts", err)
	n := len(s.Nodes())
	h := hopStats{avg: make([]float64, n), max: make([]int, n)}
	sum, count := make([]int, n), make([]int, n)
	for _, id := range ids {
		for i, hops := range s.BroadcastHops(id) {
			if hops > 0 {
				sum[i] += int(hops)
				count[i]++
				h.max[i] = max(h.max[i], int(hops))
			}
		}
	}
	for i := range h.avg {
		h.avg[i] = math.NaN()
		if count[i] > 0 {
			h.avg[i] = float64(sum[i]) / float64(count[i])
			h.nets = append(h.nets, h.avg[i])
		}
	}
	return h
}

const broadcastSpacing = 20 * time.Millisecond

// e7Timers slow the links' keepalives and rekeys down fivefold: paths
// depend on the overlay's shape only, and with k = log2 n a node of a
// 10,000-node overlay has some 30 links, whose keepalives would otherwise
// be most of the simulation's work.
var e7Timers = link.Timers{Keepalive: 10 * time.Second, DeadAfter: 30 * time.Second, RekeyAfter: 10 * time.Minute, RejectAfter: 15 * time.Minute}

// broadcastSample is how many broadcast sources large overlays use.
const broadcastSample = 300

// broadcastSources returns the nodes whose broadcasts measure the paths:
// every node, or broadcastSample random ones in overlays of more than
// twice that, where a broadcast from every node would cost n² deliveries.
func broadcastSources(s *sim.Sim) (sources []int, sampled bool) {
	n := len(s.Nodes())
	if n > 2*broadcastSample {
		return s.Rand().Perm(n)[:broadcastSample], true
	}
	sources = make([]int, n)
	for i := range sources {
		sources[i] = i
	}
	return sources, false
}

// paperTable1 is the EdgeVPN paper's Table 1: at n = 128, how many nodes
// had each maximum path length.
var paperTable1 = map[int]int{5: 1, 6: 14, 7: 32, 8: 21, 9: 27, 10: 22, 11: 8, 12: 3}

func runE7(o Options) (*Result, error) {
	r := newResult("e7", "E7: path length (hops) of broadcasts vs network size, s=2, k=log2 n", o)
	t := r.table("paths", "Per-node average and maximum hops from broadcasts (s=2, k=round(log2 n))",
		"n", "sources", "avg hops", "mean dev", "max of node maxima", "mean of node maxima", "½·log2 n", "converged at")
	chart := plot.Chart{Title: "Average path length vs network size (E7, Fig. 7)", XLabel: "nodes (log scale)", YLabel: "hops", LogX: true}
	var xs, avgs, maxes, ref []float64
	perSize := map[string]any{}
	for _, n := range o.sizes(8, 32, 128, 1000) {
		s := build(o, r, "e7", spec{n: n, node: func(int) sim.NodeConfig {
			return sim.NodeConfig{Params: overlay.Params{Successors: 2, Auto: true}, Timers: e7Timers}
		}, coldStart: true})
		converged := s.Elapsed()
		sources, sampled := broadcastSources(s)
		h := broadcastHops(r, fmt.Sprintf("n=%d", n), s, sources)
		nodeMax := make([]float64, 0, n)
		for i, m := range h.max {
			if !math.IsNaN(h.avg[i]) {
				nodeMax = append(nodeMax, float64(m))
			}
		}
		avg := mean(h.nets)
		t.Add(n, len(sources), avg, meanDeviation(h.nets), maxOf(h.max), mean(nodeMax), 0.5*math.Log2(float64(n)), converged)
		xs = append(xs, float64(n))
		avgs = append(avgs, avg)
		maxes = append(maxes, mean(nodeMax))
		ref = append(ref, 0.5*math.Log2(float64(n)))
		perSize[fmt.Sprint(n)] = map[string]any{"node_avg_hops": h.nets, "node_max_hops": nodeMax, "sources": len(sources), "sampled": sampled}
		if n == 128 {
			table1(r, h.max)
		}
		if sampled {
			r.note("n=%d: %d random broadcast sources; each node's maximum is over those sources only", n, len(sources))
		}
		o.logf("e7 n=%d: average %.2f hops", n, avg)
	}
	r.Data["sizes"] = perSize
	chart.Series = []plot.Series{
		{Name: "burrow: network average", X: xs, Y: avgs, Lines: true, Points: true},
		{Name: "burrow: mean of per-node maxima", X: xs, Y: maxes, Lines: true, Points: true},
		{Name: "½·log2 n (the paper's bound)", X: xs, Y: ref, Lines: true, Dashed: true},
	}
	r.Figures = append(r.Figures, Figure{Name: "path-length", Chart: chart})
	r.note("overlays are cold-started (every node within %v, its ring neighbour as contact) and run with keepalives every 10 s and rekeys every 10 min instead of 2 s and 2 min: neither changes the overlay's shape, and both keep 10,000 nodes affordable", coldStartOver)
	r.note("the EdgeVPN paper reports, for n = 8…128, a network average path length of about ½·log(n) (Fig. 7)")
	return r, r.Err()
}

// table1 adds the paper's Table 1 for n = 128 next to burrow's.
func table1(r *Result, nodeMax []int) {
	counts := map[int]int{}
	total := 0
	for _, m := range nodeMax {
		if m > 0 {
			counts[m]++
			total++
		}
	}
	t := r.table("table1", "Distribution of per-node maximum hops at n = 128 (paper's Table 1 alongside)",
		"max hops", "burrow nodes", "burrow cumulative %", "paper nodes", "paper cumulative %")
	lo, hi := 5, 12
	for m := range counts {
		lo, hi = min(lo, m), max(hi, m)
	}
	cum, paperCum := 0, 0
	for m := lo; m <= hi; m++ {
		cum += counts[m]
		paperCum += paperTable1[m]
		t.Add(m, counts[m], 100*float64(cum)/float64(total), paperTable1[m], 100*float64(paperCum)/128)
	}
}
