package node

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"burrow/firewall"
	"burrow/flood"
	"burrow/l2"
	"burrow/l2/udp4"
	"burrow/link"
	"burrow/nid"
	"burrow/wire"
)

// EventKind says what the data path hands to the core.
type EventKind uint8

// Event kinds.
const (
	EventDatagram  EventKind = iota + 1 // a non-transport datagram (handshake, STUN)
	EventConfirmed                      // first message opened on a session
	EventFromLink                       // decrypted plaintext the data path cannot finish
	EventFromTAP                        // a TAP frame with no flow (broadcast, miss)
	// EventFloodSeen is a broadcast the data path delivered and forwarded
	// itself; the core only learns from it (its source, ARP).
	EventFloodSeen
	// EventSuspect says a link's peer stopped answering its probes.
	EventSuspect
	// EventUnjudged names a source address, Addr, that a frame from the
	// bridge Origin used and whose holder the core has not looked up yet.
	EventUnjudged
	// EventRelayWaiting says relayed datagrams began to wait for their
	// pairs' shares: the core must tick soon to release them, should no
	// more traffic pass through the data path to do it.
	EventRelayWaiting
	// EventUncertified says the firewall refused a frame to or from a
	// host behind the bridge Origin for want of Origin's certificate: a
	// rule names members, and no link to Origin is up.
	EventUncertified
)

// Event is work for the core. Data is owned by the event.
type Event struct {
	Kind    EventKind
	From    link.Endpoint
	Port    uint32
	Session *link.Session
	Offload l2.Offload
	Data    []byte
	Addr    netip.Addr
	Origin  nid.ID
}

// Dataplane is the fast path. It is safe for concurrent use: each worker
// goroutine calls it with its own Worker.
type Dataplane struct {
	snap  *atomic.Pointer[snapshot]
	stats *Stats
	relay *relayBudget
	gate  *sourceGate
	fw    *firewall.Firewall // nil: every frame passes
	// askedCertificate is when the data path last told the core of a
	// frame refused for want of a certificate (EventUncertified).
	askedCertificate atomic.Int64
	trace            Trace
}

// FrameSink receives frames for the local TAP.
type FrameSink interface {
	Frame(frame []byte, off l2.Offload)
}

// Worker is one data-path goroutine's scratch and outputs.
type Worker struct {
	Tx     *TxBatch
	Frames FrameSink
	// Slow hands an event to the core; it must not block.
	Slow    func(Event)
	targets []flood.Target
	// recent is what the worker last found out about a flow; a bulk
	// stream's segments come one after another, and look it up once.
	recent recentFlow
	// segments cuts the worker's super-frames.
	segments l2.Segmenter
	// relayed holds a relayed datagram released from its pair's queue.
	relayed []byte
}

// recentFlow is a flow as one snapshot resolves it: its route, and the
// verdict on frames from one source address. It holds on to that snapshot
// until the worker's next frame of another flow.
type recentFlow struct {
	snap  *snapshot
	key   flowKey
	route route
	// judged says verdict is the verdict on frames from src.
	judged  bool
	src     netip.Addr
	verdict verdict
}

// flow resolves key in s: from the recent flow when it is the same,
// else from the snapshot's tables. It returns nil when s has no such flow.
func (w *Worker) flow(s *snapshot, key flowKey) *recentFlow {
	f := &w.recent
	if f.snap == s && f.key == key {
		return f
	}
	r, ok := s.flows[key]
	if !ok {
		return nil
	}
	*f = recentFlow{snap: s, key: key, route: r}
	return f
}

// judge is s.judge for a frame of the flow, judged once per source
// address and snapshot.
func (f *recentFlow) judge(frame []byte) (verdict, netip.Addr) {
	src, _ := l2.SourceAddr(frame)
	if !f.judged || src != f.src {
		f.judged, f.src = true, src
		f.verdict, _ = f.snap.judge(frame, f.route.origin)
	}
	return f.verdict, f.src
}

