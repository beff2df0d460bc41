package node

import (
	"slices"
	"time"

	"burrow/firewall"
	"burrow/flood"
	"burrow/l2"
	"burrow/l2/udp4"
	"burrow/link"
	"burrow/nid"
	"burrow/wire"
)

// handleFromLink processes decrypted plaintext the data path passed up.
func (n *Node) handleFromLink(port uint32, plain []byte, now time.Time) {
	l := n.links.LinkByPort(port)
	if l == nil || len(plain) == 0 {
		return
	}
	switch wire.Inner(plain[0]) {
	case wire.InnerFrame:
		f, err := wire.ParseFrame(plain)
		if err != nil {
			n.stats.drop(DropMalformed)
			return
		}
		n.switchFrame(port, f.Ethernet, f.Offload, f.Source, false, now)
	case wire.InnerRouted, wire.InnerRoutedOnward:
		r, inner, err := wire.ParseRouted(plain)
		if err != nil || nid.ID(r.Dest) != n.self {
			n.stats.drop(DropMalformed)
			return
		}
		f, err := wire.ParseFrame(inner)
		if err != nil {
			n.stats.drop(DropMalformed)
			return
		}
		n.switchFrame(port, f.Ethernet, f.Offload, r.Source, true, now)
	case wire.InnerFlood:
		n.handleFlood(l, plain[1:], now)
	case wire.InnerControl:
		n.handleControl(l, plain[1:], now)
	case wire.InnerRevocation:
		n.handleRevocation(l, plain[1:])
	default:
		n.stats.drop(DropMalformed)
	}
}

// switchFrame is the slow path of the switch: learn the source, then
// forward along a learned path (installing a flow for the data path), or
// flood when the destination is a group or unknown. source is the bridge
// the frame says its source sits behind, zero when it does not say;
// routed says the frame came routed toward this bridge, so the hops it
// crossed keep no way back: answers go routed too.
func (n *Node) switchFrame(in uint32, frame []byte, off l2.Offload, source nid.ID, routed bool, now time.Time) {
	if len(frame) < 14 {
		n.stats.drop(DropMalformed)
		return
	}
	var src, dst l2.MAC
	copy(dst[:], frame[0:6])
	copy(src[:], frame[6:12])
	if in != localPort && !src.IsMulticast() && source == (nid.ID{}) {
		// Bridges that pass on others' frames name their source: a frame
		// naming none comes from the bridge of the peer that sent it.
		if l := n.links.LinkByPort(in); l != nil {
			source = l.Peer.ID
		}
	}
	if in != localPort {
		v, a := n.judge(frame, source, now)
		if v == unjudged {
			n.holdFrame(heldFrame{frame: slices.Clone(frame), off: off, origin: source, in: in, routed: routed, switched: true}, a, now)
			return
		}
		if !n.stats.bound(v) {
			return // nothing is learned from it either: not where src lives, not its ARP
		}
	}
	n.snoopNeighbors(frame, in, now)
	if in == localPort {
		n.snoopGroups(frame, n.self, now)
		if n.cfg.Services.LocalDHCP && udp4.IsDHCP(frame) {
			n.stats.DHCPKeptLocal.Add(1)
			return // the LAN's own server answers; the overlay never sees it
		}
	}
	if in == localPort && n.serveLocal(frame, now) {
		return
	}
	if in == localPort && !n.passesFirewall(firewall.Outbound, frame, dst, nid.ID{}, now) {
		return
	}
	if in == localPort {
		source = n.self
		n.learnMAC(src, flood.LocalPort, n.self, now)
	} else if !src.IsMulticast() {
		n.learnSource(src, in, source, routed, now)
	}
	if dst.IsMulticast() {
		if in != localPort {
			// Group frames travel as floods; a bare one from a peer is bogus.
			n.stats.drop(DropMalformed)
			return
		}
		n.startFlood(flood.Broadcast, frame, off, now)
		return
	}
	e, ok := n.learn.Lookup(dst)
	if ok && uint32(e.Port) == in && in != localPort {
		// The peer sent a frame for a MAC learned behind that very peer:
		// one of the two entries is wrong. Forget ours and flood, which
		// finds the MAC wherever it is and teaches the way back.
		n.learn.Forget(dst)
		n.dirty |= dirtyMACs
		n.dropFlowsTo(dst)
		ok = false
	}
	if !ok {
		// Unknown unicast: flood it from here (seed §3.2.4), and the local
		// TAP may hold a silent host, so it gets a copy too. A frame from a
		// peer floods as Transit: this bridge does not own its source.
		kind := flood.Broadcast
		if in != localPort {
			if n.passesFirewall(firewall.Inbound, frame, src, source, now) {
				n.writeTAP(frame, off)
			}
			kind = flood.Transit
		}
		n.startFlood(kind, frame, off, now)
		return
	}
	out := uint32(e.Port)
	if out == in {
		return // between two hosts behind our own TAP: theirs to carry
	}
	n.installFlow(flowKey{in: in, src: src, dst: dst}, out, e.Root, source, now)
	if out == localPort {
		if n.passesFirewall(firewall.Inbound, frame, src, source, now) {
			n.writeTAP(frame, off)
		}
		return
	}
	// As the data path does (publishFlows), the link to the destination's
	// bridge goes first, unless the frame came in on it.
	l := n.adjacentLink(e.Root)
	if l == nil || l.Port == in {
		l = n.links.LinkByPort(out)
	}
	if l == nil || !l.Up() {
		n.sendRouted(wire.Routed{Dest: e.Root, Source: source}, frame, off, now)
		return
	}
	n.buf = wire.AppendFrame(n.buf[:0], off, source, frame)
	n.sendData(l, n.buf, now)
}

