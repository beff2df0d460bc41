package scenario

import (
	"fmt"
	"slices"
	"time"

	"burrow/nid"
	"burrow/overlay"
	"burrow/sim"
)

// failoverCase is one E3/E4 run: in an overlay of n nodes (the paper: 64)
// with s successors and k = 2, a node probes two targets every 100 ms
// while its first kills successors die.
type failoverCase struct {
	label  string
	n      int
	s      int
	target int // the first target is this many successor edges away
	kills  int
}

// failoverPaperN is the size of the paper's E3 and E4 overlays.
const failoverPaperN = 64

const (
	probeInterval = 100 * time.Millisecond
	failoverRun   = 60 * time.Second
)

func failoverTable(r *Result) *Table {
	return r.table("probes", "Probes every 100 ms from a node across the failure of its first successor(s)",
		"case", "target", "hops before", "probes after kill", "lost", "longest interruption", "answered again after", "hops after")
}

func runE3(o Options) (*Result, error) {
	sizes := o.paperSized(failoverPaperN)
	r := newResult("e3", fmt.Sprintf("E3: connectivity when the successor fails (n=%s, s=1, k=2)", sizesText(sizes)), o)
	t := failoverTable(r)
	for _, z := range sizes {
		failover(o, r, t, failoverCase{label: z.label("s=1, successor killed"), n: z.n, s: 1, target: 2, kills: 1})
	}
	r.note("targets: (1) the successor's successor, (2) the node's first long-distance peer clockwise beyond it; the successor is killed silently (no Leave)")
	r.note("paper (E3): the ping to the successor's successor failed when the successor was shut down and resumed once the overlay repaired itself; the ping to the long-distance peer was uninterrupted")
	return r, r.Err()
}

func runE4(o Options) (*Result, error) {
	sizes := o.paperSized(failoverPaperN)
	r := newResult("e4", fmt.Sprintf("E4: resilience to one and two adjacent failures (n=%s, s=2, k=2)", sizesText(sizes)), o)
	t := failoverTable(r)
	for _, z := range sizes {
		failover(o, r, t, failoverCase{label: z.label("s=2, successor killed"), n: z.n, s: 2, target: 3, kills: 1})
		failover(o, r, t, failoverCase{label: z.label("s=2, two successors killed"), n: z.n, s: 2, target: 3, kills: 2})
	}
	r.note("targets: (1) the node 3 successor edges away, (2) the node's first long-distance peer clockwise beyond it; the successors are killed silently (no Leave)")
	r.note("paper (E4): s=2 prevented the partition when one node was shut down; with both adjacent successors shut down the interruption appeared again")
	return r, r.Err()
}

// failover runs one case, adds a row per target and returns the probe
// outages after the kill, near target first.
func failover(o Options, r *Result, t *Table, c failoverCase) []outage {
	s := build(o, r, "failover", spec{n: c.n, node: func(int) sim.NodeConfig {
		return sim.NodeConfig{Params: overlay.Params{Successors: c.s, LongDistance: 2}}
	}})
	ring := s.Ring()
	var x, near, far *sim.Node
	for p := range ring {
		x, near = ring[p], ring[(p+c.target)%len(ring)]
		// The near target must be reached through the successors: not
		// over a link of x's own.
		if slices.Contains(x.Core().Adjacency(), near.ID) {
			continue
		}
		if far = longDistanceBeyond(s, x, near); far != nil {
			break
		}
	}
	if far == nil {
		r.check(c.label, fmt.Errorf("no node has a long-distance peer beyond a target it has no link to"))
		return nil
	}
	start := s.Elapsed() + time.Second
	flows := []*sim.Flow{
		s.AddFlow(sim.FlowConfig{Kind: sim.Probes, Src: x.Index, Dst: near.Index, Every: probeInterval, Start: start}),
		s.AddFlow(sim.FlowConfig{Kind: sim.Probes, Src: x.Index, Dst: far.Index, Every: probeInterval, Start: start}),
	}
	s.RunFor(5 * time.Second)
	kill := s.Elapsed()
	var killed []string
	for k := 1; k <= c.kills; k++ {
		v := ring[(indexIn(ring, x)+k)%len(ring)]
		v.Kill()
		killed = append(killed, v.Name)
	}
	s.RunFor(failoverRun)
	for _, f := range flows {
		f.StopFlow()
	}
	s.RunFor(time.Second)
	names := []string{fmt.Sprintf("%s (%d edges)", near.Name, c.target), far.Name + " (long-distance)"}
	rows := []map[string]any{}
	var outages []outage
	for i, f := range flows {
		before, after := splitAt(f.Probes, kill)
		o := outageOf(after, kill)
		outages = append(outages, o)
		t.Add(c.label, names[i], lastHops(before), len(after), o.lost, o.longest, o.back, lastHops(after))
		rows = append(rows, map[string]any{"target": names[i], "lost": o.lost, "longest_interruption_ms": o.longest.Milliseconds(), "probes": len(after)})
	}
	r.Data[c.label] = map[string]any{"node": x.Name, "killed": killed, "targets": rows}
	invariants(r, c.label, s)
	return outages
}

// longDistanceBeyond is x's first long-distance peer clockwise past after.
func longDistanceBeyond(s *sim.Sim, x, after *sim.Node) *sim.Node {
	reasons := x.Core().LinkReasons()
	for _, id := range x.Core().Adjacency() {
		r := reasons[id]
		if x.ID.Distance(id).Compare(x.ID.Distance(after.ID)) > 0 && (r[0]|r[1])&overlay.ReasonLongDistance != 0 {
			return nodeByID(s, id)
		}
	}
	return nil
}

func nodeByID(s *sim.Sim, id nid.ID) *sim.Node {
	for _, n := range s.Nodes() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

func indexIn(ring []*sim.Node, n *sim.Node) int {
	for i, m := range ring {
		if m == n {
			return i
		}
	}
	return -1
}

// splitAt splits probes into those sent before and after t.
func splitAt(probes []sim.Probe, t time.Duration) (before, after []sim.Probe) {
	for i, p := range probes {
		if p.Sent >= t {
			return probes[:i], probes[i:]
		}
	}
	return probes, nil
}

// outage sums up the probes after an event at t: how many were lost, the
// longest run of losses (from its first probe to the next answered one)
// and how long after t the probes were answered again for good.
type outage struct {
	lost          int
	longest, back time.Duration
}

func outageOf(probes []sim.Probe, t time.Duration) outage {
	var o outage
	runStart := time.Duration(-1)
	for i, p := range probes {
		if p.Replied < 0 {
			o.lost++
			if runStart < 0 {
				runStart = p.Sent
			}
			end := p.Sent + probeInterval
			if i+1 < len(probes) {
				end = probes[i+1].Sent
			}
			o.longest = max(o.longest, end-runStart)
			o.back = end - t
			continue
		}
		runStart = -1
	}
	return o
}

// lastHops is the hop count of the last answered probe, "-" if none.
func lastHops(probes []sim.Probe) string {
	for i := len(probes) - 1; i >= 0; i-- {
		if probes[i].Replied >= 0 {
			return fmt.Sprint(probes[i].Hops)
		}
	}
	return "-"
}
