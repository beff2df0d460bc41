package node

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"burrow/l2"
	"burrow/link"
)

// tcpSuperFrame builds an IPv4/TCP GSO super-frame from src to dst with
// payload bytes, as the kernel hands it to a TAP with TSO on.
func tcpSuperFrame(dst, src l2.MAC, payload int, mss uint16) ([]byte, l2.VirtioNetHdr) {
	f := make([]byte, 14+20+20+payload)
	copy(f[0:6], dst[:])
	copy(f[6:12], src[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+payload))
	ip[8], ip[9] = 64, 6
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], l2.IPv4HeaderChecksum(ip[:20]))
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12] = 5 << 4
	tcp[13] = 0x10 | 0x08
	binary.BigEndian.PutUint16(tcp[14:], 512)
	for i := range payload {
		tcp[20+i] = byte(i * 7)
	}
	binary.BigEndian.PutUint16(tcp[16:], l2.PseudoHeaderSum(ip[12:16], ip[16:20], 6, 20+payload))
	return f, l2.VirtioNetHdr{Flags: l2.VirtioNetHdrNeedsCsum, GSOType: l2.VirtioNetHdrGSOTCPv4, HdrLen: 54, GSOSize: mss, CsumStart: 34, CsumOffset: 16}
}

func TestSuperFrameCrossesTheTunnelSegmented(t *testing.T) {
	w := newTestNet(t, 2, 5)
	a, b := w.nodes[0], w.nodes[1]
	w.connect(0, 1)
	w.advance(time.Second, 100*time.Millisecond)
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "hi"))
	b.fromTAP(ethFrame(a.mac, b.mac, "hi-back"))
	a.fromTAP(ethFrame(b.mac, a.mac, "learn"))
	before := len(b.tap)
	frame, hdr := tcpSuperFrame(b.mac, a.mac, 60000, 1351)
	a.node.Dataplane().FromTAP(a.worker, hdr, frame, w.now.UnixNano())
	if len(a.slow) != 0 {
		t.Fatalf("super-frame on a learned flow went to the slow path")
	}
	w.drain()
	got := b.tap[before:]
	if len(got) != 45 {
		t.Fatalf("got %d segments at b, want 45; drops %v", len(got), b.node.Stats().Drops())
	}
	total := 0
	for _, f := range got {
		total += len(f) - 54
	}
	if total != 60000 {
		t.Fatalf("segments carry %d payload bytes, want 60000", total)
	}
}

// TestDataPathAllocatesNothingPerPacket: once a flow is learned, sending a
// frame and receiving it allocate nothing, so the garbage collector stays
// out of the way at multi-gigabit rates.
func TestDataPathAllocatesNothingPerPacket(t *testing.T) {
	w := newTestNet(t, 2, 6)
	a, b := w.nodes[0], w.nodes[1]
	w.connect(0, 1)
	w.advance(time.Second, 100*time.Millisecond)
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "hi"))
	b.fromTAP(ethFrame(a.mac, b.mac, "back"))
	a.fromTAP(ethFrame(b.mac, a.mac, "learn"))
	frame, hdr := tcpSuperFrame(b.mac, a.mac, 60000, 1351)
	var sent [][]byte
	a.worker.Tx = NewTxBatch(128, 2048, func(msgs []TxMsg) {
		for _, m := range msgs {
			sent = append(sent, bytes.Clone(m.Buf))
		}
	})
	a.node.Dataplane().FromTAP(a.worker, hdr, frame, w.now.UnixNano())
	a.worker.Tx.Flush()
	if len(sent) != 45 {
		t.Fatalf("%d datagrams for a super-frame, want 45", len(sent))
	}
	a.worker.Tx = NewTxBatch(128, 2048, func([]TxMsg) {})
	if n := testing.AllocsPerRun(50, func() {
		a.node.Dataplane().FromTAP(a.worker, hdr, frame, w.now.UnixNano())
		a.worker.Tx.Flush()
	}); n != 0 {
		t.Errorf("sending a super-frame allocates %.1f times", n)
	}
	from := link.UDPEndpoint(a.addr)
	b.worker.Frames = discardFrames{}
	i := 0
	if n := testing.AllocsPerRun(len(sent)-1, func() {
		b.node.Dataplane().FromNetwork(b.worker, from, sent[i], w.now.UnixNano())
		i++
	}); n != 0 {
		t.Errorf("receiving a datagram allocates %.1f times", n)
	}
	if len(b.slow) != 0 {
		t.Fatalf("%d received datagrams went to the slow path", len(b.slow))
	}
}

type discardFrames struct{}

func (discardFrames) Frame([]byte, l2.Offload) {}