// sendRouted sends a frame toward the bridge to.Dest, greedily over the
// ring as the data path does, for a destination whose learned port is gone.
func (n *Node) sendRouted(to wire.Routed, frame []byte, off l2.Offload, now time.Time) {
	h := n.snap.Load().toward(to.Dest, nil, now.UnixNano(), false)
	if h.port == nil || n.upLink(h.port.peer) == nil {
		n.stats.drop(DropNoRoute)
		return
	}
	l := h.port.link
	if !h.routed {
		n.buf = n.buf[:wire.FrameHeaderLen]
	} else {
		n.buf = n.buf[:wire.RoutedHeaderLen+wire.FrameHeaderLen]
		to.Onward = h.onward
		wire.PutRoutedHeader(n.buf, to)
	}
	wire.PutFrameHeader(n.buf[len(n.buf)-wire.FrameHeaderLen:], off)
	n.buf = append(n.buf, frame...)
	n.sendData(l, n.buf, now)
}

// sendData sends traffic the peer's answers are expected to follow, and
// probes the link when they stopped following — as the data path does, and
// with the same suspicion when the probes go unanswered.
func (n *Node) sendData(l *link.Link, plaintext []byte, now time.Time) {
	if !n.links.Send(l, plaintext, now) {
		return
	}
	if l.Counters.SentData(now.UnixNano()) {
		n.links.Probe(l, now)
	}
	if l.Counters.Suspect(now.UnixNano()) && l.Counters.ReportSuspect() {
		n.links.Suspect(l, now)
	}
}

// passesFirewall asks the firewall, if there is one, about a frame the
// core switches into or out of the TAP. The member at the other end is the
// one behind bridge, or, when bridge is zero, behind the learned bridge of
// mac (the destination of an outbound frame, the source of an inbound one).
func (n *Node) passesFirewall(dir firewall.Direction, frame []byte, mac l2.MAC, bridge nid.ID, now time.Time) bool {
	if n.cfg.Firewall == nil {
		return true
	}
	if bridge == (nid.ID{}) && !mac.IsMulticast() {
		bridge, _ = n.learn.RootOf(mac)
	}
	var m firewall.Member
	if l := n.links.Links()[bridge]; l != nil && l.Up() {
		m = firewall.Member{Name: l.Peer.Name, Groups: l.Peer.Groups}
	}
	if n.cfg.Firewall.Allow(dir, frame, m, now.UnixNano()) {
		return true
	}
	if m.Name == "" && bridge != (nid.ID{}) && n.cfg.Firewall.NamesMembers(dir) {
		n.openOnDemandLink(bridge, now) // the next try may match a rule by its certificate
	}
	return false
}

func (n *Node) writeTAP(frame []byte, off l2.Offload) {
	n.stats.FramesToTAP.Add(1)
	n.out.WriteFrame(frame, off)
}

// learnSource learns where the source of a frame that came in on port in
// lives. A frame routed here crossed hops that keep no state for it, so
// its source is reached by routing back toward its bridge — unless a live
// port toward that bridge is known already.
func (n *Node) learnSource(src l2.MAC, in uint32, root nid.ID, routed bool, now time.Time) {
	if !routed || root == (nid.ID{}) {
		n.learnMAC(src, flood.Port(in), root, now)
		return
	}
	if e, ok := n.learn.Lookup(src); ok && e.Root == root && e.Port != flood.RoutedPort && n.links.LinkByPort(uint32(e.Port)) != nil {
		return
	}
	n.learnMAC(src, flood.RoutedPort, root, now)
}

// learnMAC records where mac lives; when it moved, the flows toward it
// are stale and must go so the data path asks again. Nothing is learned
// through a link that is being retired: its peer is leaving, and what it
// still forwards must not draw traffic back to it.
func (n *Node) learnMAC(mac l2.MAC, p flood.Port, root nid.ID, now time.Time) {
	if mac == n.cfg.MAC && p != flood.LocalPort {
		return // our own TAP never moves; a peer claiming it is wrong
	}
	if l := n.links.LinkByPort(uint32(p)); l != nil {
		if ps := n.ov.peers[l.Peer.ID]; ps != nil && ps.closing {
			return
		}
	}
	old, known := n.learn.Lookup(mac)
	if known && (old.Port != p || old.Root != root) {
		n.dropFlowsTo(mac)
	}
	if n.learn.Learn(mac, p, root, now) || now.Sub(old.LastSeen) >= macRefresh {
		n.dirty |= dirtyMACs
	}
}

