package node

import (
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
	"burrow/wire"
)

// sendDirect sends a control message over one link.
// It counts as traffic the peer's answers should follow: a link whose peer
// restarted, and so cannot open it any more, is found out in round trips.
func (n *Node) sendDirect(l *link.Link, m *overlay.Message) {
	n.buf = append(n.buf[:0], byte(wire.InnerControl))
	n.buf = m.Append(n.buf)
	n.sendData(l, n.buf, n.now)
}

func (n *Node) count(c *[16]uint64, t overlay.Type) {
	if int(t) < len(c) {
		c[t]++
	}
}

// originate routes a message that starts here.
func (n *Node) originate(m *overlay.Message, now time.Time) {
	n.count(&n.ov.sent, m.Type)
	if m.TTL == 0 {
		m.TTL = controlTTL
	}
	n.route(m, nil, now)
}

// handleControl processes a control message that arrived over from.
func (n *Node) handleControl(from *link.Link, b []byte, now time.Time) {
	m, err := overlay.Parse(b)
	if err != nil {
		n.stats.drop(DropMalformed)
		return
	}
	if n.ov.cfg.Disabled {
		switch {
		case m.Type == overlay.Leave && m.Origin == from.Peer.ID:
			// Without an overlay too, traffic moves off a neighbour that
			// leaves before it is gone.
			n.retire(from, n.peer(from.Peer.ID), now)
		case m.Type == overlay.Ping && m.Dest == n.self:
			n.answerPing(&m, now) // a configured peer can still be pinged
		case m.Type == overlay.Pong && m.Dest == n.self:
			n.takePong(&m, from, now)
		}
		return
	}
	if m.From.ID == from.Peer.ID {
		m.From.Endpoints = mergeEndpoints(from.Endpoint(), m.From.Endpoints)
	}
	n.route(&m, from, now)
}

// route delivers m here or forwards it one hop closer to its destination.
func (n *Node) route(m *overlay.Message, from *link.Link, now time.Time) {
	if m.Dest == n.self {
		n.deliver(m, from, now)
		return
	}
	if l := n.upLink(m.Dest); l != nil && !n.peer(m.Dest).closing && (m.Exact || m.Type != overlay.FindSuccessor) {
		n.forward(l, m)
		return
	}
	key := m.Dest
	if m.Type.IsReply() && m.Via != (nid.ID{}) {
		key = m.Via
		if key == n.self {
			n.stats.drop(DropNoRoute) // we were the way to Origin, and it is gone
			return
		}
	}
	hop := overlay.NextHop
	if m.Exact {
		hop = overlay.NextHopTo // for one node only: either way round
	}
	next := hop(n.self, n.routingCandidates(m), key)
	if next == n.self {
		if m.Exact {
			n.stats.drop(DropNoRoute)
			return
		}
		n.deliver(m, from, now)
		return
	}
	if m.Type == overlay.LinkRequest && !m.Exact && m.TTL <= 1 {
		// A long-distance request that would be dropped here, its hops
		// spent, is answered here instead: see ldSlot.reaim.
		n.deliver(m, from, now)
		return
	}
	if m.Type == overlay.FindSuccessor && from != nil && from.Peer.ID == m.Origin {
		// The joiner's first contact answers too, from all it knows: while
		// a ring forms, the contact everyone joins through knows more than
		// the node the lookup ends at.
		n.answerLookup(m, now)
	}
	n.forward(n.upLink(next), m)
}

// answerLookup tells a joiner the nodes this one knows closest to it, and
// the recent joiners next to it about the joiner.
func (n *Node) answerLookup(m *overlay.Message, now time.Time) {
	pred, succ := n.closestTo(m.Origin)
	n.reply(m, &overlay.Message{Type: overlay.Successors, From: n.selfInfo(), Pred: pred, Successors: succ}, now)
	if m.From.ID == m.Origin {
		n.introduce(m.From, now)
	}
}

// routingCandidates are the neighbours a message may be forwarded to:
// those that found their place on the ring, never the message's origin.
func (n *Node) routingCandidates(m *overlay.Message) []nid.ID {
	c := n.ov.scratch[:0]
	for id, ps := range n.ov.peers {
		if ps.remoteJoined && !ps.closing && id != m.Origin && n.upLink(id) != nil {
			c = append(c, id)
		}
	}
	n.ov.scratch = c
	return c
}

