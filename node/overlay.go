package node

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
	"burrow/wire"
)

// OverlayConfig configures self-organization. With Disabled the node keeps
// only its static peers.
type OverlayConfig struct {
	Disabled bool
	Params   overlay.Params
	// Bootstrap are addresses of members to find our place through.
	Bootstrap []netip.AddrPort
	// Advertise are the endpoints other nodes can reach us at.
	Advertise []netip.AddrPort
	// StabilizeEvery is how often a node checks its successor's view.
	StabilizeEvery time.Duration
	// HealEvery is how often a node contacts a remembered node it has no
	// link to, so that rings split by a partition merge again.
	HealEvery time.Duration
	OnDemand  OnDemandConfig
	// Remembered are nodes known from an earlier run; the node contacts a
	// few of them at start, so a restarted node finds its ring without a
	// bootstrap.
	Remembered []overlay.Info
}

// Defaults of OverlayConfig.
const (
	DefaultSuccessors     = 2
	DefaultLongDistance   = 4
	DefaultStabilizeEvery = 5 * time.Second
	DefaultHealEvery      = 60 * time.Second
	requestTimeout        = 5 * time.Second
	closeGrace            = 3 * time.Second
	// drainTime keeps a retired link open for what is still in flight on it.
	drainTime = time.Second
	// announceRetry spaces LinkUse repeats until the peer answers one, at
	// most maxAsks times: a peer with its overlay off never answers.
	announceRetry = time.Second
	maxAsks       = 5
	dialAttempts  = 3
	controlTTL    = 64
	rememberMax   = 32
	deadMemory    = 30 * time.Second
	// rememberedContacts is how many remembered nodes a restart contacts.
	rememberedContacts = 3
)

// peerState is what the overlay knows about a node it is (or wants to be)
// linked to.
type peerState struct {
	info         overlay.Info
	relays       bool           // the peer relays for others
	local        overlay.Reason // why we want the link
	remote       overlay.Reason // why the peer wants it (its LinkUse)
	remoteJoined bool
	announced    overlay.Reason // last reasons we sent
	announcedJ   bool
	announcedAt  time.Time
	// heard: a LinkUse of the peer arrived on this link. Until then ours
	// ask for one, and are repeated, because the first datagrams on a new
	// session can reach the peer before it has installed the session.
	heard    bool
	asks     int // LinkUse sent without having heard the peer's
	dial     *link.Dial
	unwanted time.Time // when both sides stopped wanting the link
	closing  bool      // closed on purpose, not a failure
	retireAt time.Time // when a retiring link is torn down
}

// ldSlot is one long-distance link: its harmonic draw and, once a node
// answered, that node.
type ldSlot struct {
	draw    overlay.LongDistanceDraw
	size    float64 // size estimate the target was computed for
	peer    nid.ID
	request uint64
	asked   time.Time
	retry   time.Time
}

// contact is a node we dial by address to find our place on the ring:
// a configured bootstrap or a remembered node, for healing partitions.
type contact struct {
	dial      *link.Dial
	asked     bool
	bootstrap bool
}

type pendingRequest struct {
	slot     *ldSlot
	onDemand nid.ID
	expires  time.Time
}

type overlayState struct {
	cfg        OverlayConfig
	ring       *overlay.Ring
	peers      map[nid.ID]*peerState
	ld         []*ldSlot
	contacts   []*contact
	requests   map[uint64]pendingRequest
	remembered []overlay.Info
	// dead remembers nodes found dead, so that stale successor lists from
	// others do not bring them back before the news has spread.
	dead          map[nid.ID]time.Time
	rng           *rand.Rand
	joined        bool
	stabilize     time.Time
	lastSuccessor nid.ID
	heal          time.Time
	scratch       []nid.ID
	od            onDemandState
	// Stats counts control messages by type: sent, received, forwarded.
	sent, received, forwarded [16]uint64
}

