package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"burrow/nid"
	"burrow/overlay"
)

// maxListed bounds how many individual violations an error spells out.
const maxListed = 5

// sortedUp returns the running nodes of the given indices (all when nil),
// sorted by ID: the order of the true ring.
func (s *Sim) sortedUp(among []int) []*Node {
	var out []*Node
	if among == nil {
		for _, n := range s.nodes {
			if n.up {
				out = append(out, n)
			}
		}
	} else {
		for _, i := range among {
			if s.nodes[i].up {
				out = append(out, s.nodes[i])
			}
		}
	}
	slices.SortFunc(out, func(a, b *Node) int { return a.ID.Compare(b.ID) })
	return out
}

// CheckRing verifies the ring over the running nodes among the given
// indices (all nodes when nil): each one's successor is the next running
// node by ID, and the link to it is up and in its adjacency.
func (s *Sim) CheckRing(among []int) error {
	ring := s.sortedUp(among)
	var bad []string
	count := 0
	for i, n := range ring {
		if len(ring) < 2 {
			break
		}
		want := ring[(i+1)%len(ring)]
		got, ok := n.core.Successor()
		var problem string
		switch {
		case !ok:
			problem = fmt.Sprintf("%s has no successor, want %s", n.Name, want.Name)
		case got != want.ID:
			problem = fmt.Sprintf("%s has successor %s, want %s", n.Name, s.nameOf(got), want.Name)
		case !slices.Contains(n.core.Adjacency(), want.ID):
			problem = fmt.Sprintf("%s has no link to its successor %s", n.Name, want.Name)
		default:
			continue
		}
		count++
		if len(bad) < maxListed {
			bad = append(bad, problem)
		}
	}
	if count > 0 {
		return fmt.Errorf("ring inconsistent at %d of %d nodes: %v", count, len(ring), bad)
	}
	return nil
}

func (s *Sim) nameOf(id nid.ID) string {
	if i, ok := s.indexOf(id); ok {
		return s.nodes[i].Name
	}
	return id.Short()
}

// indexOf finds a node by ID.
func (s *Sim) indexOf(id nid.ID) (int, bool) {
	if len(s.byID) != len(s.nodes) {
		s.byID = make(map[nid.ID]int, len(s.nodes))
		for i, n := range s.nodes {
			s.byID[n.ID] = i
		}
	}
	i, ok := s.byID[id]
	return i, ok
}

// BroadcastCheck sums up where a set of broadcasts arrived.
type BroadcastCheck struct {
	Broadcasts int `json:"broadcasts"`
	Expected   int `json:"expected"`   // deliveries that should happen
	Delivered  int `json:"delivered"`  // expected deliveries that happened once
	Duplicates int `json:"duplicates"` // extra copies anywhere
	Missing    int `json:"missing"`    // expected deliveries that did not happen
	Stray      int `json:"stray"`      // deliveries across a partition or to the source
}

// CheckBroadcasts verifies that each broadcast reached every node that was
// up on its source's side exactly once, and no one else.
func (s *Sim) CheckBroadcasts(ids []int) (BroadcastCheck, error) {
	c := BroadcastCheck{Broadcasts: len(ids)}
	var bad []string
	for _, id := range ids {
		b := s.bcasts[id]
		for i, got := range b.count {
			want := 0
			if b.expected[i] {
				want = 1
				c.Expected++
			}
			switch {
			case want == 1 && got == 0:
				c.Missing++
			case want == 1:
				c.Delivered++
				c.Duplicates += int(got) - 1
			case got > 0:
				c.Stray += int(got)
			default:
				continue
			}
			if int(got) != want && len(bad) < maxListed {
				bad = append(bad, fmt.Sprintf("broadcast %d from %s reached %s %d times, want %d", id, s.nodes[b.src].Name, s.nodes[i].Name, got, want))
			}
		}
	}
	if c.Missing+c.Duplicates+c.Stray > 0 {
		return c, fmt.Errorf("broadcasts: %d missing, %d duplicates, %d stray of %d expected deliveries: %v", c.Missing, c.Duplicates, c.Stray, c.Expected, bad)
	}
	return c, nil
}

// ProbeCheck sums up probe flows between pairs.
type ProbeCheck struct {
	Pairs    int `json:"pairs"`
	Answered int `json:"answered"` // pairs with at least one probe answered
	// FirstTry counts pairs whose very first probe was answered: the
	// first probe also finds the path, racing the floods that teach it.
	FirstTry   int `json:"first_try"`
	Duplicates int `json:"duplicates"` // requests delivered more than once
}