func (n *Node) forward(l *link.Link, m *overlay.Message) {
	if m.TTL <= 1 {
		n.stats.drop(DropNoRoute)
		return
	}
	m.TTL--
	n.count(&n.ov.forwarded, m.Type)
	n.sendDirect(l, m)
}

// reply answers a routed request back to its origin.
func (n *Node) reply(req *overlay.Message, m *overlay.Message, now time.Time) {
	m.Dest, m.Origin, m.Via, m.ID, m.Exact = req.Origin, n.self, req.Via, req.ID, true
	n.originate(m, now)
}

func (n *Node) deliver(m *overlay.Message, from *link.Link, now time.Time) {
	o := &n.ov
	n.count(&o.received, m.Type)
	if m.From.ID != (nid.ID{}) && m.From.ID != n.self {
		if m.From.ID == m.Origin {
			delete(o.dead, m.Origin) // it speaks for itself: alive
			if ps := o.peers[m.Origin]; ps != nil {
				ps.spoke = now
			}
		}
		n.consider(m.From, now)
		n.remember(m.From)
	}
	switch m.Type {
	case overlay.FindSuccessor:
		n.answerLookup(m, now)
	case overlay.Stabilize:
		pred, _ := o.ring.Predecessor()
		n.reply(m, &overlay.Message{Type: overlay.Successors, Own: true, From: n.selfInfo(), Pred: pred, Successors: o.ring.Successors(overlay.MaxSuccessors)}, now)
	case overlay.Successors, overlay.Leave:
		if m.Type == overlay.Leave {
			n.buried(m.Origin, now)
			if from != nil {
				n.retire(from, n.peer(from.Peer.ID), now)
			}
		}
		succ := o.ring.Successors(1)
		fromSuccessor := m.Type == overlay.Successors && m.Own && len(succ) > 0 && succ[0].ID == m.Origin
		news := false
		for _, in := range append([]overlay.Info{m.Pred}, m.Successors...) {
			if in.ID != (nid.ID{}) && in.ID != m.Origin || m.Type == overlay.Successors {
				news = n.consider(in, now) || news
				n.remember(in)
			}
		}
		if m.Type == overlay.Successors {
			if fromSuccessor {
				n.checkBuried(m.Successors, now)
				if nid.InOpen(m.Pred.ID, n.self, m.Origin) {
					n.checkBuried([]overlay.Info{m.Pred}, now)
				}
			}
			if m.Own {
				news = o.ring.Prune(m.Origin, m.Successors, func(id nid.ID) bool { return n.upLink(id) != nil }) || news
			}
			if m.Pred.ID == n.self {
				o.formation.confirmedBy = m.Origin
			}
			switch {
			case !fromSuccessor:
			case news || m.Pred.ID != n.self:
				n.unsettled(now)
				n.lookAgain(from, now)
			default:
				n.quiet(now)
			}
		}
	case overlay.Data:
		n.svc.kv.HandleMessage(m.Origin, m.Payload, now)
	case overlay.Topology:
		n.answerTopology(m, now)
	case overlay.TopologyReply:
		n.takeTopology(m, now)
	case overlay.LeaseMoved:
		n.checkMoved(m, now)
	case overlay.LeaseReleased:
		n.takeOverLease(m, now)
	case overlay.Ping:
		n.answerPing(m, now)
	case overlay.Pong:
		n.takePong(m, from, now)
	case overlay.LinkRequest:
		n.handleLinkRequest(m, now)
	case overlay.LinkReply:
		n.handleLinkReply(m, now)
	case overlay.LinkUse:
		if from != nil {
			ps := n.peer(from.Peer.ID)
			ps.remote, ps.remoteJoined, ps.relays = m.Reasons, m.Joined, m.Relaying
			ps.heard = true
			if m.Ask && !m.Closing {
				n.announce(from, ps, true)
			}
			if m.From.ID == from.Peer.ID && n.mayUpgrade(from) {
				// The peer's current candidates, straight from it: a link
				// that came up relayed starts punching toward them at once
				// rather than after the next ring exchange (and one that
				// came up over IPv4 learns the peer's IPv6 addresses).
				ps.info.Endpoints, ps.info.Relays, ps.info.TURN = m.From.Endpoints, m.From.Relays, m.From.TURN
				from.AddCandidates(n.candidates(ps.info))
			}
			if m.Closing {
				ps.closingHeard = true
				if m.Ask {
					n.sayClosing(from, ps, now)
				}
				n.retire(from, ps, now)
			}
		}
	}
	n.reconcile(now)
}