func (n *Node) initOverlay(now time.Time) {
	c := &n.cfg.Overlay
	if c.Params.Successors <= 0 {
		c.Params.Successors = DefaultSuccessors
	}
	if c.Params.LongDistance < 0 {
		c.Params.LongDistance = 0
	}
	if c.StabilizeEvery <= 0 {
		c.StabilizeEvery = DefaultStabilizeEvery
	}
	if c.HealEvery <= 0 {
		c.HealEvery = DefaultHealEvery
	}
	var seed [32]byte
	if _, err := n.cfg.Handshake.Rand.Read(seed[:]); err != nil {
		panic("node: random source failed: " + err.Error())
	}
	o := &n.ov
	o.cfg = *c
	o.ring = overlay.NewRing(n.self, max(2*c.Params.Successors, 8))
	o.peers = make(map[nid.ID]*peerState)
	o.requests = make(map[uint64]pendingRequest)
	o.dead = make(map[nid.ID]time.Time)
	o.rng = rand.New(rand.NewChaCha8(seed))
	o.stabilize = now.Add(o.jitter(c.StabilizeEvery))
	o.heal = now.Add(c.HealEvery + o.jitter(c.HealEvery))
	for _, b := range c.Bootstrap {
		n.addContact(b, nid.ID{}, true, now)
	}
	for _, r := range c.Remembered {
		n.remember(r)
	}
	for i := len(o.remembered) - 1; i >= max(0, len(o.remembered)-rememberedContacts); i-- {
		if r := o.remembered[i]; len(c.Bootstrap) == 0 || i == len(o.remembered)-1 {
			n.addContact(r.Endpoints[0], r.ID, false, now)
		}
	}
	o.od.init(c.OnDemand)
}

// Remembered returns the nodes this one would contact to find its ring
// again, most recent last; the daemon keeps them across restarts.
func (n *Node) Remembered() []overlay.Info { return slices.Clone(n.ov.remembered) }

// jitter is a random duration in [0, d/2), to keep nodes out of step.
func (o *overlayState) jitter(d time.Duration) time.Duration {
	return time.Duration(o.rng.Int64N(int64(d)/2 + 1))
}

// selfInfo is what this node tells others about itself: where to reach
// it, and which of its neighbours relay for it should no direct path work
// (those with a direct link, lowest RTT first).
func (n *Node) selfInfo() overlay.Info {
	var relays []*link.Link
	for _, id := range nid.SortedKeys(n.ov.peers) {
		if l := n.upLink(id); l != nil && n.ov.peers[id].relays && !l.Endpoint().IsRelay() {
			relays = append(relays, l)
		}
	}
	slices.SortStableFunc(relays, func(a, b *link.Link) int { return int(a.RTT - b.RTT) })
	info := overlay.Info{ID: n.self, Endpoints: n.endpoints()}
	for _, l := range relays[:min(len(relays), overlay.MaxRelays)] {
		info.Relays = append(info.Relays, l.Peer.ID)
	}
	return info
}

func (n *Node) addContact(ep netip.AddrPort, id nid.ID, bootstrap bool, now time.Time) {
	attempts := 0
	if !bootstrap {
		attempts = 2
	}
	d := n.links.AddDial([]link.Endpoint{link.UDPEndpoint(ep)}, link.DialOptions{Peer: id, Attempts: attempts}, now)
	n.ov.contacts = append(n.ov.contacts, &contact{dial: d, bootstrap: bootstrap})
}

func (n *Node) peer(id nid.ID) *peerState {
	ps := n.ov.peers[id]
	if ps == nil {
		ps = &peerState{info: overlay.Info{ID: id}}
		n.ov.peers[id] = ps
	}
	return ps
}

// upLink returns the link to id if it is up.
func (n *Node) upLink(id nid.ID) *link.Link {
	if l := n.links.Links()[id]; l != nil && l.Up() {
		return l
	}
	return nil
}

// overlayLinkUp runs when a link comes up.
func (n *Node) overlayLinkUp(l *link.Link, now time.Time) {
	o := &n.ov
	ps := n.peer(l.Peer.ID)
	ps.closing = false
	ps.info.Endpoints = mergeEndpoints(l.Endpoint(), ps.info.Endpoints)
	l.AddCandidates(n.candidates(ps.info))
	if ps.dial != nil {
		n.links.RemoveDial(ps.dial)
		ps.dial = nil
	}
	if o.cfg.Disabled {
		return
	}
	for _, c := range o.contacts {
		if c.dial.Peer == l.Peer.ID && !c.asked {
			ps.local |= overlay.ReasonBootstrap
			c.asked = true
			n.findSuccessor(l, now)
		}
	}
	if n.beaconLinkUp(l, ps) && !o.joined {
		n.findSuccessor(l, now)
	}
	delete(o.dead, l.Peer.ID)
	o.ring.Consider(ps.info)
	n.remember(ps.info)
	n.announce(l, ps, true)
	n.reconcile(now)
}