// Buffer layout of an outgoing datagram. A frame is written at Headroom so
// that whatever goes in front of it — its frame header (and a routed
// header when it travels toward a bridge), or a flood header — its
// transport header and, when the link is relayed, the relay header and the
// relay link's transport header all fit, and everything is sealed in place:
//
//	[outer transport header][relay header][transport header][routed header][frame header][frame][tag][outer tag]
//	 └──────── relayRoom ───────────────┘                   └──────── or a flood header ──┘
const (
	relayRoom = wire.TransportHeaderLen + wire.RelayHeaderLen
	// plainRoom is the most a plaintext puts in front of its frame.
	plainRoom = max(wire.RoutedHeaderLen+wire.FrameHeaderLen, 1+flood.BroadcastHeaderLen)
	// Headroom is where a TAP frame starts in a transmit buffer.
	Headroom   = relayRoom + wire.TransportHeaderLen + plainRoom
	txTailroom = 2 * wire.TagLen
	// framePlain is where the plaintext of an unrouted frame starts.
	framePlain = Headroom - wire.FrameHeaderLen
)

// TxBufLen is the size of the transmit buffers for frames up to maxFrame,
// with room for the source bridge a flow's first frames carry.
func TxBufLen(maxFrame int) int { return Headroom + wire.SourceLen + maxFrame + txTailroom }

// FromTAP switches one packet read from the TAP. hdr describes offloads
// (zero when the TAP has no virtio header).
func (d *Dataplane) FromTAP(w *Worker, hdr l2.VirtioNetHdr, frame []byte, now int64) {
	d.stats.FramesFromTAP.Add(1)
	if len(frame) < 14 {
		d.stats.drop(DropMalformed)
		return
	}
	var key flowKey
	copy(key.dst[:], frame[0:6])
	copy(key.src[:], frame[6:12])
	s := d.snap.Load()
	if key.dst.IsMulticast() {
		d.slowFrame(w, hdr, frame)
		return
	}
	known := w.flow(s, key)
	// The core learns addresses from ARP and neighbour advertisements (sent
	// unicast, often on a flow already up, and the one place a host says it
	// is a router), so they take the slow path even when a flow is up.
	announces := l2.AnnouncesAddress(frame)
	if known == nil || announces {
		if known == nil && !announces && hdr.GSOType == l2.VirtioNetHdrGSONone && s.floodsOnItsOwn(key) {
			d.floodFromTAP(w, s, hdr, frame, now)
			return
		}
		d.slowFrame(w, hdr, frame)
		return
	}
	r := known.route
	if !d.allows(w, s, firewall.Outbound, frame, r.root, now) {
		return
	}
	r.touch(now)
	r.bytes.Add(uint64(len(frame)))
	h := d.nextHop(w, s, r, now)
	if h.port == nil {
		d.slowFrame(w, hdr, frame)
		return
	}
	d.sendFrame(w, s, h, hdr, frame, wire.Routed{Dest: r.root, Source: s.self}, now)
}

// floodsOnItsOwn reports whether the data path may flood a TAP frame with
// no flow, and nothing the core snoops, itself: its destination is unknown
// (so the core has nothing to install), its source is already learned
// here, and it is not for the services' addresses.
func (s *snapshot) floodsOnItsOwn(key flowKey) bool {
	if _, known := s.macs.lookup(key.dst); known {
		return false
	}
	if src, ok := s.macs.lookup(key.src); !ok || src.port != localPort {
		return false
	}
	return !slices.Contains(s.serviceMACs, key.dst)
}

// nextHop is where a flow's frames go now: its own port while that port's
// peer answers, else the precomputed backup toward the destination's
// bridge (or, when that stopped answering too, the best one left), routed:
// unless the next hop is that bridge, the frame must carry its ID, as the
// next hop need not know the destination. A nil port sends the frame to
// the core.
func (d *Dataplane) nextHop(w *Worker, s *snapshot, r route, now int64) hop {
	p := r.via
	if p != nil && p.session != nil && !d.suspect(w, p, now) {
		return hop{port: p}
	}
	if h := r.backup; h.port != nil && h.port.session != nil && !h.port.suspect(now) {
		return h
	}
	return s.toward(r.root, p, now, false)
}

// suspect reports whether p's peer stopped answering its probes, and tells
// the core the first time, whichever traffic — unicast, flood, routed —
// finds out.
func (d *Dataplane) suspect(w *Worker, p *port, now int64) bool {
	if !p.suspect(now) {
		return false
	}
	if p.link.Counters.ReportSuspect() {
		w.Slow(Event{Kind: EventSuspect, Port: p.link.Port})
	}
	return true
}

