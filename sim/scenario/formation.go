package scenario

import (
	"fmt"
	"time"

	"burrow/sim"
)

// A cold start as a user meets it: every node of a cluster starts within
// formationSpread, each configured with the same single bootstrap contact.
const (
	formationSpread = time.Second
	formationLimit  = 5 * time.Minute
	formationSample = 100 * time.Millisecond
	formationIdle   = 60 * time.Second
)

func runFormation(o Options) (*Result, error) {
	r := newResult("formation", fmt.Sprintf("Cold start: every node starts within %v, each knowing only the first (s=2, k=4)", formationSpread), o)
	ring := r.table("ring", "From the first start to the whole ring, and the phases of each node's join (seconds after its own start: median / 90th percentile / max)",
		"n", "all joined", "ring consistent", "first link", "joined", "settled", "long links", "all long links up", "unjoins", "broadcasts exactly once")
	cost := r.table("cost", fmt.Sprintf("What forming cost, and the idle traffic over %v once formed", formationIdle),
		"n", "control msgs per node", "handshakes per node", "idle B/s mean", "idle B/s max")
	data := map[string]any{}
	for _, n := range o.sizes(100, 1000) {
		s := sim.New(sim.Config{Seed: o.Seed, Progress: progressOf(o, "formation", n), ProgressEvery: 1 << 16})
		nodes := make([]*sim.Node, n)
		for i := range nodes {
			nodes[i] = s.AddNode(uniform(2, 4, false)(i))
		}
		nodes[0].Start()
		for _, nd := range nodes[1:] {
			nd.Config.Bootstrap = []int{0}
			s.After(time.Duration(s.Rand().Int64N(int64(formationSpread))), nd.Start)
		}
		allJoined, consistent := formTimes(s, nodes)
		o.logf("formation n=%d: all joined %v, ring consistent %v", n, allJoined, consistent)
		settled, err := s.Converge(convergeLimit(n), convergeStable)
		r.check(fmt.Sprintf("formation n=%d convergence", n), err)
		haveLD, wantLD := s.LongDistance()
		phases := map[string][]float64{}
		unjoins := 0
		for _, nd := range nodes {
			f := nd.Core().Formation()
			for name, v := range map[string]float64{"first link": f.FirstLinkAfter, "joined": f.JoinedAfter, "settled": f.SettledAfter, "long links": f.LongLinksAfter} {
				if v > 0 {
					phases[name] = append(phases[name], v)
				}
			}
			unjoins += f.Unjoins
		}
		spread := func(name string) string {
			v := phases[name]
			if len(v) < n {
				return fmt.Sprintf("%d of %d reached", len(v), n)
			}
			return fmt.Sprintf("%.2f / %.2f / %.2f", percentile(v, 50), percentile(v, 90), maxOf(v))
		}
		control := coreControl(s)
		var handshakes uint64
		for _, nd := range nodes {
			handshakes += nd.Core().Links().Stats().HandshakesStarted.Load()
		}
		var ids []int
		for i := range 5 {
			ids = append(ids, s.Broadcast(s.Rand().IntN(n)))
			s.RunFor(100 * time.Millisecond * time.Duration(i+1))
		}
		s.RunFor(2 * time.Second)
		bc, err := s.CheckBroadcasts(ids)
		r.check(fmt.Sprintf("formation n=%d broadcasts", n), err)
		before := traffic(s)
		s.RunFor(formationIdle)
		after := traffic(s)
		var perNode []float64
		for i := range after {
			perNode = append(perNode, float64(after[i].Sub(before[i]).TotalBytes())/formationIdle.Seconds())
		}
		ring.Add(n, allJoined, consistent, spread("first link"), spread("joined"), spread("settled"), spread("long links"),
			fmt.Sprintf("%d of %d, settled %v later", haveLD, wantLD, settled), unjoins,
			fmt.Sprintf("%d of %d", bc.Delivered, bc.Expected))
		cost.Add(n, float64(control)/float64(n), float64(handshakes)/float64(n), mean(perNode), maxOf(perNode))
		data[fmt.Sprint(n)] = map[string]any{"all_joined_s": allJoined.Seconds(), "consistent_s": consistent.Seconds(), "phases_s": phases, "unjoins": unjoins, "broadcasts": bc, "idle_bytes_per_s": perNode}
		invariants(r, fmt.Sprintf("n=%d", n), s)
	}
	r.Data["sizes"] = data
	r.note("consistent: every node's first successor and predecessor are the true neighbours by node ID, and the link to the successor is up")
	r.note("phases, per node from its own start: first link up; joined (link to its first successor up); settled (its successor names it as predecessor and its predecessor's link is up); all long-distance links up")
	r.note("unjoins: times a node that had joined stopped being joined, summed over the nodes")
	return r, r.Err()
}

// formTimes runs s until every node has joined and the ring is consistent
// — successors and predecessors — and returns when each happened.
func formTimes(s *sim.Sim, nodes []*sim.Node) (allJoined, consistent time.Duration) {
	start := s.Elapsed()
	for s.Elapsed()-start < formationLimit {
		s.RunFor(formationSample)
		joined := 0
		for _, nd := range nodes {
			if nd.Up() && nd.Core().Joined() {
				joined++
			}
		}
		if joined == len(nodes) && allJoined == 0 {
			allJoined = s.Elapsed() - start
		}
		if allJoined > 0 && s.CheckRing(nil) == nil && predecessorsTrue(s) {
			return allJoined, s.Elapsed() - start
		}
	}
	return allJoined, -1
}

// predecessorsTrue reports whether every running node's predecessor is
// the previous node by ID.
func predecessorsTrue(s *sim.Sim) bool {
	ring := s.Ring()
	for i, nd := range ring {
		want := ring[(i+len(ring)-1)%len(ring)]
		if got, ok := nd.Core().Predecessor(); !ok || got != want.ID {
			return false
		}
	}
	return true
}