// overlayLinkDown runs when a link went down.
func (n *Node) overlayLinkDown(l *link.Link, now time.Time) {
	o := &n.ov
	ps := o.peers[l.Peer.ID]
	if ps == nil {
		return
	}
	delete(o.peers, l.Peer.ID)
	if !ps.closing {
		n.buried(l.Peer.ID, now)
	}
	for _, s := range o.ld {
		if s.peer == l.Peer.ID {
			s.peer, s.retry = nid.ID{}, now
		}
	}
	o.od.linkDown(l.Peer.ID)
	if !o.cfg.Disabled {
		n.reconcile(now)
	}
}

// overlayDialFailed: a node we wanted could not be reached.
func (n *Node) overlayDialFailed(d *link.Dial, now time.Time) {
	o := &n.ov
	for i, c := range o.contacts {
		if c.dial == d {
			o.contacts = slices.Delete(o.contacts, i, i+1)
			break
		}
	}
	for id, ps := range o.peers {
		if ps.dial == d {
			ps.dial = nil
			if n.upLink(id) == nil {
				n.buried(id, now)
				delete(o.peers, id)
				for _, s := range o.ld {
					if s.peer == id {
						s.peer, s.retry = nid.ID{}, now
					}
				}
			}
		}
	}
	if !o.cfg.Disabled {
		n.reconcile(now)
	}
}

// mergeEndpoints puts the address a peer was seen at first, when it is a
// direct one, ahead of those it advertises.
func mergeEndpoints(observed link.Endpoint, known []netip.AddrPort) []netip.AddrPort {
	if observed.IsRelay() || observed.Via != link.UDP {
		return known
	}
	out := []netip.AddrPort{observed.Addr}
	for _, ep := range known {
		if ep != observed.Addr && len(out) < overlay.MaxEndpoints {
			out = append(out, ep)
		}
	}
	return out
}

// candidates are the endpoints to try for a peer: its addresses, then the
// members it named as relays that we have a link with, lowest RTT first.
func (n *Node) candidates(in overlay.Info) []link.Endpoint {
	var out []link.Endpoint
	for _, ep := range in.Endpoints {
		out = append(out, link.UDPEndpoint(ep))
	}
	// Many NATs keep the source port when they can, and when several hosts
	// behind one NAT use the same port, the mapping a beacon saw can differ
	// from the one toward us; the peer's own port at its public address is
	// then worth a probe.
	for _, pub := range in.Endpoints {
		if pub.Addr().IsPrivate() {
			continue
		}
		for _, host := range in.Endpoints {
			guess := link.UDPEndpoint(netip.AddrPortFrom(pub.Addr(), host.Port()))
			if host.Addr().IsPrivate() && !slices.Contains(out, guess) {
				out = append(out, guess)
			}
		}
	}
	if n.reach.turn.IsValid() {
		// Through our TURN allocation too: it reaches peers whose NAT
		// lets nothing else in, and meets their own relayed address.
		for _, ep := range in.Endpoints {
			out = append(out, link.Endpoint{Via: link.TURN, Addr: ep})
		}
	}
	// Our beacon relays for every member, and most members keep a link
	// to it; the peer's own picks come first.
	var relays []*link.Link
	for _, r := range append(slices.Clone(in.Relays), n.reach.beacon) {
		if l := n.upLink(r); l != nil && r != in.ID && !l.Endpoint().IsRelay() && !slices.Contains(relays, l) {
			relays = append(relays, l)
		}
	}
	slices.SortStableFunc(relays, func(a, b *link.Link) int { return int(a.RTT - b.RTT) })
	for _, l := range relays[:min(len(relays), 2)] {
		out = append(out, link.RelayEndpoint(l.Peer.ID, in.ID))
	}
	return out
}

// consider offers a node to the ring view unless it is known dead.
func (n *Node) consider(in overlay.Info, now time.Time) {
	if until, dead := n.ov.dead[in.ID]; dead && now.Before(until) {
		return
	}
	n.ov.ring.Consider(in)
}

