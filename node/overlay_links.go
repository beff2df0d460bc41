package node

import (
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// announce tells the peer why we keep the link, if that changed.
func (n *Node) announce(l *link.Link, ps *peerState, force bool) {
	unanswered := !ps.heard && ps.asks < maxAsks && n.now.Sub(ps.announcedAt) >= announceRetry
	if !force && !unanswered && ps.announced == ps.local && ps.announcedJ == n.ov.joined {
		return
	}
	ps.announced, ps.announcedJ, ps.announcedAt = ps.local, n.ov.joined, n.now
	if !ps.heard {
		ps.asks++
	}
	n.count(&n.ov.sent, overlay.LinkUse)
	n.sendDirect(l, &overlay.Message{Type: overlay.LinkUse, Dest: l.Peer.ID, Origin: n.self, Reasons: ps.local, Joined: n.ov.joined, Relaying: n.cfg.RelayRate > 0, Ask: !ps.heard, From: n.selfInfo()})
}

// reconcile moves the links toward what the overlay wants: successor
// links first, then long-distance and on-demand ones; links neither end
// wants any more are closed, but only once every successor link is up.
func (n *Node) reconcile(now time.Time) {
	o := &n.ov
	// Taking a link down below reconciles again, inside this call: the
	// scratch is out of n meanwhile, so that the nested call gets its own.
	sc := n.recon
	n.recon = nil
	if sc == nil {
		sc = &reconcileScratch{want: make(map[nid.ID]overlay.Reason)}
	}
	want := sc.want
	clear(want)
	succ := o.ring.Successors(o.cfg.Params.Successors)
	allSuccessorsUp := true
	for _, s := range succ {
		want[s.ID] |= overlay.ReasonSuccessor
		if n.upLink(s.ID) == nil {
			allSuccessorsUp = false
		}
	}
	for _, s := range o.ld {
		if s.peer != (nid.ID{}) {
			want[s.peer] |= overlay.ReasonLongDistance
		}
	}
	for id := range o.od.active {
		want[id] |= overlay.ReasonOnDemand
	}
	placed := len(succ) > 0 && n.upLink(succ[0].ID) != nil
	joined := n.stillJoined(succ)
	joinedChanged := joined != o.joined
	o.joined = joined
	n.trackFormation(now)
	if len(succ) > 0 && succ[0].ID != o.lastSuccessor && n.upLink(succ[0].ID) != nil {
		// A new successor: tell it about us and learn its view right away
		// rather than at the next period, so joins settle in round trips.
		o.lastSuccessor = succ[0].ID
		n.unsettled(now)
	}
	n.tellPredecessors(now)
	sc.ids = nid.AppendSortedKeys(sc.ids[:0], want)
	for _, id := range sc.ids {
		ps := n.peer(id)
		if info, ok := o.ring.Lookup(id); ok && len(info.Endpoints) > 0 {
			ps.info.Endpoints, ps.info.TURN = info.Endpoints, info.TURN
			// Its relays too: with the beacon gone, the members it named
			// are how a pair that cannot go direct links again, and the
			// only way to a peer behind a symmetric NAT.
			if len(info.Relays) > 0 {
				ps.info.Relays = info.Relays
			}
		}
		if n.links.Links()[id] == nil {
			n.dialPeer(ps, now)
		}
	}
	sc.ids = nid.AppendSortedKeys(sc.ids[:0], o.peers)
	regroup := false // a link joins or leaves the flood adjacency
	for _, id := range sc.ids {
		ps := o.peers[id]
		sticky := ps.local & (overlay.ReasonBootstrap | overlay.ReasonStatic | overlay.ReasonBeacon)
		if placed {
			sticky &^= overlay.ReasonBootstrap
		}
		ps.local = want[id] | sticky
		l := n.upLink(id)
		if l != nil && n.mayUpgrade(l) {
			// Both ends must keep probing the direct path for hole punching
			// to work, so a relayed link learns every candidate we hear of.
			l.AddCandidates(n.candidates(ps.info))
		}
		if l == nil {
			if ps.remote != 0 && !now.Before(ps.accepted.Add(acceptHold)) {
				ps.remote = 0 // the asker went elsewhere, or never got through
			}
			if ps.local == 0 && ps.dial != nil {
				n.links.RemoveDial(ps.dial)
				ps.dial = nil
			}
			if ps.local == 0 && ps.remote == 0 && n.links.Links()[id] == nil {
				delete(o.peers, id)
			}
			continue
		}
		n.announce(l, ps, joinedChanged)
		if ps.closing && !ps.closingSaid.IsZero() && !ps.closingHeard && now.Sub(ps.closingSaid) >= closingRetry {
			n.sayClosing(l, ps, now)
		}
		regroup = regroup || ps.adjacent != (!l.Suspect() && floodsOver(ps))
		if ps.local != 0 || ps.remote != 0 {
			ps.unwanted = time.Time{}
			continue
		}
		if ps.unwanted.IsZero() {
			ps.unwanted = now
		}
		if allSuccessorsUp && now.Sub(ps.unwanted) >= closeGrace && !ps.closing && (ps.heard || now.Sub(l.Since) >= unheardGrace) {
			n.closeLink(l, ps, now)
		}
	}
	if regroup {
		n.setAdjacency()
	}
	// The loop below acts only on a link due to close, and only its acting
	// can make another one due: with none due it would do nothing, so most
	// calls skip sorting the peers again.
	sc.ids = sc.ids[:0]
	for _, ps := range o.peers {
		if retireDue(ps, now) {
			sc.ids = nid.AppendSortedKeys(sc.ids, o.peers)
			break
		}
	}
	for _, id := range sc.ids {
		ps := o.peers[id]
		if ps != nil && retireDue(ps, now) {
			l := n.links.Links()[id]
			if l != nil && newSessionSince(l, ps.retireAt.Add(-drainTime)) {
				// The peer dialed again while the link drained: it needs
				// the link and believes it up, so tearing it down would
				// leave a one-sided link that it ends up burying as dead.
				n.unretire(ps)
				continue
			}
			if l != nil {
				n.links.Down(l, "closed: no longer needed")
			}
		}
	}
	if placed {
		n.doneWithContacts()
	}
	n.recon = sc
}

// peersDeadline is the next moment a timed condition of reconcile comes
// true for a peer: a drained link to tear down, an unwanted one to close,
// a link use to announce again; zero when none. Only moments still ahead
// count: one that passed without reconcile acting waits for something
// else (every successor link up), and asking for it again would tick in a
// loop. Without it these waited for the next tick of any other timer (a
// second at most), and drained links sent keepalives their peers, which
// had torn theirs down, no longer knew.
func (n *Node) peersDeadline(now time.Time) time.Time {
	var next time.Time
	later := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for id, ps := range n.ov.peers {
		if ps.closing {
			later(ps.retireAt)
			if !ps.closingSaid.IsZero() && !ps.closingHeard {
				later(ps.closingSaid.Add(closingRetry))
			}
			continue
		}
		if !ps.unwanted.IsZero() {
			later(ps.unwanted.Add(closeGrace))
			if l := n.upLink(id); l != nil && !ps.heard {
				later(l.Since.Add(unheardGrace))
			}
		}
		if !ps.heard && ps.asks < maxAsks {
			later(ps.announcedAt.Add(announceRetry))
		}
		if ps.remote != 0 && n.upLink(id) == nil {
			later(ps.accepted.Add(acceptHold))
		}
	}
	return next
}

// reconcileScratch holds reconcile's map and key slice between calls.
type reconcileScratch struct {
	want map[nid.ID]overlay.Reason
	ids  []nid.ID
}

// floodsOver reports whether floods cross the link to ps's peer: not
// while it retires, nor once both ends have said they keep it for
// nothing — a heal probe, or a contact after the join — so that floods
// and the MACs they teach stay on the overlay's links, not on a probe
// closed seconds later. Until the peer says why it keeps the link, the
// link carries floods: a new successor's is one.
func floodsOver(ps *peerState) bool {
	return !ps.closing && (!ps.heard || ps.local|ps.remote != 0)
}

// retireDue reports whether a retiring link has drained.
func retireDue(ps *peerState, now time.Time) bool {
	return ps.closing && !ps.retireAt.IsZero() && !now.Before(ps.retireAt)
}

// closeLink tells the peer that this node no longer needs the link, and
// retires it.
func (n *Node) closeLink(l *link.Link, ps *peerState, now time.Time) {
	n.sayClosing(l, ps, now)
	n.retire(l, ps, now)
}

// sayClosing tells the peer that this node closes the link, asking for
// the same word back until it comes: a peer that missed it (a datagram
// lost under a bulk flow) went on sending over the link after this end
// tore it down, until its probes went unanswered.
func (n *Node) sayClosing(l *link.Link, ps *peerState, now time.Time) {
	ps.closingSaid = now
	n.count(&n.ov.sent, overlay.LinkUse)
	n.sendDirect(l, &overlay.Message{Type: overlay.LinkUse, Dest: l.Peer.ID, Origin: n.self, Joined: n.ov.joined, Closing: true, Ask: !ps.closingHeard, Relaying: n.cfg.RelayRate > 0, From: n.selfInfo()})
}

// retire stops using a link at once — no floods, routes or flows over it —
// and tears it down after drainTime, so what is in flight still arrives.
func (n *Node) retire(l *link.Link, ps *peerState, now time.Time) {
	if ps.closing {
		return
	}
	ps.closing, ps.retireAt = true, now.Add(drainTime)
	n.setAdjacency()
	n.reroutePort(l.Port)
}

// unretire takes a retiring link back into use.
func (n *Node) unretire(ps *peerState) {
	ps.keep()
	ps.unwanted = time.Time{}
	n.setAdjacency()
}

// keep forgets that the link to ps's peer was being closed, by either end.
func (ps *peerState) keep() {
	ps.closing, ps.retireAt = false, time.Time{}
	ps.closingSaid, ps.closingHeard = time.Time{}, false
}

// newSessionSince reports whether l has a session from a handshake after t.
func newSessionSince(l *link.Link, t time.Time) bool {
	sessions := l.Sessions()
	return len(sessions) > 0 && sessions[len(sessions)-1].Created.After(t)
}
