package node

import (
	"net/netip"
	"slices"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// Remembered returns the nodes this one would contact to find its ring
// again, most recent last; the daemon keeps them across restarts.
func (n *Node) Remembered() []overlay.Info { return slices.Clone(n.ov.remembered) }

func (n *Node) addContact(ep netip.AddrPort, id nid.ID, bootstrap bool, now time.Time) {
	attempts := 0
	if !bootstrap {
		attempts = 2
	}
	d := n.links.AddDial([]link.Endpoint{link.UDPEndpoint(ep)}, link.DialOptions{Peer: id, Attempts: attempts}, now)
	n.ov.contacts = append(n.ov.contacts, &contact{dial: d, bootstrap: bootstrap})
}

// consider offers a node to the ring view unless it is known dead.
// It reports whether the view changed.
func (n *Node) consider(in overlay.Info, now time.Time) bool {
	if until, dead := n.ov.dead[in.ID]; dead && now.Before(until) {
		return false
	}
	return n.ov.ring.Consider(in)
}

// buried records a node as dead and drops it from the view.
func (n *Node) buried(id nid.ID, now time.Time) {
	n.ov.dead[id] = now.Add(deadMemory)
	n.ov.ring.Forget(id)
}

// checkBuried dials the nodes the successor lists as its own neighbours
// (its successors, or a predecessor between the two) that this node holds
// dead: one killed and started again is ignored in others' lists for
// deadMemory, while the successor has taken it back. A
// link coming up proves it alive (overlayLinkUp forgets the burial and
// offers it to the view, and the link manager ends the dial); the dial is
// no peer's, so the overlay's reconciling leaves it be until then.
func (n *Node) checkBuried(list []overlay.Info, now time.Time) {
	for _, in := range list {
		if until, dead := n.ov.dead[in.ID]; !dead || !now.Before(until) || n.links.Links()[in.ID] != nil ||
			slices.ContainsFunc(n.links.Dials(), func(d *link.Dial) bool { return d.Peer == in.ID }) {
			continue
		}
		if c := n.candidates(in); len(c) > 0 {
			n.links.AddDial(c, link.DialOptions{Peer: in.ID, Attempts: 1, UntilUp: true}, now)
		}
	}
}

func (n *Node) remember(in overlay.Info) {
	o := &n.ov
	if in.ID == n.self || len(in.Endpoints) == 0 {
		return
	}
	for i, r := range o.remembered {
		if r.ID == in.ID {
			o.remembered = slices.Delete(o.remembered, i, i+1)
			break
		}
	}
	o.remembered = append(o.remembered, overlay.Info{ID: in.ID, Endpoints: slices.Clone(in.Endpoints), TURN: in.TURN})
	if len(o.remembered) > rememberMax {
		o.remembered = o.remembered[1:]
	}
}

// findSuccessor asks through l where we belong on the ring.
func (n *Node) findSuccessor(l *link.Link, now time.Time) {
	m := &overlay.Message{Type: overlay.FindSuccessor, TTL: controlTTL, Dest: n.self, Origin: n.self, Via: l.Peer.ID, ID: n.ov.rng.Uint64(), From: n.selfInfo()}
	n.count(&n.ov.sent, m.Type)
	n.sendDirect(l, m)
}

// doneWithContacts lets go of the contacts that answered: the node has a
// link to its first successor, a place of its own on the ring. Until then
// it keeps them, or a node whose first links fail would be left with none.
func (n *Node) doneWithContacts() {
	o := &n.ov
	o.contacts = slices.DeleteFunc(o.contacts, func(c *contact) bool {
		if !c.asked {
			return false
		}
		if ps := o.peers[c.dial.Peer]; ps != nil {
			ps.local &^= overlay.ReasonBootstrap
		}
		n.links.RemoveDial(c.dial)
		return true
	})
}

// heal contacts a remembered node we have no link to, to find out whether
// it sits on another ring; if so, the answer merges the two.
func (n *Node) heal(now time.Time) {
	o := &n.ov
	var candidates []overlay.Info
	for _, r := range o.remembered {
		if n.links.Links()[r.ID] == nil {
			candidates = append(candidates, r)
		}
	}
	if len(candidates) > 0 {
		c := candidates[o.rng.IntN(len(candidates))]
		n.addContact(c.Endpoints[0], c.ID, false, now)
		return
	}
	if len(n.links.Links()) == 0 {
		for _, b := range o.cfg.Bootstrap {
			n.addContact(b, nid.ID{}, false, now)
		}
	}
}

// Leave tells the neighbours this node is going, so they repair the ring
// at once instead of waiting for silence.
//
// The caller keeps the node running for LeaveDrain afterwards, so that
// what is in flight through it still arrives while the neighbours move
// their traffic elsewhere.
func (n *Node) Leave(now time.Time) {
	o := &n.ov
	if !o.cfg.Disabled {
		n.svc.kv.Leave(now)
	}
	pred, _ := o.ring.Predecessor()
	for _, id := range nid.SortedKeys(n.links.Links()) {
		if l := n.upLink(id); l != nil {
			n.count(&o.sent, overlay.Leave)
			n.sendDirect(l, &overlay.Message{Type: overlay.Leave, Dest: id, Origin: n.self, Exact: true, From: n.selfInfo(), Pred: pred, Successors: o.ring.Successors(overlay.MaxSuccessors)})
		}
	}
}