// slowFrame hands a TAP frame to the core, segmenting super-frames first
// because the core only deals in frames that fit a datagram.
func (d *Dataplane) slowFrame(w *Worker, hdr l2.VirtioNetHdr, frame []byte) {
	if hdr.GSOType == l2.VirtioNetHdrGSONone {
		w.Slow(Event{Kind: EventFromTAP, Offload: l2.OffloadOf(hdr), Data: clone(frame)})
		return
	}
	_, off, err := w.segments.Start(frame, hdr)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	for start, end, ok := w.segments.Next(); ok; start, end, ok = w.segments.Next() {
		w.Slow(Event{Kind: EventFromTAP, Offload: off, Data: clone(frame[start:end])})
	}
}

// sendFrame segments (if needed), frames, seals and queues a TAP frame,
// which it may overwrite. A super-frame is cut in place (l2.Segmenter)
// and each segment but the first sealed from there into its datagram: the
// cipher reads its payload, and nothing copies it.
func (d *Dataplane) sendFrame(w *Worker, s *snapshot, h hop, hdr l2.VirtioNetHdr, frame []byte, to wire.Routed, now int64) {
	if hdr.GSOType == l2.VirtioNetHdrGSONone {
		d.sendCopy(w, s, h, frame, l2.OffloadOf(hdr), to, now)
		return
	}
	_, off, err := w.segments.Start(frame, hdr)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	prefix := wire.FrameHeaderLen
	if h.routed {
		prefix += wire.RoutedHeaderLen
	}
	for start, end, ok := w.segments.Next(); ok; start, end, ok = w.segments.Next() {
		if start < prefix {
			// The first segment: nothing in front of it to write over.
			d.sendCopy(w, s, h, frame[start:end], off, to, now)
			continue
		}
		at := putFramePrefix(frame, start, h, off, to)
		d.sealData(w, s, h.port, w.Tx.next(), relayRoom, frame[at:end], now)
	}
}

// sendCopy copies a frame into a datagram's buffer, frames it there for
// the hop and seals it in place.
func (d *Dataplane) sendCopy(w *Worker, s *snapshot, h hop, frame []byte, off l2.Offload, to wire.Routed, now int64) {
	buf := w.Tx.next()
	n := copy(buf[Headroom:], frame)
	if n < len(frame) || len(buf)-Headroom-n < txTailroom {
		d.stats.drop(DropMalformed)
		return
	}
	at := putFramePrefix(buf, Headroom, h, off, to)
	d.sealData(w, s, h.port, buf, at-wire.TransportHeaderLen, buf[at:Headroom+n], now)
}

// putFramePrefix writes what goes in front of the frame at b[start:] for
// hop h — its frame header, and before that the routed header to when the
// hop needs one — and returns where the plaintext starts.
func putFramePrefix(b []byte, start int, h hop, off l2.Offload, to wire.Routed) int {
	start -= wire.FrameHeaderLen
	wire.PutFrameHeader(b[start:], off)
	return putRouted(b, start, h, to)
}

// putRouted writes the routed header to in front of the plaintext at
// b[start:] when hop h needs one, and returns where the plaintext starts.
func putRouted(b []byte, start int, h hop, to wire.Routed) int {
	if !h.routed {
		return start
	}
	start -= wire.RoutedHeaderLen
	to.Onward = h.onward
	wire.PutRoutedHeader(b[start:], to)
	return start
}

// sealData seals traffic the peer's answers are expected to follow, and
// probes the link when they stopped following; as seal.
func (d *Dataplane) sealData(w *Worker, s *snapshot, p *port, buf []byte, inner int, plain []byte, now int64) {
	d.seal(w, s, p, buf, inner, plain, now)
	if p.link.Counters.SentData(now) {
		d.sendProbe(w, s, p, false, now, now)
	}
	d.suspect(w, p, now)
}

// sendProbe sends a probe (or the answer to one, echoing stamp).
func (d *Dataplane) sendProbe(w *Worker, s *snapshot, p *port, reply bool, stamp, now int64) {
	buf := w.Tx.next()
	start := relayRoom + wire.TransportHeaderLen
	probe := wire.AppendProbe(buf[start:start], reply, stamp)
	d.seal(w, s, p, buf, relayRoom, probe, now)
}

