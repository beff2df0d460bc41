package node

import (
	"slices"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// The topology crawl lets an operator's map show the whole overlay, not
// just this node's links: while someone watches (CrawlTopology keeps it
// going), the node asks every node it knows of for its links, and the
// nodes those name, and so on — one small request per node every few
// seconds, up to maxTopologyNodes.
const (
	maxTopologyNodes  = 256
	topologyRefresh   = 3 * time.Second
	topologyWatch     = 30 * time.Second
	topologyPerTick   = 32
	topologyForgetAge = 20 * time.Second
)

type topoEntry struct {
	name      string
	neighbors []overlay.Neighbor
	updated   time.Time
	asked     time.Time
}

type topologyState struct {
	entries map[nid.ID]*topoEntry
	until   time.Time // crawl while now is before this
}

// CrawlTopology starts (or keeps going) the crawl for topologyWatch, and
// asks the nodes learned of since the last tick at once: someone looking
// for a member by name calls it again and again, and finds it in round
// trips rather than ticks.
func (n *Node) CrawlTopology(now time.Time) {
	n.now = now
	if n.topo.entries == nil {
		n.topo.entries = make(map[nid.ID]*topoEntry)
	}
	n.topo.until = now.Add(topologyWatch)
	n.topologyTick(now)
	n.publishIfDirty()
}

// pathOf names the kind of l's path. A direct endpoint that is the peer's
// TURN relayed address crosses that server, so the path is a TURN path;
// one at a private or link-local address is the peer's own address,
// reached without crossing a NAT: a LAN path.
func (n *Node) pathOf(l *link.Link) string {
	ep := l.Endpoint()
	if ep.Path() != "direct" {
		return ep.Path()
	}
	if ps := n.ov.peers[l.Peer.ID]; ps != nil && ps.info.TURN.IsValid() && ep.Addr == ps.info.TURN {
		return "turn"
	}
	if a := ep.Addr.Addr().Unmap(); a.IsPrivate() || a.IsLinkLocalUnicast() {
		return "lan"
	}
	return "direct"
}

func pathCode(path string) uint8 { return uint8(max(slices.Index(pathNames[:], path), 0)) }

var pathNames = [...]string{"direct", "relay", "turn", "websocket", "lan"}

// neighbors lists this node's up links for a topology answer.
func (n *Node) neighbors() []overlay.Neighbor {
	var out []overlay.Neighbor
	for _, id := range n.adjacency {
		l := n.links.Links()[id]
		if l == nil {
			continue
		}
		var reasons overlay.Reason
		if ps := n.ov.peers[id]; ps != nil {
			reasons = ps.local
		}
		out = append(out, overlay.Neighbor{ID: id, Reasons: reasons, Path: pathCode(n.pathOf(l))})
	}
	return out
}

func (n *Node) topologyTick(now time.Time) {
	t := &n.topo
	if t.entries == nil || now.After(t.until) {
		return
	}
	for id, e := range t.entries {
		if now.Sub(e.updated) > topologyForgetAge && !e.updated.IsZero() {
			delete(t.entries, id)
		}
	}
	known := n.Adjacency()
	for _, s := range n.ov.ring.Successors(overlay.MaxSuccessors) {
		known = append(known, s.ID)
	}
	for _, e := range t.entries {
		for _, nb := range e.neighbors {
			known = append(known, nb.ID)
		}
	}
	slices.SortFunc(known, nid.ID.Compare)
	asked := 0
	for _, id := range slices.Compact(known) {
		if id == n.self || asked == topologyPerTick {
			continue
		}
		e := t.entries[id]
		if e == nil {
			if len(t.entries) >= maxTopologyNodes {
				continue
			}
			e = &topoEntry{}
			t.entries[id] = e
		}
		if now.Sub(e.asked) < topologyRefresh {
			continue
		}
		e.asked = now
		asked++
		n.originate(&overlay.Message{Type: overlay.Topology, Dest: id, Exact: true, Origin: n.self, Via: n.via(),
			ID: n.ov.rng.Uint64(), From: n.selfInfo()}, now)
	}
}

func (n *Node) answerTopology(m *overlay.Message, now time.Time) {
	n.reply(m, &overlay.Message{Type: overlay.TopologyReply, Name: n.cfg.Name, Neighbors: n.neighbors()}, now)
}

func (n *Node) takeTopology(m *overlay.Message, now time.Time) {
	if n.topo.entries == nil {
		return
	}
	e := n.topo.entries[m.Origin]
	if e == nil {
		if len(n.topo.entries) >= maxTopologyNodes {
			return
		}
		e = &topoEntry{}
		n.topo.entries[m.Origin] = e
	}
	e.name, e.neighbors, e.updated = m.Name, m.Neighbors, now
}

// TopologyView is the overlay as this node knows it.
type TopologyView struct {
	Self  string         `json:"self"`
	Nodes []TopologyNode `json:"nodes"`
	Links []TopologyLink `json:"links"`
}

// TopologyNode is one node of the map.
type TopologyNode struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Seen bool   `json:"seen"` // answered the crawl (or is this node)
}

// TopologyLink is one link, with the reasons its reporting end keeps it.
type TopologyLink struct {
	From    string   `json:"from"`
	To      string   `json:"to"`
	Reasons []string `json:"reasons"`
	Path    string   `json:"path"`
}

// Topology returns this node, its links and what the crawl learned.
func (n *Node) Topology() TopologyView {
	v := TopologyView{Self: n.self.String()}
	v.Nodes = append(v.Nodes, TopologyNode{ID: n.self.String(), Name: n.cfg.Name, Seen: true})
	add := func(from nid.ID, nbs []overlay.Neighbor) {
		for _, nb := range nbs {
			v.Links = append(v.Links, TopologyLink{From: from.String(), To: nb.ID.String(), Reasons: ReasonNames(nb.Reasons), Path: pathNames[min(int(nb.Path), len(pathNames)-1)]})
		}
	}
	add(n.self, n.neighbors())
	for _, id := range nid.SortedKeys(n.topo.entries) {
		e := n.topo.entries[id]
		name := e.name
		if l := n.links.Links()[id]; l != nil && name == "" {
			name = l.Peer.Name
		}
		v.Nodes = append(v.Nodes, TopologyNode{ID: id.String(), Name: name, Seen: !e.updated.IsZero()})
		add(id, e.neighbors)
	}
	return v
}
