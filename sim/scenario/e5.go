package scenario

import (
	"fmt"
	"time"

	"burrow/nid"
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

// e5PaperN is the size of the paper's E5 overlay.
const e5PaperN = 32

// e5Groups are the paper's, as quarters of n (the last takes what n/4
// leaves over): at n = 32 nodes 1–8 s=1 k=log n without on-demand links;
// 9–16 s=2 k=1 with; 17–24 s=2 k=log n without; 25–32 s=2 k=log n with.
func e5Groups(n int) []e5Group {
	q := n / 4
	return []e5Group{{0, q, 1, 0, false}, {q, 2 * q, 2, 1, true}, {2 * q, 3 * q, 2, 0, false}, {3 * q, n, 2, 0, true}}
}

// linkKey names a link: its peer and the peer's port.
type linkKey struct {
	peer nid.ID
	port uint32
}

// e5Quiet is how long the converged overlay is watched.
const (
	e5Quiet  = 10 * time.Minute
	e5Wait   = 5 * time.Minute
	e5Sample = 500 * time.Millisecond
)

func runE5(o Options) (*Result, error) {
	sizes := o.paperSized(e5PaperN)
	r := newResult("e5", fmt.Sprintf("E5: stability with mixed per-node settings (n=%s)", sizesText(sizes)), o)
	t := r.table("stability", fmt.Sprintf("Links per group over %v after convergence", e5Quiet),
		"nodes", "s", "k", "on-demand", "overlay links (avg)", "created after convergence", "closed after convergence", "heal-probe links")
	invs := make([]sim.Invariants, len(sizes))
	for i, z := range sizes {
		invs[i] = runE5Size(o, r, t, z)
	}
	r.note("overlay links are those either end keeps as successor, long-distance or on-demand; heal-probe links are the short contacts every node makes about once a minute to a remembered node, to merge rings split by a partition, and closes once answered")
	for i, inv := range invs {
		r.sizedNote(sizes[i], "invariants after the quiet period: ring %s; broadcasts %d/%d delivered once; %d/%d pairs routable", inv.Ring, inv.Broadcasts.Delivered, inv.Broadcasts.Expected, inv.Probes.Answered, inv.Probes.Pairs)
	}
	r.note("paper (E5): the overlay converged to a stable state where, in the absence of churn, no new links were being created")
	return r, r.Err()
}

// runE5Size builds an overlay of z.n nodes in the four groups, watches it
// for e5Quiet, adds a row per group to t and returns the invariants
// checked after.
func runE5Size(o Options, r *Result, t *Table, z sized) sim.Invariants {
	groups := e5Groups(z.n)
	s := build(o, r, "e5", spec{n: z.n, node: func(i int) sim.NodeConfig {
		for _, g := range groups {
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
	r.sizedNote(z, "quiet period starts at %v with %d of %d long-distance links up", s.Elapsed(), have, want)
	nodes := s.Nodes()
	// Watch every node's links: overlay links that appear or vanish after
	// convergence, and contact links (heal probes) opened meanwhile.
	start := make([]map[linkKey]bool, len(nodes))
	seen := make([]map[linkKey]bool, len(nodes))
	contacts := make([]map[linkKey]bool, len(nodes))
	for i, n := range nodes {
		start[i], seen[i], contacts[i] = map[linkKey]bool{}, map[linkKey]bool{}, map[linkKey]bool{}
		for id, port := range n.OverlayLinks() {
			start[i][linkKey{id, port}] = true
		}
	}
	for end := s.Elapsed() + e5Quiet; s.Elapsed() < end; {
		s.RunFor(e5Sample)
		for i, n := range nodes {
			for id, port := range n.OverlayLinks() {
				seen[i][linkKey{id, port}] = true
			}
			for id, port := range n.ContactLinks() {
				contacts[i][linkKey{id, port}] = true
			}
		}
	}
	perNode := []map[string]any{}
	for _, g := range groups {
		links, created, closed, probes := 0, 0, 0, 0
		for i := g.from; i < g.to; i++ {
			end := map[linkKey]bool{}
			for id, port := range nodes[i].OverlayLinks() {
				end[linkKey{id, port}] = true
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
		members := fmt.Sprintf("%d–%d", g.from+1, g.to)
		t.Add(z.label(members), g.s, k, g.onDemand, float64(links)/float64(g.to-g.from), created, closed, probes)
		r.check(z.label(fmt.Sprintf("nodes %s stable", members)), stableErr(created, closed))
	}
	r.Data[z.label("nodes")] = perNode
	inv := invariants(r, z.label("e5"), s)
	r.Data[z.label("invariants")] = inv
	return inv
}

func stableErr(created, closed int) error {
	if created+closed > 0 {
		return fmt.Errorf("%d overlay links created and %d closed after convergence", created, closed)
	}
	return nil
}
