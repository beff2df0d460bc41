package node

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

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
	info := overlay.Info{ID: n.self, Endpoints: n.endpoints(), TURN: n.reach.turn}
	for _, l := range relays[:min(len(relays), overlay.MaxRelays)] {
		info.Relays = append(info.Relays, l.Peer.ID)
	}
	return info
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

// candidates are the endpoints to try for a peer: its addresses, then
// through the relays relaysFor picks, preferred first. Its IPv6 addresses
// only when this node has one of its own to send from.
func (n *Node) candidates(in overlay.Info) []link.Endpoint {
	var out []link.Endpoint
	hasIPv6 := n.hasIPv6()
	for _, ep := range in.Endpoints {
		if ep.Addr().Is4() || hasIPv6 {
			out = append(out, link.UDPEndpoint(ep))
		}
	}
	// Many NATs keep the source port when they can, and when several hosts
	// behind one NAT use the same port, the mapping a beacon saw can differ
	// from the one toward us; the peer's own port at its public address is
	// then worth a probe.
	for _, pub := range in.Endpoints {
		if pub.Addr().IsPrivate() || !pub.Addr().Is4() {
			continue // IPv6 has no NAT to guess a port of
		}
		for _, host := range in.Endpoints {
			guess := link.UDPEndpoint(netip.AddrPortFrom(pub.Addr(), host.Port()))
			if host.Addr().Is4() && host.Addr().IsPrivate() && !slices.Contains(out, guess) {
				out = append(out, guess)
			}
		}
	}
	if n.reach.turn.IsValid() {
		// Through our TURN allocation too: it reaches peers whose NAT
		// lets nothing else in, and meets their own relayed address.
		for _, ep := range in.Endpoints {
			if ep.Addr().Is4() != n.reach.turn.Addr().Is4() {
				continue // a TURN server relays within one family
			}
			out = append(out, link.Endpoint{Via: link.TURN, Addr: ep})
		}
	}
	for _, l := range n.relaysFor(in) {
		out = append(out, link.RelayEndpoint(l.Peer.ID, in.ID))
	}
	return out
}

// relaysFor picks at most two members to relay for a link with the peer,
// the first preferred: among the members it named and our beacon, those
// we have a direct link with. Our beacon comes first, as it exists to
// relay; members follow ranked by rendezvous hashing of the pair onto
// them, so that with the beacon gone each pair keeps to one member and
// the pairs spread over all members that relay, both ends agreeing on it,
// and a relay that fails gives its pairs to the next in their ranking.
// Members much farther than the nearest one are left out.
func (n *Node) relaysFor(in overlay.Info) []*link.Link {
	var beacon *link.Link
	var members []*link.Link
	for _, r := range append(slices.Clone(in.Relays), n.reach.beacon) {
		l := n.upLink(r)
		if l == nil || r == in.ID || l.Endpoint().IsRelay() || l == beacon || slices.Contains(members, l) {
			continue
		}
		if r == n.reach.beacon {
			beacon = l
		} else {
			members = append(members, l)
		}
	}
	if len(members) > 0 {
		nearest := relayRTT(slices.MinFunc(members, func(a, b *link.Link) int { return cmp.Compare(relayRTT(a), relayRTT(b)) }))
		members = slices.DeleteFunc(members, func(l *link.Link) bool { return relayRTT(l) > nearest+relayRTTSlack })
		slices.SortFunc(members, func(a, b *link.Link) int {
			return cmp.Compare(relayRank(n.self, in.ID, b.Peer.ID), relayRank(n.self, in.ID, a.Peer.ID))
		})
	}
	if beacon != nil {
		members = slices.Insert(members, 0, beacon)
	}
	return members[:min(len(members), 2)]
}

// relayRTTSlack is how much farther than the nearest relaying member
// another may be and still carry a share of the pairs.
const relayRTTSlack = 20 * time.Millisecond

// relayRTT is how far a relay is: the smoothed round trip of the link's
// probes, steadier than its last handshake's on a busy host.
func relayRTT(l *link.Link) time.Duration {
	if rtt := l.Counters.ProbeRTT(); rtt > 0 {
		return rtt
	}
	return l.RTT
}

// relayRank is relay's rendezvous-hashing weight for the pair of a and b,
// the same from either end: a hash of both IDs, lower first, and the
// relay's.
func relayRank(a, b, relay nid.ID) uint64 {
	if a.Compare(b) > 0 {
		a, b = b, a
	}
	var in [3 * len(nid.ID{})]byte
	copy(in[:], a[:])
	copy(in[len(a):], b[:])
	copy(in[2*len(a):], relay[:])
	sum := sha256.Sum256(in[:])
	return binary.BigEndian.Uint64(sum[:8])
}

// dialPeer starts a dial to a peer unless a link or a dial exists.
func (n *Node) dialPeer(ps *peerState, now time.Time) {
	if ps.dial != nil || n.links.Links()[ps.info.ID] != nil {
		return
	}
	if c := n.candidates(ps.info); len(c) > 0 {
		ps.dial = n.links.AddDial(c, link.DialOptions{Peer: ps.info.ID, Attempts: dialAttempts}, now)
	}
}

// closestTo answers a node looking for its place on the ring: the nodes
// this one knows — its view, and every node it has a link with — closest
// to id on either side. A node many join through at once (a bootstrap)
// has a link with each of them, so it hands every joiner its neighbours
// among all the others that have arrived, not only its own.
func (n *Node) closestTo(id nid.ID) (pred overlay.Info, succ []overlay.Info) {
	o := &n.ov
	known := append([]overlay.Info{n.selfInfo()}, o.ring.Successors(overlay.MaxSuccessors)...)
	if p, ok := o.ring.Predecessor(); ok {
		known = append(known, p)
	}
	for _, pid := range nid.SortedKeys(o.peers) {
		if ps := o.peers[pid]; len(ps.info.Endpoints) > 0 && n.upLink(pid) != nil {
			known = append(known, ps.info)
		}
	}
	known = slices.DeleteFunc(known, func(in overlay.Info) bool { return in.ID == id || in.ID == (nid.ID{}) })
	slices.SortFunc(known, func(a, b overlay.Info) int { return id.Distance(a.ID).Compare(id.Distance(b.ID)) })
	known = slices.CompactFunc(known, func(a, b overlay.Info) bool { return a.ID == b.ID })
	if len(known) == 0 {
		return overlay.Info{}, nil
	}
	return known[len(known)-1], known[:min(len(known)-1, overlay.MaxSuccessors)]
}