// seal encrypts plain for the link of p into a datagram at buf[inner:]
// and queues it, wrapped for the relay when the link's path is relayed.
// plain is either in place, right after the datagram's transport header,
// or apart from buf; inner leaves room for the relay's headers.
func (d *Dataplane) seal(w *Worker, s *snapshot, p *port, buf []byte, inner int, plain []byte, now int64) {
	if p.session == nil {
		d.stats.drop(DropNoRoute)
		return
	}
	dgram, err := p.session.Seal(buf[inner:], plain, now)
	if err != nil {
		d.stats.drop(sealDrop(err))
		return
	}
	to := p.link.Endpoint()
	if !to.IsRelay() {
		w.Tx.commit(dgram, to)
		return
	}
	relay := s.byPeer[to.Relay]
	if relay == nil || relay.session == nil {
		d.stats.drop(DropNoRoute)
		return
	}
	outer := inner - relayRoom
	header := buf[outer+wire.TransportHeaderLen : inner]
	header[0] = byte(wire.InnerRelayTo)
	copy(header[1:], to.Peer[:])
	wrapped, err := relay.session.Seal(buf[outer:], buf[outer+wire.TransportHeaderLen:inner+len(dgram)], now)
	if err != nil {
		d.stats.drop(sealDrop(err))
		return
	}
	w.Tx.commit(wrapped, relay.link.Endpoint())
}

// sealDrop is why a datagram Seal refused is dropped: too long for the
// buffer (a peer with a larger MTU), or the session is used up.
func sealDrop(err error) DropReason {
	if err == link.ErrShortBuffer {
		return DropMalformed
	}
	return DropNoRoute
}

// FromNetwork handles one datagram from the socket (or another transport).
func (d *Dataplane) FromNetwork(w *Worker, from link.Endpoint, dgram []byte, now int64) {
	d.fromNetwork(w, from, dgram, now, false)
}

func (d *Dataplane) fromNetwork(w *Worker, from link.Endpoint, dgram []byte, now int64, relayed bool) {
	if len(dgram) == 0 || wire.Type(dgram[0]) != wire.TypeTransport {
		// A relayed datagram came over a member's session, and the relay
		// already bounds what a pair sends.
		if !relayed && !d.gate.allow(from, now) {
			d.stats.drop(DropRateLimited)
			return
		}
		w.Slow(Event{Kind: EventDatagram, From: from, Data: clone(dgram)})
		return
	}
	idx, counter, err := wire.ParseTransportHeader(dgram)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	s := d.snap.Load()
	rx, ok := s.sessions[idx]
	if !ok {
		d.stats.drop(DropUnknownSession)
		return
	}
	sess, in := rx.session, rx.port
	plain, first, err := sess.Open(dgram, counter, now)
	if err != nil {
		if err == link.ErrReplay {
			d.stats.drop(DropReplay)
		} else {
			d.stats.drop(DropAuth)
		}
		return
	}
	in.link.SetEndpoint(from)
	if first {
		w.Slow(Event{Kind: EventConfirmed, Session: sess})
	}
	if len(plain) == 0 {
		return // keepalive
	}
	switch wire.Inner(plain[0]) {
	case wire.InnerFrame:
		d.switchFrame(w, s, in, plain, plain, nid.ID{}, now)
	case wire.InnerRouted, wire.InnerRoutedOnward:
		d.route(w, s, in, plain, now)
	case wire.InnerFlood:
		d.flood(w, s, in, plain, now)
	case wire.InnerProbe:
		if stamp, err := wire.ParseProbe(plain); err == nil {
			d.sendProbe(w, s, in, true, stamp, now)
		} else {
			d.stats.drop(DropMalformed)
		}
	case wire.InnerProbeReply:
		if stamp, err := wire.ParseProbe(plain); err == nil {
			in.link.Counters.ProbeAnswered(stamp, now)
		} else {
			d.stats.drop(DropMalformed)
		}
	case wire.InnerRelayTo:
		if relayed {
			d.stats.drop(DropMalformed) // no relaying of relayed datagrams
			return
		}
		d.relayOn(w, s, in, plain, now)
	case wire.InnerRelayFrom:
		if relayed || len(plain) < wire.RelayHeaderLen {
			d.stats.drop(DropMalformed)
			return
		}
		origin := nid.ID(plain[1:wire.RelayHeaderLen])
		d.fromNetwork(w, link.RelayEndpoint(in.link.Peer.ID, origin), plain[wire.RelayHeaderLen:], now, true)
	default:
		w.Slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(plain)})
	}
}

