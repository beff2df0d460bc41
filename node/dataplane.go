package node

import (
	"sync/atomic"

	"burrow/l2"
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
)

// Event is work for the core. Data is owned by the event.
type Event struct {
	Kind    EventKind
	From    link.Endpoint
	Port    uint32
	Session *link.Session
	Offload l2.Offload
	Data    []byte
}

// Dataplane is the fast path. It is safe for concurrent use: each worker
// goroutine calls it with its own Worker.
type Dataplane struct {
	snap  *atomic.Pointer[snapshot]
	stats *Stats
	relay *relayBudget
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
	Slow func(Event)
}

// Buffer layout of an outgoing datagram. A frame is written at Headroom so
// that its frame header, its transport header and — when the link is
// relayed — the relay header and the relay link's transport header all fit
// in front of it, and everything is sealed in place:
//
//	[outer transport header][relay header][transport header][frame header][frame][tag][outer tag]
//	 └──────── relayRoom ───────────────┘
const (
	relayRoom = wire.TransportHeaderLen + wire.RelayHeaderLen
	// Headroom is where a TAP frame starts in a transmit buffer.
	Headroom = relayRoom + wire.TransportHeaderLen + wire.FrameHeaderLen
	// TxBufLen is the transmit buffer size the data path needs for frames
	// of up to maxFrame bytes.
	txTailroom = 2 * wire.TagLen
)

// TxBufLen is the size of the transmit buffers for frames up to maxFrame.
func TxBufLen(maxFrame int) int { return Headroom + maxFrame + txTailroom }

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
	f := s.flows[key]
	if key.dst.IsMulticast() || f == nil {
		d.slowFrame(w, hdr, frame)
		return
	}
	p := s.ports[f.out]
	if p == nil || p.session == nil {
		d.slowFrame(w, hdr, frame)
		return
	}
	f.touch(now)
	f.bytes.Add(uint64(len(frame)))
	d.sendFrame(w, s, p, hdr, frame, now)
}

// slowFrame hands a TAP frame to the core, segmenting super-frames first
// because the core only deals in frames that fit a datagram.
func (d *Dataplane) slowFrame(w *Worker, hdr l2.VirtioNetHdr, frame []byte) {
	if hdr.GSOType == l2.VirtioNetHdrGSONone {
		w.Slow(Event{Kind: EventFromTAP, Offload: offloadOf(hdr), Data: clone(frame)})
		return
	}
	bufs, sizes := w.Tx.free()
	n, off, err := l2.Segment(frame, hdr, bufs, 0, sizes)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	for i := range n {
		w.Slow(Event{Kind: EventFromTAP, Offload: off, Data: clone(bufs[i][:sizes[i]])})
	}
}

func offloadOf(hdr l2.VirtioNetHdr) l2.Offload {
	if hdr.Flags&l2.VirtioNetHdrNeedsCsum == 0 {
		return l2.Offload{}
	}
	return l2.Offload{NeedsCsum: true, CsumStart: hdr.CsumStart, CsumOffset: hdr.CsumOffset}
}

// sendFrame segments (if needed), frames, seals and queues a TAP frame.
func (d *Dataplane) sendFrame(w *Worker, s *snapshot, p *port, hdr l2.VirtioNetHdr, frame []byte, now int64) {
	if hdr.GSOType == l2.VirtioNetHdrGSONone {
		buf := w.Tx.next()
		n := copy(buf[Headroom:], frame)
		if n < len(frame) || len(buf)-Headroom-n < txTailroom {
			d.stats.drop(DropMalformed)
			return
		}
		wire.PutFrameHeader(buf[Headroom-wire.FrameHeaderLen:], offloadOf(hdr))
		d.seal(w, s, p, buf, wire.FrameHeaderLen+n, now)
		return
	}
	bufs, sizes := w.Tx.free()
	n, off, err := l2.Segment(frame, hdr, bufs, Headroom, sizes)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	for i := range n {
		buf := w.Tx.next()
		wire.PutFrameHeader(buf[Headroom-wire.FrameHeaderLen:], off)
		d.seal(w, s, p, buf, wire.FrameHeaderLen+sizes[i], now)
	}
}

// seal encrypts the n plaintext bytes at buf[relayRoom+TransportHeaderLen:]
// for the link of p and queues the datagram, wrapped for the relay when the
// link's path is relayed.
func (d *Dataplane) seal(w *Worker, s *snapshot, p *port, buf []byte, n int, now int64) {
	dgram, err := p.session.Seal(buf[relayRoom:], n, now)
	if err != nil {
		d.stats.drop(DropNoRoute)
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
	header := buf[wire.TransportHeaderLen:relayRoom]
	header[0] = byte(wire.InnerRelayTo)
	copy(header[1:], to.Peer[:])
	outer, err := relay.session.Seal(buf, wire.RelayHeaderLen+len(dgram), now)
	if err != nil {
		d.stats.drop(DropNoRoute)
		return
	}
	w.Tx.commit(outer, relay.link.Endpoint())
}

// FromNetwork handles one datagram from the socket (or another transport).
func (d *Dataplane) FromNetwork(w *Worker, from link.Endpoint, dgram []byte, now int64) {
	d.fromNetwork(w, from, dgram, now, false)
}

func (d *Dataplane) fromNetwork(w *Worker, from link.Endpoint, dgram []byte, now int64, relayed bool) {
	if len(dgram) == 0 || wire.Type(dgram[0]) != wire.TypeTransport {
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
		d.switchFrame(w, s, in, plain, now)
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

// switchFrame forwards a unicast frame that arrived over link in.
func (d *Dataplane) switchFrame(w *Worker, s *snapshot, in *port, plain []byte, now int64) {
	off, frame, err := wire.ParseFrame(plain)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	var key flowKey
	key.in = in.link.Port
	copy(key.dst[:], frame[0:6])
	copy(key.src[:], frame[6:12])
	f := s.flows[key]
	if f == nil {
		w.Slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(plain)})
		return
	}
	f.touch(now)
	if f.out == localPort {
		f.bytes.Add(uint64(len(frame)))
		d.stats.FramesToTAP.Add(1)
		w.Frames.Frame(frame, off)
		return
	}
	out := s.ports[f.out]
	if out == nil || out.session == nil {
		w.Slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(plain)})
		return
	}
	buf := w.Tx.next()
	n := copy(buf[relayRoom+wire.TransportHeaderLen:], plain)
	d.seal(w, s, out, buf, n, now)
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
	if !d.relay.take(len(plain), now) {
		d.stats.drop(DropRelayLimit)
		return
	}
	buf := w.Tx.next()
	body := buf[wire.TransportHeaderLen:]
	if len(body) < len(plain)+wire.TagLen {
		d.stats.drop(DropMalformed)
		return
	}
	body[0] = byte(wire.InnerRelayFrom)
	from := in.link.Peer.ID
	copy(body[1:wire.RelayHeaderLen], from[:])
	n := copy(body[wire.RelayHeaderLen:], plain[wire.RelayHeaderLen:])
	dgram, err := to.session.Seal(buf, wire.RelayHeaderLen+n, now)
	if err != nil {
		d.stats.drop(DropNoRoute)
		return
	}
	d.stats.Relayed.Add(1)
	d.relay.count(in.link.Peer.ID, to.link.Peer.ID)
	w.Tx.commit(dgram, to.link.Endpoint())
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