// dropFlowsTo removes the flows toward mac, so the data path asks again.
func (n *Node) dropFlowsTo(mac l2.MAC) {
	for k := range n.flows {
		if k.dst == mac {
			delete(n.flows, k)
			n.dirty |= dirtyFlows
		}
	}
}

func (n *Node) installFlow(k flowKey, out uint32, root, origin nid.ID, now time.Time) {
	if f := n.flows[k]; f != nil && f.out == out && f.root == root && f.origin == origin {
		return
	}
	if len(n.flows) >= n.cfg.MaxFlows {
		return // the slow path keeps forwarding; the table must not grow unbounded
	}
	f := &flow{out: out, root: root, origin: origin}
	f.lastUsed.Store(now.UnixNano())
	n.flows[k] = f
	n.dirty |= dirtyFlows
}

// movedTo is a copy of f with another path, keeping its use and counts.
func (f *flow) movedTo(out uint32, root nid.ID) *flow {
	g := &flow{out: out, root: root, origin: f.origin, counted: f.counted}
	g.lastUsed.Store(f.lastUsed.Load())
	g.bytes.Store(f.bytes.Load())
	return g
}

// startFlood sends frame to every node as a Bounded Flood rooted here.
func (n *Node) startFlood(kind flood.Kind, frame []byte, off l2.Offload, now time.Time) {
	if off.NeedsCsum {
		// A flood has no offload fields; finish the checksum once here.
		if err := l2.CompleteChecksum(frame, int(off.CsumStart), int(off.CsumOffset)); err != nil {
			n.stats.drop(DropMalformed)
			return
		}
	}
	n.stats.FloodsStarted.Add(1)
	n.forwardFlood(kind, n.self, n.self, 0, frame, now)
}

// forwardFlood sends the broadcast to the adjacent peers inside bound, each
// with its recomputed bound; the share of a peer whose link is failing goes
// to the peer before it.
func (n *Node) forwardFlood(kind flood.Kind, root, bound nid.ID, hops uint8, frame []byte, now time.Time) {
	failing := func(p nid.ID) bool {
		l := n.links.Links()[p]
		return l == nil || !l.Up() || l.Counters.Suspect(now.UnixNano())
	}
	n.targets = flood.Targets(n.targets[:0], n.self, n.adjacency, bound, failing)
	for _, t := range n.targets {
		l := n.links.Links()[t.Peer]
		if l == nil || !l.Up() {
			continue
		}
		n.buf = append(n.buf[:0], byte(wire.InnerFlood))
		n.buf = flood.AppendBroadcast(n.buf, kind, root, t.Bound, hops+1, frame)
		n.sendData(l, n.buf, now)
	}
}

// handleFlood takes the leaf adverts of a neighbour; broadcasts are
// delivered and forwarded by the data path, which passes on what the core
// learns from (learnFromFlood).
func (n *Node) handleFlood(from *link.Link, b []byte, now time.Time) {
	m, err := flood.Parse(b)
	if err != nil || m.Kind != flood.LeafAdvert {
		n.stats.drop(DropMalformed)
		return
	}
	s := n.snap.Load()
	for i := range m.NumLeaves() {
		if s.macBoundElsewhere(m.Leaf(i), m.Root) {
			n.stats.drop(DropSpoofed) // no bridge advertises another member's TAP or leased client
			continue
		}
		n.learnMAC(m.Leaf(i), flood.Port(from.Port), m.Root, now)
	}
}

// learnFromFlood learns from a broadcast the data path delivered: where
// its source lives (unless a transit bridge flooded it) and, for ARP,
// which address belongs to which MAC.
func (n *Node) learnFromFlood(port uint32, plain []byte, now time.Time) {
	if n.links.LinkByPort(port) == nil || len(plain) < 1 {
		return
	}
	m, err := flood.Parse(plain[1:])
	if err != nil || m.Kind == flood.LeafAdvert {
		n.stats.drop(DropMalformed)
		return
	}
	src := l2.MAC(m.Frame[6:12])
	s := n.snap.Load()
	source := s.floodSource(m)
	if v, a := s.judge(m.Frame, source); v == spoofed || v == unheld {
		n.recheckDropped(m.Frame, a, source, now)
		return // the data path refused and counted it; nothing to learn
	}
	if m.Kind == flood.Broadcast && !src.IsMulticast() {
		n.learnMAC(src, flood.Port(port), m.Root, now)
	}
	n.snoopNeighbors(m.Frame, port, now)
	n.snoopGroups(m.Frame, m.Root, now)
}

// advertiseLeaves tells a new neighbour which MACs live behind this bridge.
func (n *Node) advertiseLeaves(l *link.Link, now time.Time) {
	leaves := n.learn.Leaves(n.self, nil)
	for len(leaves) > 0 {
		chunk := leaves[:min(len(leaves), flood.MaxLeaves)]
		leaves = leaves[len(chunk):]
		n.buf = append(n.buf[:0], byte(wire.InnerFlood))
		n.buf = flood.AppendLeafAdvert(n.buf, n.self, chunk)
		n.links.Send(l, n.buf, now)
	}
}