// switchFrame forwards a unicast frame plaintext that arrived over link in,
// inside received (the routed frame around it, or itself), which goes to
// the core when the data path cannot finish the frame.
func (d *Dataplane) switchFrame(w *Worker, s *snapshot, in *port, plain, received []byte, routedFrom nid.ID, now int64) {
	f, err := wire.ParseFrame(plain)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	frame := f.Ethernet
	var key flowKey
	key.in = in.link.Port
	copy(key.dst[:], frame[0:6])
	copy(key.src[:], frame[6:12])
	// Bridges that pass on others' frames name their source (in the
	// routed header or the frame's own): a frame naming none comes from
	// the bridge of the peer that sent it.
	origin := nid.ID(f.Source)
	if routedFrom != (nid.ID{}) {
		origin = routedFrom
	}
	if origin == (nid.ID{}) {
		origin = in.link.Peer.ID
	}
	known := w.flow(s, key)
	if known == nil || origin != known.route.origin || l2.AnnouncesAddress(frame) {
		// A miss, or a frame from another bridge than the flow's (its
		// source moved, or a member sends as another's host): the core
		// learns from it where the source lives now, and judges it. The
		// core also learns addresses from ARP and neighbour advertisements,
		// which come unicast on flows already up.
		w.Slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(received)})
		return
	}
	r := known.route
	r.touch(now)
	if r.out == localPort {
		v, src := known.judge(frame)
		if !d.admits(w, s, frame, f.Offload, known.route.origin, v, src, now) {
			return
		}
		r.bytes.Add(uint64(len(frame)))
		d.stats.FramesToTAP.Add(1)
		w.Frames.Frame(frame, f.Offload)
		return
	}
	h := d.nextHop(w, s, r, now)
	if h.port == nil {
		w.Slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(received)})
		return
	}
	// Passed on, a frame names its source's bridge, in the routed header or
	// in its own: the next bridge cannot tell it from this one's otherwise.
	buf := w.Tx.next()
	start, source, size := framePlain, nid.ID{}, wire.FrameHeaderLen+len(frame)
	if !h.routed {
		start, source, size = framePlain-wire.SourceLen, known.route.origin, size+wire.SourceLen
	}
	if len(buf)-start-size < txTailroom {
		d.stats.drop(DropMalformed)
		return
	}
	b := wire.AppendFrame(buf[start:start], f.Offload, source, frame)
	at := putRouted(buf, start, h, wire.Routed{Dest: r.root, Source: known.route.origin})
	d.sealData(w, s, h.port, buf, at-wire.TransportHeaderLen, buf[at:start+len(b)], now)
}

// admits decides whether a frame from a host behind bridge origin may go
// to the TAP: bound to its sender (v is its verdict, src its source
// address) and through the firewall. A frame whose source's holder the
// core has not looked up yet goes to the core instead, which delivers it
// once the answer is there: no frame passes unjudged.
func (d *Dataplane) admits(w *Worker, s *snapshot, frame []byte, off l2.Offload, origin nid.ID, v verdict, src netip.Addr, now int64) bool {
	if v == unjudged {
		w.Slow(Event{Kind: EventUnjudged, Addr: src, Origin: origin, Offload: off, Data: clone(frame)})
		return false
	}
	if !d.stats.bound(v) {
		return false
	}
	return d.allows(w, s, firewall.Inbound, frame, origin, now)
}

// certificateAskEvery spaces the data path's EventUncertified: the core
// asks each bridge for a link at most once per requestTimeout anyway, and
// a member sending refused frames by the thousand must not fill its queue.
const certificateAskEvery = 100 * time.Millisecond

// allows is the firewall's word on a frame to or from a host behind
// bridge; every frame passes without a firewall, at the cost of an
// inlined test.
func (d *Dataplane) allows(w *Worker, s *snapshot, dir firewall.Direction, frame []byte, bridge nid.ID, now int64) bool {
	return d.fw == nil || d.firewallAllows(w, s, dir, frame, bridge, now)
}

// firewallAllows asks the firewall. A refusal for want of the bridge's
// certificate has the core ask the bridge for a link, as it does for the
// frames it judges itself: the next try may then match a rule by its
// certificate. Without it, a connection whose first segment met a flow
// here waited for a retry that happened to reach the core.
func (d *Dataplane) firewallAllows(w *Worker, s *snapshot, dir firewall.Direction, frame []byte, bridge nid.ID, now int64) bool {
	m := s.member(bridge)
	if d.fw.Allow(dir, frame, m, now) {
		return true
	}
	if m.Name == "" && bridge != (nid.ID{}) && d.fw.NamesMembers(dir) {
		if last := d.askedCertificate.Load(); now-last >= int64(certificateAskEvery) && d.askedCertificate.CompareAndSwap(last, now) {
			w.Slow(Event{Kind: EventUncertified, Origin: bridge})
		}
	}
	return false
}