// buried records a node as dead and drops it from the view.
func (n *Node) buried(id nid.ID, now time.Time) {
	n.ov.dead[id] = now.Add(deadMemory)
	n.ov.ring.Forget(id)
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
	o.remembered = append(o.remembered, overlay.Info{ID: in.ID, Endpoints: slices.Clone(in.Endpoints)})
	if len(o.remembered) > rememberMax {
		o.remembered = o.remembered[1:]
	}
}

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

// findSuccessor asks through l where we belong on the ring.
func (n *Node) findSuccessor(l *link.Link, now time.Time) {
	m := &overlay.Message{Type: overlay.FindSuccessor, TTL: controlTTL, Dest: n.self, Origin: n.self, Via: l.Peer.ID, ID: n.ov.rng.Uint64(), From: n.selfInfo()}
	n.count(&n.ov.sent, m.Type)
	n.sendDirect(l, m)
}

// sendDirect sends a control message over one link.
func (n *Node) sendDirect(l *link.Link, m *overlay.Message) {
	n.buf = append(n.buf[:0], byte(wire.InnerControl))
	n.buf = m.Append(n.buf)
	n.links.Send(l, n.buf, time.Time{})
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
	next := overlay.NextHop(n.self, n.routingCandidates(m), key)
	if next == n.self {
		if m.Exact {
			n.stats.drop(DropNoRoute)
			return
		}
		n.deliver(m, from, now)
		return
	}
	n.forward(n.upLink(next), m)
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
		}
		n.consider(m.From, now)
		n.remember(m.From)
	}
	switch m.Type {
	case overlay.FindSuccessor, overlay.Stabilize:
		pred, _ := o.ring.Predecessor()
		n.reply(m, &overlay.Message{Type: overlay.Successors, From: n.selfInfo(), Pred: pred, Successors: o.ring.Successors(overlay.MaxSuccessors)}, now)
	case overlay.Successors, overlay.Leave:
		if m.Type == overlay.Leave {
			n.buried(m.Origin, now)
			if from != nil {
				n.retire(from, n.peer(from.Peer.ID), now)
			}
		}
		for _, in := range append([]overlay.Info{m.Pred}, m.Successors...) {
			if in.ID != (nid.ID{}) && in.ID != m.Origin || m.Type == overlay.Successors {
				n.consider(in, now)
				n.remember(in)
			}
		}
		if m.Type == overlay.Successors {
			o.ring.Prune(m.Origin, m.Successors, func(id nid.ID) bool { return n.upLink(id) != nil })
		}
		n.doneWithContact(m.Origin)
	case overlay.Data:
		n.svc.kv.HandleMessage(m.Origin, m.Payload, now)
	case overlay.Topology:
		n.answerTopology(m, now)
	case overlay.TopologyReply:
		n.takeTopology(m, now)
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
			if m.From.ID == from.Peer.ID && from.Endpoint().IsRelay() {
				// The peer's current candidates, straight from it: a link
				// that came up relayed starts punching toward them at once
				// rather than after the next ring exchange.
				ps.info.Endpoints, ps.info.Relays = m.From.Endpoints, m.From.Relays
				from.AddCandidates(n.candidates(ps.info))
			}
			if m.Closing {
				n.retire(from, ps, now)
			}
		}
	}
	n.reconcile(now)
}

// doneWithContact drops the bootstrap reason from a contact that answered.
func (n *Node) doneWithContact(id nid.ID) {
	o := &n.ov
	for i, c := range o.contacts {
		if c.asked && (c.dial.Peer == id || len(o.contacts) > 0 && o.joined) {
			if ps := o.peers[c.dial.Peer]; ps != nil {
				ps.local &^= overlay.ReasonBootstrap
			}
			n.links.RemoveDial(c.dial)
			o.contacts = slices.Delete(o.contacts, i, i+1)
			return
		}
	}
}

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
		accept = false
	}
	if max := o.cfg.Params.MaxLinks; max > 0 && len(n.links.Links()) >= max {
		accept = false
	}
	n.reply(m, &overlay.Message{Type: overlay.LinkReply, Accepted: accept, From: n.selfInfo()}, now)
	if !accept {
		return
	}
	// Dial back too: with both sides dialing, the first handshake through
	// wins, and NATs see outbound traffic on both ends.
	ps := n.peer(m.Origin)
	ps.info = m.From
	ps.remote |= m.Reasons
	n.dialPeer(ps, now)
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
			// Refused, or no shortcut: draw another target later.
			s.draw = overlay.Draw(o.rng)
			s.retry = now.Add(o.cfg.StabilizeEvery + o.jitter(o.cfg.StabilizeEvery))
			return
		}
		s.peer = m.Origin
		s.size = o.ring.EstimateSize()
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

