package node

import (
	"time"

	"burrow/nid"
	"burrow/overlay"
)

func (n *Node) inboundLongDistance() int {
	count := 0
	for _, ps := range n.ov.peers {
		if ps.remote&overlay.ReasonLongDistance != 0 {
			count++
		}
	}
	return count
}

func (n *Node) handleLinkRequest(m *overlay.Message, now time.Time) {
	o := &n.ov
	size := o.ring.EstimateSize()
	accept := m.Origin != n.self
	if m.Reasons&overlay.ReasonLongDistance != 0 && n.inboundLongDistance() >= o.cfg.Params.InboundLimit(size) {
		if !m.Passed && n.passOn(m) {
			return
		}
		accept = false
	}
	if max := o.cfg.Params.MaxLinks; max > 0 && len(n.links.Links()) >= max {
		accept = false
	}
	n.reply(m, &overlay.Message{Type: overlay.LinkReply, Accepted: accept, From: n.selfInfo()}, now)
	if !accept {
		return
	}
	// The asker dials: its reasons count here (against the inbound
	// limit) until the link is up, for acceptHold at most. Over a link
	// already up, the asker says its reasons itself (LinkUse) if it takes
	// the answer: it does not when the answer comes from one of its
	// successors or long-distance peers, and a successor that counted
	// such a request kept a long-distance link nobody wanted against its
	// inbound limit.
	ps := n.peer(m.Origin)
	ps.info = m.From
	if n.upLink(m.Origin) == nil {
		ps.remote |= m.Reasons
		ps.accepted = now
	}
}

// passOn hands a long-distance request this node has no room for to its
// successor, once: the target stays about where it was drawn, and the
// asker is spared a refusal and a new lookup across the ring (the
// paper's rule redraws, and near full nodes redraws pile up).
func (n *Node) passOn(m *overlay.Message) bool {
	succ := n.ov.ring.Successors(1)
	if len(succ) == 0 || succ[0].ID == m.Origin {
		return false
	}
	l := n.upLink(succ[0].ID)
	if l == nil {
		return false
	}
	passed := *m
	passed.Dest, passed.Exact, passed.Passed, passed.TTL = succ[0].ID, true, true, 1
	n.count(&n.ov.forwarded, overlay.LinkRequest)
	n.sendDirect(l, &passed)
	return true
}

func (n *Node) handleLinkReply(m *overlay.Message, now time.Time) {
	o := &n.ov
	req, ok := o.requests[m.ID]
	if !ok {
		return
	}
	delete(o.requests, m.ID)
	if req.slot != nil {
		s := req.slot
		s.request = 0
		if !m.Accepted || m.Origin == n.self || n.isSuccessor(m.Origin) || n.usedByLongDistance(m.Origin) {
			// Refused, or no shortcut: draw another target, soon after a
			// first refusal, later after more, up to a second, so that a
			// ring whose nodes are all full is not asked over and over.
			// Not longer: in a cold start of 5,000 nodes, nodes at their
			// inbound limit refused some slots up to 13 times in a row,
			// and with waits of up to 5 s the last link came a minute
			// after nearly all the others.
			s.draw = overlay.Draw(o.rng)
			wait := min(fastStabilize<<min(s.refusals, 2), o.cfg.StabilizeEvery)
			s.refusals++
			s.retry = now.Add(wait + o.jitter(wait))
			return
		}
		s.reaim = time.Time{}
		if answeredShort(n.self, m.Origin, req.target, o.ring.EstimateSize()) {
			s.reaim = now.Add(reaimShortAfter)
		}
		s.peer, s.refusals = m.Origin, 0
		s.size, s.aimedOn = o.ring.EstimateSize(), o.ring.KnownSuccessors()
	}
	if req.onDemand != (nid.ID{}) && m.Accepted {
		o.od.linked(req.onDemand)
	}
	if m.Accepted {
		ps := n.peer(m.Origin)
		ps.info = m.From
		n.dialPeer(ps, now)
	}
}

// answeredShort reports whether self's long-distance request for target
// was answered far short of it, in a ring of about size nodes: by a node
// before it, more than halfway and more than controlTTL nodes away from
// it, as where a request runs out of hops. The node a request ends at in
// a formed ring is the target's predecessor, a node gap or so short.
func answeredShort(self, by, target nid.ID, size float64) bool {
	left := by.Distance(target).Fraction()
	return nid.InOpen(by, self, target) && left > self.Distance(target).Fraction()/2 && left*size > controlTTL
}

func (n *Node) isSuccessor(id nid.ID) bool {
	for _, s := range n.ov.ring.Successors(n.ov.cfg.Params.Successors) {
		if s.ID == id {
			return true
		}
	}
	return false
}

func (n *Node) usedByLongDistance(id nid.ID) bool {
	for _, s := range n.ov.ld {
		if s.peer == id {
			return true
		}
	}
	return false
}

