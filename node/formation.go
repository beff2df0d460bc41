package node

import (
	"slices"
	"time"

	"burrow/nid"
	"burrow/overlay"
)

// formation times a node's way onto the ring, so that an operator (and an
// experiment) can tell a forming network from a broken one, and see where
// a join spends its time.
type formation struct {
	started, firstLink, joined, settled, longLinks time.Time
	// unjoins counts the times the node stopped being joined.
	unjoins   int
	wasJoined bool
	// confirmedBy is the successor that last answered naming this node
	// its predecessor.
	confirmedBy nid.ID
}

// settled reports whether the node's place on the ring is confirmed from
// both sides: its first successor names it as predecessor, and its link
// to its predecessor is up, so broadcasts reach it through its
// predecessor's share.
func (n *Node) settled() bool {
	o := &n.ov
	succ := o.ring.Successors(1)
	pred, ok := o.ring.Predecessor()
	return o.joined && len(succ) > 0 && o.formation.confirmedBy == succ[0].ID && ok && n.upLink(pred.ID) != nil
}

// trackFormation records the moments the node joined, settled and got
// all its long-distance links, and counts falls back from joined.
func (n *Node) trackFormation(now time.Time) {
	o := &n.ov
	f := &o.formation
	if o.joined && f.joined.IsZero() {
		f.joined = now
	}
	if f.wasJoined && !o.joined {
		f.unjoins++
	}
	f.wasJoined = o.joined
	if f.settled.IsZero() && n.settled() {
		f.settled = now
	}
	if f.longLinks.IsZero() && o.joined && len(o.ld) == o.cfg.Params.K(o.ring.EstimateSize()) && n.longLinksUp() {
		f.longLinks = now
	}
}

// longLinksUp reports whether every long-distance slot has its link up.
func (n *Node) longLinksUp() bool {
	for _, s := range n.ov.ld {
		if s.peer == (nid.ID{}) || n.upLink(s.peer) == nil {
			return false
		}
	}
	return true
}

// FormationStatus says how far the node got onto the ring, and when.
type FormationStatus struct {
	// Settled: the successor names this node as its predecessor and the
	// predecessor's link is up.
	Settled bool `json:"settled"`
	// Seconds from the node's start to its first link, to joining (a link
	// to its first successor), to settling and to all its long-distance
	// links being up; omitted until reached.
	FirstLinkAfter float64 `json:"first_link_after_s,omitempty"`
	JoinedAfter    float64 `json:"joined_after_s,omitempty"`
	SettledAfter   float64 `json:"settled_after_s,omitempty"`
	LongLinksAfter float64 `json:"long_links_after_s,omitempty"`
	// Unjoins counts the times the node stopped being joined after it was.
	Unjoins int `json:"unjoins"`
}

func (n *Node) formationStatus() FormationStatus {
	f := &n.ov.formation
	after := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(f.started).Seconds()
	}
	return FormationStatus{
		Settled: n.settled(), FirstLinkAfter: after(f.firstLink), JoinedAfter: after(f.joined),
		SettledAfter: after(f.settled), LongLinksAfter: after(f.longLinks), Unjoins: f.unjoins,
	}
}

// stillJoined: a node joins when its link to its first successor is up,
// and stays joined while it has a link up to any joined node. Hearing of a
// closer successor it has no link to yet is no failure: it keeps its
// place in the ring until the new link is up. Losing every link to the
// ring is.
func (n *Node) stillJoined(succ []overlay.Info) bool {
	if len(succ) > 0 && n.upLink(succ[0].ID) != nil {
		return true
	}
	if !n.ov.joined {
		return false
	}
	for id, ps := range n.ov.peers {
		if ps.remoteJoined && !ps.closing && n.upLink(id) != nil {
			return true
		}
	}
	return false
}

// unsettled shortens the stabilization period: the neighbourhood changed,
// so the next exchange with the successor is due now.
func (n *Node) unsettled(now time.Time) {
	o := &n.ov
	o.stabilizeGap = min(fastStabilize, o.cfg.StabilizeEvery)
	o.stabilize = now
}

// quiet lengthens the stabilization period after an exchange with the
// successor taught nothing new.
func (n *Node) quiet(now time.Time) {
	o := &n.ov
	o.stabilizeGap = min(2*o.stabilizeGap, o.cfg.StabilizeEvery)
	o.stabilize = now.Add(o.stabilizeGap + o.jitter(o.stabilizeGap/2))
}

// tellPredecessors: when the node's predecessor changes, both ends of the
// change hear of it at once instead of at their next stabilization. The
// old predecessor has a new successor — until it links to it, broadcasts
// in its share of the ring miss the newcomer; the new one, when it is not
// linked to this node yet, learns that this node follows it.
func (n *Node) tellPredecessors(now time.Time) {
	o := &n.ov
	pred, ok := o.ring.Predecessor()
	if !ok || pred.ID == o.lastPredecessor {
		return
	}
	old := o.lastPredecessor
	o.lastPredecessor = pred.ID
	n.unsettled(now)
	view := func(to nid.ID) *overlay.Message {
		return &overlay.Message{Type: overlay.Successors, Dest: to, Origin: n.self, Exact: true, Own: true,
			From: n.selfInfo(), Pred: pred, Successors: o.ring.Successors(overlay.MaxSuccessors)}
	}
	if l := n.upLink(old); l != nil && nid.InOpen(pred.ID, old, n.self) {
		n.count(&o.sent, overlay.Successors)
		n.sendDirect(l, view(old))
	}
	if n.upLink(pred.ID) == nil && o.joined {
		n.originate(view(pred.ID), now)
	}
}

// asker is a node that asked this one for its place on the ring.
type asker struct {
	info overlay.Info
	at   time.Time
}

// introduce tells the nodes that recently asked this one for their place
// on the ring about a newcomer that lands right next to them. When a
// cluster starts at once, everyone asks the same bootstrap, and the first
// to ask got answers from before the others arrived: this sets them right
// in one message each, instead of many rounds of stabilization.
func (n *Node) introduce(newcomer overlay.Info, now time.Time) {
	o := &n.ov
	o.askers = slices.DeleteFunc(o.askers, func(a asker) bool { return now.Sub(a.at) >= askerMemory || a.info.ID == newcomer.ID })
	var before, after *asker
	for i := range o.askers {
		a := &o.askers[i]
		if n.upLink(a.info.ID) == nil {
			continue
		}
		if before == nil || a.info.ID.Distance(newcomer.ID).Compare(before.info.ID.Distance(newcomer.ID)) < 0 {
			before = a
		}
		if after == nil || newcomer.ID.Distance(a.info.ID).Compare(newcomer.ID.Distance(after.info.ID)) < 0 {
			after = a
		}
	}
	for i, a := range []*asker{before, after} {
		if a == nil || i == 1 && after == before {
			continue
		}
		n.count(&o.sent, overlay.Successors)
		n.sendDirect(n.upLink(a.info.ID), &overlay.Message{Type: overlay.Successors, Dest: a.info.ID, Origin: n.self, Exact: true,
			From: n.selfInfo(), Successors: []overlay.Info{newcomer}})
	}
	if len(o.askers) < maxAskers {
		o.askers = append(o.askers, asker{info: newcomer, at: now})
	}
}