// dialPeer starts a dial to a peer unless a link or a dial exists.
func (n *Node) dialPeer(ps *peerState, now time.Time) {
	if ps.dial != nil || n.links.Links()[ps.info.ID] != nil {
		return
	}
	if c := n.candidates(ps.info); len(c) > 0 {
		ps.dial = n.links.AddDial(n.sprayPorts(c), link.DialOptions{Peer: ps.info.ID, Attempts: dialAttempts}, now)
	}
}

// overlayTick runs the overlay's timers.
func (n *Node) overlayTick(now time.Time) {
	o := &n.ov
	if o.cfg.Disabled {
		return
	}
	for id, until := range o.dead {
		if !now.Before(until) {
			delete(o.dead, id)
		}
	}
	for id, r := range o.requests {
		if now.After(r.expires) {
			delete(o.requests, id)
			if r.slot != nil {
				r.slot.request, r.slot.retry = 0, now
			}
		}
	}
	if !now.Before(o.stabilize) {
		o.stabilize = now.Add(o.cfg.StabilizeEvery + o.jitter(o.cfg.StabilizeEvery/2))
		if succ := o.ring.Successors(1); len(succ) > 0 {
			if l := n.upLink(succ[0].ID); l != nil {
				n.count(&o.sent, overlay.Stabilize)
				n.sendDirect(l, &overlay.Message{Type: overlay.Stabilize, TTL: 1, Dest: succ[0].ID, Origin: n.self, Via: succ[0].ID, ID: o.rng.Uint64(), Exact: true, From: n.selfInfo()})
			}
		}
	}
	if !now.Before(o.heal) {
		o.heal = now.Add(o.cfg.HealEvery + o.jitter(o.cfg.HealEvery))
		n.heal(now)
	}
	n.tickLongDistance(now)
	n.tickOnDemand(now)
	n.reconcile(now)
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

func (n *Node) tickLongDistance(now time.Time) {
	o := &n.ov
	size := o.ring.EstimateSize()
	k := o.cfg.Params.K(size)
	if size < 3 {
		k = 0 // with two nodes every link is a successor link
	}
	for len(o.ld) < k {
		o.ld = append(o.ld, &ldSlot{draw: overlay.Draw(o.rng), retry: now})
	}
	if len(o.ld) > k {
		o.ld = o.ld[:k]
	}
	if !o.joined {
		return
	}
	for _, s := range o.ld {
		if s.peer != (nid.ID{}) {
			if r := size / s.size; r < 0.5 || r > 2 {
				s.peer, s.retry = nid.ID{}, now // the network grew or shrank: aim again
			}
			continue
		}
		if s.request != 0 || now.Before(s.retry) {
			continue
		}
		if s.draw.TooClose(size) {
			s.draw = overlay.Draw(o.rng)
			continue
		}
		s.request, s.asked = o.rng.Uint64()|1, now
		o.requests[s.request] = pendingRequest{slot: s, expires: now.Add(requestTimeout)}
		n.originate(&overlay.Message{Type: overlay.LinkRequest, Dest: s.draw.Target(n.self, size), Origin: n.self,
			Via: n.via(), ID: s.request, Reasons: overlay.ReasonLongDistance, From: n.selfInfo()}, now)
	}
}

// via is an adjacent joined node replies can come back through.
func (n *Node) via() nid.ID {
	if succ := n.ov.ring.Successors(1); len(succ) > 0 && n.upLink(succ[0].ID) != nil {
		return succ[0].ID
	}
	return nid.ID{}
}

// reconcile moves the links toward what the overlay wants: successor
// links first, then long-distance and on-demand ones; links neither end
// wants any more are closed, but only once every successor link is up.
func (n *Node) reconcile(now time.Time) {
	o := &n.ov
	want := make(map[nid.ID]overlay.Reason)
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
	joined := len(succ) > 0 && n.upLink(succ[0].ID) != nil
	joinedChanged := joined != o.joined
	o.joined = joined
	if len(succ) > 0 && succ[0].ID != o.lastSuccessor && joined {
		// A new successor: tell it about us and learn its view right away
		// rather than at the next period, so joins settle in round trips.
		o.lastSuccessor = succ[0].ID
		o.stabilize = now
	}
	for _, id := range nid.SortedKeys(want) {
		ps := n.peer(id)
		if info, ok := o.ring.Lookup(id); ok && len(info.Endpoints) > 0 {
			ps.info.Endpoints = info.Endpoints
		}
		if n.links.Links()[id] == nil {
			n.dialPeer(ps, now)
		}
	}
	for _, id := range nid.SortedKeys(o.peers) {
		ps := o.peers[id]
		sticky := ps.local & (overlay.ReasonBootstrap | overlay.ReasonStatic | overlay.ReasonBeacon)
		if joined && ps.local&overlay.ReasonBootstrap != 0 {
			sticky &^= overlay.ReasonBootstrap
		}
		ps.local = want[id] | sticky
		l := n.upLink(id)
		if l != nil && l.Endpoint().IsRelay() {
			// Both ends must keep probing the direct path for hole punching
			// to work, so a relayed link learns every candidate we hear of.
			l.AddCandidates(n.candidates(ps.info))
		}
		if l == nil {
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
		if ps.local != 0 || ps.remote != 0 {
			ps.unwanted = time.Time{}
			continue
		}
		if ps.unwanted.IsZero() {
			ps.unwanted = now
		}
		if allSuccessorsUp && now.Sub(ps.unwanted) >= closeGrace && !ps.closing {
			n.count(&o.sent, overlay.LinkUse)
			n.sendDirect(l, &overlay.Message{Type: overlay.LinkUse, Dest: id, Origin: n.self, Joined: o.joined, Closing: true, Relaying: n.cfg.RelayRate > 0, From: n.selfInfo()})
			n.retire(l, ps, now)
		}
	}
	for _, id := range nid.SortedKeys(o.peers) {
		ps := o.peers[id]
		if ps != nil && ps.closing && !ps.retireAt.IsZero() && !now.Before(ps.retireAt) {
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
	if joined {
		for _, c := range slices.Clone(o.contacts) {
			if c.bootstrap && c.asked {
				n.doneWithContact(c.dial.Peer)
			}
		}
	}
}

// retire stops using a link at once — no floods, routes or flows over it —
// and tears it down after drainTime, so what is in flight still arrives.
func (n *Node) retire(l *link.Link, ps *peerState, now time.Time) {
	if ps.closing {
		return
	}
	ps.closing, ps.retireAt = true, now.Add(drainTime)
	n.setAdjacency()
	n.forgetPort(l.Port)
}

// unretire takes a retiring link back into use.
func (n *Node) unretire(ps *peerState) {
	ps.closing, ps.retireAt, ps.unwanted = false, time.Time{}, time.Time{}
	n.setAdjacency()
}

// newSessionSince reports whether l has a session from a handshake after t.
func newSessionSince(l *link.Link, t time.Time) bool {
	sessions := l.Sessions()
	return len(sessions) > 0 && sessions[len(sessions)-1].Created.After(t)
}

// Leave tells the neighbours this node is going, so they repair the ring
// at once instead of waiting for silence.
func (n *Node) Leave(now time.Time) {
	o := &n.ov
	if o.cfg.Disabled {
		return
	}
	n.svc.kv.Leave(now)
	pred, _ := o.ring.Predecessor()
	for _, id := range nid.SortedKeys(o.peers) {
		if l := n.upLink(id); l != nil {
			n.count(&o.sent, overlay.Leave)
			n.sendDirect(l, &overlay.Message{Type: overlay.Leave, Dest: id, Origin: n.self, Exact: true, From: n.selfInfo(), Pred: pred, Successors: o.ring.Successors(overlay.MaxSuccessors)})
		}
	}
}
