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
	sendSuperFrame(t, w, a, b)
	if len(a.slow) != 0 {
		t.Fatalf("super-frame on a learned flow went to the slow path")
	}
	superFrameArrived(t, b, before)
}

// TestSuperFrameCrossesARelayedLinkSegmented: the segments sealed straight
// from the super-frame are wrapped again for the relay, and arrive whole.
func TestSuperFrameCrossesARelayedLinkSegmented(t *testing.T) {
	w, a, b, m := relayedPair(t, 100<<20)
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "hi"))
	b.fromTAP(ethFrame(a.mac, b.mac, "hi-back"))
	a.fromTAP(ethFrame(b.mac, a.mac, "learn"))
	before, relayed := len(b.tap), m.node.Stats().Relayed.Load()
	sendSuperFrame(t, w, a, b)
	superFrameArrived(t, b, before)
	if n := m.node.Stats().Relayed.Load() - relayed; n < 45 {
		t.Fatalf("m relayed %d datagrams of the super-frame's 45 segments", n)
	}
}

// TestSuperFrameCrossesARoutedBackupPath: once the bridge between a and b
// dies, their flow goes routed over the backup, each segment behind a
// routed header written in front of it in the super-frame.
func TestSuperFrameCrossesARoutedBackupPath(t *testing.T) {
	w, a, b, m := acrossABridge(t)
	if got := stream(w, a, b, 100*time.Millisecond, "before"); lost(got) != 0 {
		t.Fatalf("%d frames lost before any failure", lost(got))
	}
	w.down[m] = true
	if got := stream(w, a, b, time.Second, "after"); lost(got[20:]) != 0 {
		t.Fatalf("frames lost on the backup path: %v", got)
	}
	before := len(b.tap)
	sendSuperFrame(t, w, a, b)
	superFrameArrived(t, b, before)
}

// sendSuperFrame sends a 60,000-byte TCP super-frame from a's TAP to b.
func sendSuperFrame(t *testing.T, w *testNet, a, b *testNode) {
	t.Helper()
	frame, hdr := tcpSuperFrame(b.mac, a.mac, 60000, 1351)
	a.node.Dataplane().FromTAP(a.worker, hdr, frame, w.now.UnixNano())
	a.worker.Tx.Flush()
	w.drain()
}

// superFrameArrived checks that b's TAP got, after its first before
// frames, the 45 segments of sendSuperFrame's frame, carrying its payload
// in order.
func superFrameArrived(t *testing.T, b *testNode, before int) {
	t.Helper()
	got := b.tap[before:]
	if len(got) != 45 {
		t.Fatalf("got %d segments at b, want 45; drops %v", len(got), b.node.Stats().Drops())
	}
	var payload []byte
	for _, f := range got {
		payload = append(payload, f[54:]...)
	}
	want, _ := tcpSuperFrame(b.mac, b.mac, 60000, 1351)
	if !bytes.Equal(payload, want[54:]) {
		t.Fatalf("the segments carry %d payload bytes, not the super-frame's 60000 in order", len(payload))
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
	headers := bytes.Clone(frame[:54])
	if n := testing.AllocsPerRun(50, func() {
		copy(frame, headers) // the frame was cut in place
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

// BenchmarkSuperFrameThroughTheDataPath: a 60,000-byte TCP super-frame
// from a's TAP, segmented and sealed, each datagram opened and switched to
// b's TAP (which discards it): the data path's own work on both ends, no
// system calls.
func BenchmarkSuperFrameThroughTheDataPath(b *testing.B) {
	w := newTestNet(b, 2, 6)
	src, dst := w.nodes[0], w.nodes[1]
	w.connect(0, 1)
	w.advance(time.Second, 100*time.Millisecond)
	src.fromTAP(ethFrame(l2.Broadcast, src.mac, "hi"))
	dst.fromTAP(ethFrame(src.mac, dst.mac, "back"))
	src.fromTAP(ethFrame(dst.mac, src.mac, "learn"))
	frame, hdr := tcpSuperFrame(dst.mac, src.mac, 60000, 1351)
	headers := bytes.Clone(frame[:54])
	from, now := link.UDPEndpoint(src.addr), w.now.UnixNano()
	dst.worker.Frames = discardFrames{}
	src.worker.Tx = NewTxBatch(128, 2048, func(msgs []TxMsg) {
		for _, m := range msgs {
			dst.node.Dataplane().FromNetwork(dst.worker, from, m.Buf, now)
		}
	})
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		copy(frame, headers)
		src.node.Dataplane().FromTAP(src.worker, hdr, frame, now)
		src.worker.Tx.Flush()
	}
	if len(src.slow)+len(dst.slow) != 0 {
		b.Fatalf("%d frames went to the slow path", len(src.slow)+len(dst.slow))
	}
}