// CheckProbes verifies that every probe flow got at least one answer and
// that no request was delivered twice.
func (s *Sim) CheckProbes(flows []*Flow) (ProbeCheck, error) {
	c := ProbeCheck{Pairs: len(flows)}
	var bad []string
	for _, f := range flows {
		if f.Delivered() > 0 {
			c.Answered++
		} else if len(bad) < maxListed {
			bad = append(bad, fmt.Sprintf("%s→%s unanswered", s.nodes[f.Src].Name, s.nodes[f.Dst].Name))
		}
		if len(f.Probes) > 0 && f.Probes[0].Replied >= 0 {
			c.FirstTry++
		}
		for _, p := range f.Probes {
			c.Duplicates += max(p.Deliveries-1, 0)
		}
	}
	if c.Answered < c.Pairs || c.Duplicates > 0 {
		return c, fmt.Errorf("probes: %d of %d pairs unanswered, %d duplicate requests: %v", c.Pairs-c.Answered, c.Pairs, c.Duplicates, bad)
	}
	return c, nil
}

// Invariants is the outcome of CheckInvariants.
type Invariants struct {
	Nodes      int            `json:"nodes"`
	Ring       string         `json:"ring"` // "ok" or what is wrong
	Broadcasts BroadcastCheck `json:"broadcasts"`
	Probes     ProbeCheck     `json:"probes"`
	// SampledSources and SampledPairs say whether the checks covered
	// every source and every pair or a random sample.
	SampledSources bool `json:"sampled_sources"`
	SampledPairs   bool `json:"sampled_pairs"`
}

// Limits of CheckInvariants: beyond these, sources and pairs are sampled.
const (
	invariantSources = 64
	invariantPairs   = 256
	invariantSettle  = 3 * time.Second
	pairSpacing      = 5 * time.Millisecond
)

// CheckInvariants checks, among the running nodes, burrow's invariants
// after convergence: the ring is consistent; a broadcast from each node
// (or from 64 random ones) reaches every other node exactly once; every
// ordered pair (or 256 random pairs) is routable: of three probes a
// second apart, like ping's, at least one is answered. Pairs start 5 ms
// apart, as hosts do not all start talking at once. It runs the
// simulation for a few virtual seconds to let the traffic arrive.
func (s *Sim) CheckInvariants() (Invariants, error) {
	up := s.sortedUp(nil)
	inv := Invariants{Nodes: len(up), Ring: "ok"}
	var errs []error
	if err := s.CheckRing(nil); err != nil {
		inv.Ring = err.Error()
		errs = append(errs, err)
	}
	sources := up
	if len(up) > invariantSources {
		inv.SampledSources = true
		sources = nil
		for _, i := range s.rng.Perm(len(up))[:invariantSources] {
			sources = append(sources, up[i])
		}
	}
	var ids []int
	for _, n := range sources {
		ids = append(ids, s.Broadcast(n.Index))
	}
	var pairs [][2]*Node
	if len(up)*(len(up)-1) <= invariantPairs {
		for _, a := range up {
			for _, b := range up {
				if a != b {
					pairs = append(pairs, [2]*Node{a, b})
				}
			}
		}
	} else {
		inv.SampledPairs = true
		for len(pairs) < invariantPairs {
			a, b := up[s.rng.IntN(len(up))], up[s.rng.IntN(len(up))]
			if a != b {
				pairs = append(pairs, [2]*Node{a, b})
			}
		}
	}
	// Probes start once the broadcasts are out, so each check sees its own
	// traffic only.
	s.RunFor(invariantSettle)
	var flows []*Flow
	start := s.Elapsed()
	for k, p := range pairs {
		at := start + time.Duration(k)*pairSpacing
		flows = append(flows, s.AddFlow(FlowConfig{Kind: Probes, Src: p[0].Index, Dst: p[1].Index, Every: time.Second, Start: at, Stop: at + 3*time.Second - 1}))
	}
	s.RunUntil(start + time.Duration(len(pairs))*pairSpacing + 3*time.Second + invariantSettle)
	var err error
	if inv.Broadcasts, err = s.CheckBroadcasts(ids); err != nil {
		errs = append(errs, err)
	}
	if inv.Probes, err = s.CheckProbes(flows); err != nil {
		errs = append(errs, err)
	}
	return inv, errors.Join(errs...)
}

