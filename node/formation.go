package node

import (
	"slices"
	"time"

	"burrow/link"
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
// so the next exchange with the successor is due now — but never sooner
// than half the short period after the last one, so that two nodes whose
// views keep disagreeing exchange a few times a second, not in a loop.
func (n *Node) unsettled(now time.Time) {
	o := &n.ov
	o.stabilizeGap = min(fastStabilize, o.cfg.StabilizeEvery)
	if due := o.stabilized.Add(o.stabilizeGap / 2); due.After(now) {
		now = due
	}
	if now.Before(o.stabilize) {
		o.stabilize = now
	}
}

// quiet lengthens the stabilization period after an exchange with the
// successor taught nothing new.
func (n *Node) quiet(now time.Time) {
	o := &n.ov
	o.stabilizeGap = min(2*o.stabilizeGap, o.cfg.StabilizeEvery)
	o.stabilize = now.Add(o.stabilizeGap + o.jitter(o.stabilizeGap/2))
}

// tellPredecessors: when the node's predecessor changes, the old one hears
// of it at once — it has a new successor, and until it links to it,
// broadcasts in its share of the ring miss the newcomer.
func (n *Node) tellPredecessors(now time.Time) {
	o := &n.ov
	pred, ok := o.ring.Predecessor()
	if !ok || pred.ID == o.lastPredecessor {
		return
	}
	old := o.lastPredecessor
	o.lastPredecessor = pred.ID
	n.unsettled(now)
	if l := n.upLink(old); l != nil && nid.InOpen(pred.ID, old, n.self) {
		n.count(&o.sent, overlay.Successors)
		n.sendDirect(l, n.ownView(old))
	}
}

// notifyPredecessor tells a predecessor that has no link to this node yet
// that this node follows it, in this node's own words: news of a node
// second hand is not taken while the node is believed dead, and a
// restarted node must get its place back all the same.
func (n *Node) notifyPredecessor(now time.Time) {
	o := &n.ov
	if pred, ok := o.ring.Predecessor(); ok && o.joined && n.upLink(pred.ID) == nil {
		n.originate(n.ownView(pred.ID), now)
	}
}

// ownView is this node's view of its neighbourhood, for to: itself, its
// predecessor and its successors.
func (n *Node) ownView(to nid.ID) *overlay.Message {
	o := &n.ov
	pred, _ := o.ring.Predecessor()
	return &overlay.Message{Type: overlay.Successors, Dest: to, Origin: n.self, Exact: true, Own: true,
		From: n.selfInfo(), Pred: pred, Successors: o.ring.Successors(overlay.MaxSuccessors)}
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

// isolated reports whether the node has had no link up, and no contact in
// progress, for isolatedEvery: its first links failed, or every neighbour
// went. It then looks for its ring again at once.
func (n *Node) isolated(now time.Time) bool {
	o := &n.ov
	if len(o.contacts) > 0 || len(n.adjacency) > 0 {
		o.lonely = time.Time{}
		return false
	}
	if o.lonely.IsZero() {
		o.lonely = now
	}
	if now.Sub(o.lonely) < isolatedEvery {
		return false
	}
	o.lonely = time.Time{}
	return true
}

// lookAgain asks the ring for this node's place again, through from,
// when its successor's answer shows the node is not where it thought: a
// lookup goes straight to the true predecessor in O(log n) hops, where
// following predecessor pointers one stabilization at a time walks the
// whole stretch between. At most once per lookupEvery.
func (n *Node) lookAgain(from *link.Link, now time.Time) {
	o := &n.ov
	if from == nil || now.Sub(o.lookedUp) < lookupEvery {
		return
	}
	o.lookedUp = now
	n.findSuccessor(from, now)
}
