package scenario

import (
	"fmt"
	"time"

	"burrow/node"
	"burrow/overlay"
	"burrow/sim"
)

// e5Group is a set of nodes with the same settings.
type e5Group struct {
	from, to int // node indices [from, to)
	s, k     int // k == 0: log2 of the estimated size
	onDemand bool
}

// e5Groups are the paper's: nodes 1–8 s=1 k=log n without on-demand
// links; 9–16 s=2 k=1 with; 17–24 s=2 k=log n without; 25–32 s=2 k=log n
// with.
var e5Groups = []e5Group{{0, 8, 1, 0, false}, {8, 16, 2, 1, true}, {16, 24, 2, 0, false}, {24, 32, 2, 0, true}}

// e5Quiet is how long the converged overlay is watched.
const (
	e5Quiet  = 10 * time.Minute
	e5Wait   = 5 * time.Minute
	e5Sample = 500 * time.Millisecond
)

func runE5(o Options) (*Result, error) {
	r := newResult("e5", "E5: stability with mixed per-node settings (n=32)", o)
	s := build(o, r, "e5", spec{n: 32, node: func(i int) sim.NodeConfig {
		for _, g := range e5Groups {
			if i >= g.from && i < g.to {
				return sim.NodeConfig{
					Params:   overlay.Params{Successors: g.s, LongDistance: g.k, Auto: g.k == 0},
					OnDemand: node.OnDemandConfig{Enabled: g.onDemand},
				}
			}
		}
		panic("e5: node outside the groups")
	}})
	// Stability is about the overlay once every node has the links it
	// wants: wait for the last long-distance links, which a busy target
	// may refuse a few times.
	for end := s.Elapsed() + e5Wait; s.Elapsed() < end; s.RunFor(time.Second) {
		if have, want := s.LongDistance(); have >= want {
			break
		}
	}
	have, want := s.LongDistance()
	r.note("quiet period starts at %v with %d of %d long-distance links up", s.Elapsed(), have, want)
	nodes := s.Nodes()
	// Watch every node's links: overlay links that appear or vanish after
	// convergence, and contact links (heal probes) opened meanwhile.
	start := make([]map[string]bool, len(nodes))
	seen := make([]map[string]bool, len(nodes))
	contacts := make([]map[string]bool, len(nodes))
	key := func(id fmt.Stringer, port uint32) string { return fmt.Sprintf("%s/%d", id, port) }
	for i, n := range nodes {
		start[i], seen[i], contacts[i] = map[string]bool{}, map[string]bool{}, map[string]bool{}
		for id, port := range n.OverlayLinks() {
			start[i][key(id, port)] = true
		}
	}
	for end := s.Elapsed() + e5Quiet; s.Elapsed() < end; {
		s.RunFor(e5Sample)
		for i, n := range nodes {
			for id, port := range n.OverlayLinks() {
				seen[i][key(id, port)] = true
			}
			for id, port := range n.ContactLinks() {
				contacts[i][key(id, port)] = true
			}
		}
	}
	t := r.table("stability", fmt.Sprintf("Links per group over %v after convergence", e5Quiet),
		"nodes", "s", "k", "on-demand", "overlay links (avg)", "created after convergence", "closed after convergence", "heal-probe links")
	perNode := []map[string]any{}
	for _, g := range e5Groups {
		links, created, closed, probes := 0, 0, 0, 0
		for i := g.from; i < g.to; i++ {
			end := map[string]bool{}
			for id, port := range nodes[i].OverlayLinks() {
				end[key(id, port)] = true
			}
			links += len(end)
			for k := range seen[i] {
				if !start[i][k] {
					created++
				}
			}
			for k := range start[i] {
				if !end[k] {
					closed++
				}
			}
			probes += len(contacts[i])
			perNode = append(perNode, map[string]any{"node": nodes[i].Name, "links": len(end), "heal_probes": len(contacts[i])})
		}
		k := fmt.Sprint(g.k)
		if g.k == 0 {
			k = "log2 n"
		}
		t.Add(fmt.Sprintf("%d–%d", g.from+1, g.to), g.s, k, g.onDemand, float64(links)/float64(g.to-g.from), created, closed, probes)
		r.check(fmt.Sprintf("nodes %d–%d stable", g.from+1, g.to), stableErr(created, closed))
	}
	r.Data["nodes"] = perNode
	inv := invariants(r, "e5", s)
	r.Data["invariants"] = inv
	r.note("overlay links are those either end keeps as successor, long-distance or on-demand; heal-probe links are the short contacts every node makes about once a minute to a remembered node, to merge rings split by a partition, and closes once answered")
	r.note("invariants after the quiet period: ring %s; broadcasts %d/%d delivered once; %d/%d pairs routable", inv.Ring, inv.Broadcasts.Delivered, inv.Broadcasts.Expected, inv.Probes.Answered, inv.Probes.Pairs)
	r.note("paper (E5): the overlay converged to a stable state where, in the absence of churn, no new links were being created")
	return r, r.Err()
}

func stableErr(created, closed int) error {
	if created+closed > 0 {
		return fmt.Errorf("%d overlay links created and %d closed after convergence", created, closed)
	}
	return nil
}