// overlayReasons are the reasons that make a link part of the overlay.
// A link with none of them is a contact: a bootstrap, or a heal probe to a
// remembered node, closed again once it answered.
const overlayReasons = overlay.ReasonSuccessor | overlay.ReasonLongDistance | overlay.ReasonOnDemand | overlay.ReasonStatic

// OverlayLinks returns the node's up links that either end keeps for an
// overlay reason, by peer, with their port numbers; ContactLinks the other
// up links. Ports are never reused within an incarnation, so a link closed
// and opened again shows.
func (n *Node) OverlayLinks() map[nid.ID]uint32 { return n.links(true) }

// ContactLinks returns the node's up links without an overlay reason:
// bootstrap contacts and heal probes, closed once answered.
func (n *Node) ContactLinks() map[nid.ID]uint32 { return n.links(false) }

func (n *Node) links(overlayLinks bool) map[nid.ID]uint32 {
	m := make(map[nid.ID]uint32)
	if !n.up {
		return m
	}
	reasons := n.core.LinkReasons()
	for id, l := range n.core.Links().Links() {
		if r := reasons[id]; l.Up() && ((r[0]|r[1])&overlayReasons != 0) == overlayLinks {
			m[id] = l.Port
		}
	}
	return m
}

// overlayChanges counts the overlay links created or closed at every
// node since the last call (the first call counts every link).
func (s *Sim) overlayChanges() int {
	if len(s.lastLinks) < len(s.nodes) {
		s.lastLinks = append(s.lastLinks, make([]map[nid.ID]uint32, len(s.nodes)-len(s.lastLinks))...)
	}
	changes := 0
	for i, n := range s.nodes {
		cur, prev := n.OverlayLinks(), s.lastLinks[i]
		for id, port := range cur {
			if p, ok := prev[id]; !ok || p != port {
				changes++
			}
		}
		for id, port := range prev {
			if p, ok := cur[id]; !ok || p != port {
				changes++
			}
		}
		s.lastLinks[i] = cur
	}
	return changes
}

// LongDistance counts, over the running nodes, the long-distance links
// they keep for themselves and the number they want: k, or log2 of their
// size estimate with Params.Auto.
func (s *Sim) LongDistance() (have, want int) {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		size := n.core.Overlay().SizeEstimate
		if size >= 3 { // with two nodes every link is a successor link
			want += n.Config.Params.K(size)
		}
		for _, r := range n.core.LinkReasons() {
			if r[0]&overlay.ReasonLongDistance != 0 {
				have++
			}
		}
	}
	return have, want
}

// Converge runs until the overlay has settled, checking every second, and
// returns how long it took; it fails after limit. Settled means the ring
// is consistent and no overlay link was created or closed for stable,
// with every node holding the long-distance links it wants — or, when a
// few nodes keep asking in vain (targets refuse beyond their inbound
// limit), with no overlay link created or closed for three times stable.
func (s *Sim) Converge(limit, stable time.Duration) (time.Duration, error) {
	start := s.Elapsed()
	s.overlayChanges()
	quietSince := s.Elapsed()
	for s.Elapsed()-start < limit {
		s.RunFor(time.Second)
		if s.overlayChanges() > 0 {
			quietSince = s.Elapsed()
			continue
		}
		if s.Elapsed()-quietSince < stable {
			continue
		}
		quiet := s.Elapsed() - quietSince
		if have, want := s.LongDistance(); (have >= want || quiet >= 3*stable) && s.CheckRing(nil) == nil {
			return s.Elapsed() - start, nil
		}
	}
	have, want := s.LongDistance()
	return s.Elapsed() - start, fmt.Errorf("not converged after %v: overlay links last changed %v ago, %d of %d long-distance links up, ring: %v",
		limit, s.Elapsed()-quietSince, have, want, s.CheckRing(nil))
}

// Drops sums the cores' drop counters by reason over the running nodes,
// leaving out reasons that never happened.
func (s *Sim) Drops() map[string]uint64 {
	out := make(map[string]uint64)
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		for reason, c := range n.core.Stats().Drops() {
			if c > 0 {
				out[reason] += c
			}
		}
	}
	return out
}

// Ring returns the running nodes in ring order (by ID).
func (s *Sim) Ring() []*Node { return s.sortedUp(nil) }
