package node

import (
	"net/netip"
	"sync/atomic"

	"burrow/l2"
	"burrow/link"
	"burrow/wire"
)

// EventKind says what the data path hands to the core.
type EventKind uint8

// Event kinds.
const (
	EventDatagram  EventKind = iota + 1 // a non-transport datagram (handshake)
	EventConfirmed                      // first message opened on a session
	EventFromLink                       // decrypted plaintext the data path cannot finish
	EventFromTAP                        // a TAP frame with no flow (broadcast, miss)
)

// Event is work for the core. Data is owned by the event.
type Event struct {
	Kind    EventKind
	From    netip.AddrPort
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

// Headroom is the space a TAP frame needs in front of it so that it can be
// sealed in place.
const Headroom = wire.TransportHeaderLen + wire.FrameHeaderLen

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
	d.sendFrame(w, p, hdr, frame, now)
}

// slowFrame hands a TAP frame to the core, segmenting super-frames first
// because the core only deals in frames that fit a datagram.
func (d *Dataplane) slowFrame(w *Worker, hdr l2.VirtioNetHdr, frame []byte) {
	if hdr.GSOType == l2.VirtioNetHdrGSONone {
		w.slow(Event{Kind: EventFromTAP, Offload: offloadOf(hdr), Data: clone(frame)})
		return
	}
	bufs, sizes := w.Tx.free()
	n, off, err := l2.Segment(frame, hdr, bufs, 0, sizes)
	if err != nil {
		d.stats.drop(DropMalformed)
		return
	}
	for i := range n {
		w.slow(Event{Kind: EventFromTAP, Offload: off, Data: clone(bufs[i][:sizes[i]])})
	}
}

func offloadOf(hdr l2.VirtioNetHdr) l2.Offload {
	if hdr.Flags&l2.VirtioNetHdrNeedsCsum == 0 {
		return l2.Offload{}
	}
	return l2.Offload{NeedsCsum: true, CsumStart: hdr.CsumStart, CsumOffset: hdr.CsumOffset}
}

// sendFrame segments (if needed), frames, seals and queues a TAP frame.
func (d *Dataplane) sendFrame(w *Worker, p *port, hdr l2.VirtioNetHdr, frame []byte, now int64) {
	to := p.link.Endpoint()
	if hdr.GSOType == l2.VirtioNetHdrGSONone {
		buf := w.Tx.next()
		n := copy(buf[Headroom:], frame)
		if n < len(frame) {
			d.stats.drop(DropMalformed)
			return
		}
		wire.PutFrameHeader(buf[wire.TransportHeaderLen:], offloadOf(hdr))
		d.seal(w, p.session, buf, wire.FrameHeaderLen+n, to, now)
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
		wire.PutFrameHeader(buf[wire.TransportHeaderLen:], off)
		d.seal(w, p.session, buf, wire.FrameHeaderLen+sizes[i], to, now)
	}
}

func (d *Dataplane) seal(w *Worker, s *link.Session, buf []byte, n int, to netip.AddrPort, now int64) {
	dgram, err := s.Seal(buf, n, now)
	if err != nil {
		d.stats.drop(DropNoRoute)
		return
	}
	w.Tx.commit(dgram, to)
}

// FromNetwork handles one datagram from the socket.
func (d *Dataplane) FromNetwork(w *Worker, from netip.AddrPort, dgram []byte, now int64) {
	if len(dgram) == 0 || wire.Type(dgram[0]) != wire.TypeTransport {
		w.slow(Event{Kind: EventDatagram, From: from, Data: clone(dgram)})
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
		w.slow(Event{Kind: EventConfirmed, Session: sess})
	}
	if len(plain) == 0 {
		return // keepalive
	}
	if wire.Inner(plain[0]) != wire.InnerFrame {
		w.slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(plain)})
		return
	}
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
		w.slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(plain)})
		return
	}
	f.touch(now)
	if f.out == 0 {
		f.bytes.Add(uint64(len(frame)))
		d.stats.FramesToTAP.Add(1)
		w.Frames.Frame(frame, off)
		return
	}
	out := s.ports[f.out]
	if out == nil || out.session == nil {
		w.slow(Event{Kind: EventFromLink, Port: in.link.Port, Data: clone(plain)})
		return
	}
	buf := w.Tx.next()
	n := copy(buf[wire.TransportHeaderLen:], plain)
	d.seal(w, out.session, buf, n, out.link.Endpoint(), now)
}

func (w *Worker) slow(ev Event) { w.Slow(ev) }

func clone(b []byte) []byte { return append([]byte(nil), b...) }