// admitsFlood is admits for a broadcast from a host behind bridge origin.
func (d *Dataplane) admitsFlood(w *Worker, s *snapshot, frame []byte, origin nid.ID, now int64) bool {
	v, src := s.judge(frame, origin)
	return d.admits(w, s, frame, l2.Offload{}, origin, v, src, now)
}

// fits reports whether plain, copied to buf[start:], leaves room for the
// tags: a peer with a larger MTU than ours can send frames we cannot pass on.
func fits(buf []byte, start int, plain []byte) bool {
	return len(buf)-start-len(plain) >= txTailroom
}

// route passes a routed frame one hop closer to its bridge, or switches it
// here when this is the bridge. Transit hops need no state of their own:
// the frame names where it goes.
func (d *Dataplane) route(w *Worker, s *snapshot, in *port, plain []byte, now int64) {
	r, inner, err := wire.ParseRouted(plain)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	if nid.ID(r.Dest) == s.self {
		d.switchFrame(w, s, in, inner, plain, r.Source, now)
		return
	}
	h := s.toward(nid.ID(r.Dest), nil, now, r.Onward)
	if h.port == nil {
		d.stats.drop(DropNoRoute)
		return
	}
	buf := w.Tx.next()
	start := framePlain - wire.RoutedHeaderLen
	if !fits(buf, start, plain) {
		d.stats.drop(DropMalformed)
		return
	}
	n := copy(buf[start:], plain)
	r.Onward = h.onward
	wire.PutRoutedHeader(buf[start:], r)
	d.sealData(w, s, h.port, buf, start-wire.TransportHeaderLen, buf[start:start+n], now)
}

// flood delivers a broadcast that arrived over link in and forwards it
// inside its bound (Bounded Flood), all on the data path; the core hears
// of it only when it has something to learn from it.
func (d *Dataplane) flood(w *Worker, s *snapshot, in *port, plain []byte, now int64) {
	m, err := flood.Parse(plain[1:])
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	if m.Kind == flood.LeafAdvert {
		w.Slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(plain)})
		return
	}
	if m.Root == s.self {
		d.stats.drop(DropLoop)
		return
	}
	d.stats.FloodsReceived.Add(1)
	if s.teaches(m, in.link.Port, now) {
		w.Slow(Event{Kind: EventFloodSeen, Port: in.link.Port, Data: clone(plain)})
	}
	if !s.deliversGroup(m.Frame) {
		d.stats.MulticastPruned.Add(1)
	} else if s.localDHCP && udp4.IsDHCP(m.Frame) {
		d.stats.DHCPKeptLocal.Add(1)
	} else if source := s.floodSource(m); d.admitsFlood(w, s, m.Frame, source, now) {
		d.stats.FramesToTAP.Add(1)
		w.Frames.Frame(m.Frame, l2.Offload{})
		if d.trace.Delivered != nil {
			d.trace.Delivered(m.Root, m.Hops, m.Frame)
		}
	}
	d.forwardFlood(w, s, m.Kind, m.Root, m.Bound, m.Hops, m.Frame, now)
}

// teaches reports whether a broadcast carries news for the core: a source
// it has not learned at this port and root (or learned long ago), or
// what the core snoops (ARP, neighbour advertisements).
func (s *snapshot) teaches(m flood.FRB, in uint32, now int64) bool {
	if l2.AnnouncesAddress(m.Frame) {
		return true
	}
	src := l2.MAC(m.Frame[6:12])
	if m.Kind != flood.Broadcast || src.IsMulticast() {
		return false
	}
	v, known := s.macs.lookup(src)
	return !known || v.port != in || v.root != m.Root || now-v.seen >= int64(macRefresh)
}