func (n *Node) tickLongDistance(now time.Time) {
	o := &n.ov
	size := o.ring.EstimateSize()
	k := n.longDistanceSlots(size)
	for len(o.ld) < k {
		o.ld = append(o.ld, &ldSlot{draw: overlay.Draw(o.rng), retry: now})
	}
	if len(o.ld) > k {
		o.ld = o.ld[:k]
	}
	if o.formation.settled.IsZero() {
		return // the size estimate, and so the targets, mean little before
	}
	for _, s := range o.ld {
		if s.peer != (nid.ID{}) && !s.reaim.IsZero() && !now.Before(s.reaim) {
			s.peer, s.retry, s.reaim = nid.ID{}, now, time.Time{}
		}
		if s.peer != (nid.ID{}) {
			switch r := size / s.size; {
			case r >= 0.5 && r <= 2:
				s.offSince = time.Time{}
			case n.carryOverNow(s, r, now):
				if !s.draw.Resize(s.size, size, o.rng) {
					s.peer, s.retry = nid.ID{}, now
				}
				s.size, s.aimedOn, s.offSince = size, o.ring.KnownSuccessors(), time.Time{}
			case s.offSince.IsZero():
				s.offSince = now
			}
			continue
		}
		if s.request != 0 || now.Before(s.retry) {
			continue
		}
		target, ok := n.drawShortcut(s, size)
		if !ok {
			s.retry = now.Add(fastStabilize)
			continue
		}
		s.request, s.asked = o.rng.Uint64()|1, now
		o.requests[s.request] = pendingRequest{slot: s, target: target, expires: now.Add(requestTimeout)}
		n.originate(&overlay.Message{Type: overlay.LinkRequest, Dest: target, Origin: n.self,
			Via: n.via(), ID: s.request, Reasons: overlay.ReasonLongDistance, From: n.selfInfo()}, now)
	}
}

// carryOverNow reports whether slot s's link, the size estimate now r
// times the one it was aimed with, is to be carried over to the estimate
// now (and kept where a draw at it could have made it, see Resize). It is
// when the link was aimed for a much smaller network, as a newcomer's
// first guess often is, or the network grew: a failure shortens the
// successor list and lowers the estimate, never raises it. It is too
// when the estimate fell by half while the view gained successors, so
// the aim rested on a guess from a few close ones; a fall without that
// can be a failure's, and is taken only when it lasted reaimAfter.
func (n *Node) carryOverNow(s *ldSlot, r float64, now time.Time) bool {
	if r >= 0.5 {
		return r > 2
	}
	return n.ov.ring.KnownSuccessors() > s.aimedOn || !s.offSince.IsZero() && now.Sub(s.offSince) >= reaimAfter
}

// longDistanceSlots is how many long-distance links the node keeps at
// the size estimate.
func (n *Node) longDistanceSlots(size float64) int {
	if size < 3 {
		return 0 // with two nodes every link is a successor link
	}
	return n.ov.cfg.Params.K(size)
}

// maxRedraws bounds the draws for a target at one tick: in a ring of a
// few nodes the successors hold most targets.
const maxRedraws = 16

// drawShortcut is the slot's target, drawn again while it is no shortcut
// (too close, or held by a successor), up to maxRedraws times.
func (n *Node) drawShortcut(s *ldSlot, size float64) (nid.ID, bool) {
	for range maxRedraws {
		target := s.draw.Target(n.self, size)
		if !s.draw.TooClose(size) && !n.successorsHold(target) {
			return target, true
		}
		s.draw = overlay.Draw(n.ov.rng)
	}
	return nid.ID{}, false
}

// longDistanceDeadline is when tickLongDistance next has work: a slot to
// add, re-aim or ask for, or a request to expire; zero when none. Without
// it that work waited for the next tick of any other timer (a second at
// most), and joins settled more slowly.
func (n *Node) longDistanceDeadline(now time.Time) time.Time {
	o := &n.ov
	var next time.Time
	earlier := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, r := range o.requests {
		earlier(r.expires)
	}
	size := o.ring.EstimateSize()
	if len(o.ld) < n.longDistanceSlots(size) {
		return now
	}
	if o.formation.settled.IsZero() {
		return next
	}
	for _, s := range o.ld {
		switch {
		case s.peer != (nid.ID{}):
			if !s.reaim.IsZero() {
				earlier(s.reaim)
			}
			if r := size / s.size; n.carryOverNow(s, r, now) || r < 0.5 && s.offSince.IsZero() {
				return now
			}
			if !s.offSince.IsZero() {
				earlier(s.offSince.Add(reaimAfter))
			}
		case s.request == 0:
			earlier(s.retry)
		}
	}
	return next
}

// successorsHold reports whether target lies up to this node's last
// successor, so that a successor would answer a request for it: no
// shortcut, and the answer is known without asking across the ring.
func (n *Node) successorsHold(target nid.ID) bool {
	succ := n.ov.ring.Successors(n.ov.cfg.Params.Successors)
	if len(succ) == 0 {
		return false
	}
	last := succ[len(succ)-1].ID
	return target == last || nid.InOpen(target, n.self, last)
}

// via is an adjacent joined node replies can come back through.
func (n *Node) via() nid.ID {
	if succ := n.ov.ring.Successors(1); len(succ) > 0 && n.upLink(succ[0].ID) != nil {
		return succ[0].ID
	}
	return nid.ID{}
}