// forwardFlood sends a broadcast to the adjacent peers inside bound, each
// with its recomputed bound; the share of a peer that stopped answering
// goes to the peer before it, which reaches those nodes another way.
func (d *Dataplane) forwardFlood(w *Worker, s *snapshot, kind flood.Kind, root, bound nid.ID, hops uint8, frame []byte, now int64) {
	failing := func(p nid.ID) bool {
		port := s.byPeer[p]
		return port == nil || port.suspect(now)
	}
	w.targets = flood.Targets(w.targets[:0], s.self, s.peers, bound, failing)
	start := Headroom - 1 - flood.BroadcastHeaderLen
	for _, t := range w.targets {
		p := s.byPeer[t.Peer]
		if p == nil {
			continue
		}
		buf := w.Tx.next()
		if !fits(buf, Headroom, frame) {
			d.stats.drop(DropMalformed)
			return
		}
		b := append(buf[start:start], byte(wire.InnerFlood))
		b = flood.AppendBroadcast(b, kind, root, t.Bound, hops+1, frame)
		d.sealData(w, s, p, buf, start-wire.TransportHeaderLen, b, now)
	}
	d.stats.FloodsForwarded.Add(uint64(len(w.targets)))
}

// floodFromTAP floods a local host's frame for an unknown destination, as
// the bridge its source sits behind.
func (d *Dataplane) floodFromTAP(w *Worker, s *snapshot, hdr l2.VirtioNetHdr, frame []byte, now int64) {
	if d.fw != nil && !d.fw.Allow(firewall.Outbound, frame, firewall.Member{}, now) {
		return
	}
	off := l2.OffloadOf(hdr)
	if off.NeedsCsum {
		// A flood has no offload fields; finish the checksum once here.
		if err := l2.CompleteChecksum(frame, int(off.CsumStart), int(off.CsumOffset)); err != nil {
			d.stats.drop(DropMalformed)
			return
		}
	}
	d.stats.FloodsStarted.Add(1)
	d.forwardFlood(w, s, flood.Broadcast, s.self, s.self, 0, frame, now)
}

// relayOn passes a datagram from in to the peer it names, if this node
// relays and the peer is linked; the datagram stays sealed end to end.
func (d *Dataplane) relayOn(w *Worker, s *snapshot, in *port, plain []byte, now int64) {
	if len(plain) < wire.RelayHeaderLen {
		d.stats.drop(DropMalformed)
		return
	}
	to := s.byPeer[nid.ID(plain[1:wire.RelayHeaderLen])]
	if to == nil || to.session == nil || to.link.Endpoint().IsRelay() {
		d.stats.drop(DropNoRoute)
		return
	}
	waiting := d.relay.hasWaiting()
	switch d.relay.admit(in.link.Peer.ID, to.link.Peer.ID, plain, now) {
	case relayNow:
		d.sendRelayed(w, to, in.link.Peer.ID, plain, now)
	case relayQueued:
		d.stats.RelayQueued.Add(1)
		if !waiting {
			w.Slow(Event{Kind: EventRelayWaiting})
		}
	case relayDropped:
		d.stats.drop(DropRelayLimit)
	}
	d.releaseRelayed(w, s, now)
}

// releaseRelayed sends the queued relayed datagrams whose pairs' shares
// allow them now.
func (d *Dataplane) releaseRelayed(w *Worker, s *snapshot, now int64) {
	for d.relay.hasWaiting() {
		plain, from, to, ok := d.relay.release(w.relayed[:0], now)
		if !ok {
			return
		}
		w.relayed = plain
		if p := s.byPeer[to]; p != nil && p.session != nil && !p.link.Endpoint().IsRelay() {
			d.sendRelayed(w, p, from, plain, now)
		} else {
			d.stats.drop(DropNoRoute)
		}
	}
}

// sendRelayed seals a datagram from one member for another, to, which
// the relay header in plain names.
func (d *Dataplane) sendRelayed(w *Worker, to *port, from nid.ID, plain []byte, now int64) {
	buf := w.Tx.next()
	body := buf[wire.TransportHeaderLen:]
	if !fits(buf, wire.TransportHeaderLen, plain) {
		d.stats.drop(DropMalformed)
		return
	}
	body[0] = byte(wire.InnerRelayFrom)
	copy(body[1:wire.RelayHeaderLen], from[:])
	n := copy(body[wire.RelayHeaderLen:], plain[wire.RelayHeaderLen:])
	dgram, err := to.session.Seal(buf, body[:wire.RelayHeaderLen+n], now)
	if err != nil {
		d.stats.drop(DropNoRoute)
		return
	}
	d.stats.Relayed.Add(1)
	w.Tx.commit(dgram, to.link.Endpoint())
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
