package l2

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

const maxTestSegments = 128

// expectedSegment is segment i of s cut at gsoSize, built independently.
func expectedSegment(s packetSpec, gsoSize, i, n int) []byte {
	start := i * gsoSize
	seg := s
	seg.payload = s.payload[start:min(start+gsoSize, len(s.payload))]
	seg.ipID = s.ipID + uint16(i)
	if !s.udp {
		seg.seq = s.seq + uint32(start)
		if i < n-1 {
			seg.flags &^= tcpFIN | tcpPSH
		}
		if i > 0 {
			seg.flags &^= tcpCWR
		}
	}
	return seg.build()
}

func TestSegmentThenCoalesceRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawSpec(t)
		ipAndL4Headers := s.ipHeaderLen() + s.l4HeaderLen()
		gsoSize := rapid.IntRange(1, 9000).Draw(t, "gsoSize")
		payloadLen := rapid.IntRange(1, min(maxIPPacketLen-ipAndL4Headers, gsoSize*maxTestSegments)).Draw(t, "payloadLen")
		s.payload = randomPayload(t, payloadLen)
		ecn := s.flags&tcpCWR != 0 && rapid.Bool().Draw(t, "ecn")
		headroom := rapid.IntRange(0, 64).Draw(t, "headroom")
		frame := s.build()

		wantN := (payloadLen + gsoSize - 1) / gsoSize
		out := make([][]byte, wantN)
		for i := range out {
			out[i] = bytes.Repeat([]byte{0xa5}, headroom+s.l4Off()+s.l4HeaderLen()+gsoSize)
		}
		sizes := make([]int, wantN)
		n, off, err := Segment(frame, s.gsoHeader(gsoSize, ecn), out, headroom, sizes)
		if err != nil {
			t.Fatalf("Segment: %v", err)
		}
		if n != wantN {
			t.Fatalf("%d segments, want %d", n, wantN)
		}
		segments := make([][]byte, n)
		for i := range n {
			if !bytes.Equal(out[i][:headroom], bytes.Repeat([]byte{0xa5}, headroom)) {
				t.Fatalf("segment %d: headroom overwritten", i)
			}
			segments[i] = out[i][headroom : headroom+sizes[i]]
			if err := checkWholePacket(segments[i], off); err != nil {
				t.Fatalf("segment %d: %v", i, err)
			}
			if want := expectedSegment(s, gsoSize, i, n); !bytes.Equal(segments[i], want) {
				t.Fatalf("segment %d:\n got %x\nwant %x", i, segments[i], want)
			}
		}

		packets := coalesceAll(t, segments, off)
		if !s.udp && s.flags&^tcpPSH == tcpACK && len(s.ipOptions) == 0 && n > 1 {
			if len(packets) != 1 {
				t.Fatalf("%d segments of one flow coalesced into %d packets, want 1", n, len(packets))
			}
			var hdr VirtioNetHdr
			if err := hdr.Decode(packets[0]); err != nil {
				t.Fatal(err)
			}
			if want := s.gsoHeader(gsoSize, false); hdr != want {
				t.Fatalf("virtio header %+v, want %+v", hdr, want)
			}
			if !bytes.Equal(packets[0][VirtioNetHdrLen:], frame) {
				t.Fatalf("coalesced frame differs from the original super-frame")
			}
		}
		if again := resegment(t, packets, off); !equalFrames(again, segments) {
			t.Fatalf("segmenting the coalesced packets does not give the segments back")
		}
	})
}

// failer is what both *testing.T and *rapid.T offer.
type failer interface {
	Fatalf(format string, args ...any)
}

// coalesceAll feeds frames to a Coalescer big enough for all of them and
// returns the packets it writes.
func coalesceAll(t failer, frames [][]byte, off Offload) [][]byte {
	c := NewCoalescer(len(frames), len(frames)*(VirtioNetHdrLen+9200))
	for i, f := range frames {
		if !c.Add(f, off) {
			t.Fatalf("Add of frame %d refused", i)
		}
	}
	return flushAll(t, c)
}

func flushAll(t failer, c *Coalescer) [][]byte {
	var packets [][]byte
	if err := c.Flush(func(pkt []byte) error {
		packets = append(packets, append([]byte{}, pkt...))
		return nil
	}); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return packets
}

// resegment undoes coalescing: every packet goes through Segment with its
// own virtio header, as the kernel would cut it again.
func resegment(t failer, packets [][]byte, wantOff Offload) [][]byte {
	var frames [][]byte
	for _, pkt := range packets {
		var hdr VirtioNetHdr
		if err := hdr.Decode(pkt); err != nil {
			t.Fatalf("coalesced packet has a bad virtio header: %v", err)
		}
		frame := pkt[VirtioNetHdrLen:]
		size, count := len(frame), 1
		if hdr.GSOType != VirtioNetHdrGSONone && hdr.GSOSize > 0 {
			size = min(size, int(hdr.HdrLen)+int(hdr.GSOSize))
			count = len(frame)/int(hdr.GSOSize) + 1
		}
		out, sizes := segmentBuffers(count, size)
		n, off, err := Segment(frame, hdr, out, 0, sizes)
		if err != nil {
			t.Fatalf("coalesced packet does not segment: %v", err)
		}
		if wantOff.NeedsCsum && off != wantOff {
			t.Fatalf("offload %+v after coalescing, want %+v", off, wantOff)
		}
		for i := range n {
			frames = append(frames, out[i][:sizes[i]])
		}
	}
	return frames
}

func equalFrames(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestSegmentTCPFlags(t *testing.T) {
	s := bulkSpec(false, 1)
	s.flags = tcpACK | tcpCWR | tcpPSH | tcpFIN
	s.payload = make([]byte, 2500)
	segs := segmentFrame(t, s.build(), s.gsoHeader(1000, true), 3)
	want := []uint8{tcpACK | tcpCWR, tcpACK, tcpACK | tcpPSH | tcpFIN}
	for i, seg := range segs {
		if got := seg[s.l4Off()+13]; got != want[i] {
			t.Errorf("segment %d flags %#x, want %#x", i, got, want[i])
		}
	}
}

func TestSegmentIPv4IDsIncrementAndWrap(t *testing.T) {
	s := bulkSpec(false, 1)
	s.ipID = 0xffff
	s.payload = make([]byte, 30)
	segs := segmentFrame(t, s.build(), s.gsoHeader(10, false), 3)
	for i, want := range []uint16{0xffff, 0, 1} {
		if got := uint16(segs[i][s.linkLen()+4])<<8 | uint16(segs[i][s.linkLen()+5]); got != want {
			t.Errorf("segment %d IP ID %#x, want %#x", i, got, want)
		}
	}
}

func TestSegmentPassesNonGSOFrameThrough(t *testing.T) {
	s := bulkSpec(true, 1)
	s.payload = []byte("hello")
	frame := s.build()
	for _, hdr := range []VirtioNetHdr{
		{},
		{Flags: VirtioNetHdrDataValid},
		{Flags: VirtioNetHdrNeedsCsum, CsumStart: uint16(s.l4Off()), CsumOffset: 16},
	} {
		out := [][]byte{make([]byte, 8+len(frame))}
		sizes := []int{0}
		n, off, err := Segment(frame, hdr, out, 8, sizes)
		if err != nil || n != 1 {
			t.Fatalf("header %+v: n=%d err=%v", hdr, n, err)
		}
		if !bytes.Equal(out[0][8:8+sizes[0]], frame) {
			t.Errorf("header %+v: frame changed", hdr)
		}
		if off != offloadOf(hdr) {
			t.Errorf("header %+v: offload %+v", hdr, off)
		}
	}
}

func TestSegmentRejectsMalformedInput(t *testing.T) {
	tcp := bulkSpec(false, 1)
	tcp.payload = make([]byte, 3000)
	tcpFrame := tcp.build()
	tcpHdr := tcp.gsoHeader(1000, false)
	udp := bulkSpec(true, 2)
	udp.udp = true
	udp.payload = make([]byte, 3000)
	udpFrame := udp.build()
	udpHdr := udp.gsoHeader(1000, false)

	withHdr := func(h VirtioNetHdr, change func(*VirtioNetHdr)) VirtioNetHdr {
		change(&h)
		return h
	}
	withFrame := func(f []byte, change func([]byte)) []byte {
		f = append([]byte{}, f...)
		change(f)
		return f
	}
	l4 := tcp.l4Off()
	cases := []struct {
		name     string
		frame    []byte
		hdr      VirtioNetHdr
		out      int
		outLen   int
		headroom int
		want     error
	}{
		{"negative headroom", tcpFrame, tcpHdr, 3, 2000, -1, errHeadroom},
		{"UDP GSO type on TCP", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOUDPL4 }), 3, 2000, 0, errGSOMismatch},
		{"TCPv6 GSO type on IPv4", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOTCPv6 }), 3, 2000, 0, errGSOMismatch},
		{"TCPv4 GSO type on UDP", udpFrame, withHdr(udpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOTCPv4 }), 3, 2000, 0, errGSOMismatch},
		{"ECN on UDP", udpFrame, withHdr(udpHdr, func(h *VirtioNetHdr) { h.GSOType |= VirtioNetHdrGSOECN }), 3, 2000, 0, errGSOMismatch},
		{"UDP fragmentation offload", udpFrame, withHdr(udpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOUDP }), 3, 2000, 0, errGSOType},
		{"ECN without GSO type", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOECN }), 3, 2000, 0, errGSOType},
		{"zero GSO size", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOSize = 0 }), 3, 2000, 0, errGSOSize},
		{"checksum start off", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.CsumStart-- }), 3, 2000, 0, errGSOChecksum},
		{"UDP checksum offset on TCP", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.CsumOffset = 6 }), 3, 2000, 0, errGSOChecksum},
		{"too few buffers", tcpFrame, tcpHdr, 2, 2000, 0, errTooManySegments},
		{"buffer too small", tcpFrame, tcpHdr, 3, 1000, 0, errOutputTooSmall},
		{"headroom beyond buffer", tcpFrame, tcpHdr, 3, 2000, 3000, errOutputTooSmall},
		{"IPv4 fragment", withFrame(tcpFrame, func(f []byte) { f[14+6] |= 0x20 }), tcpHdr, 3, 2000, 0, errIPFragment},
		{"IPv4 header length 4", withFrame(tcpFrame, func(f []byte) { f[14] = 0x44 }), tcpHdr, 3, 2000, 0, errIPHeader},
		{"IP version 5", withFrame(tcpFrame, func(f []byte) { f[14] = 0x55 }), tcpHdr, 3, 2000, 0, errIPHeader},
		{"IPv4 total length beyond frame", withFrame(tcpFrame, func(f []byte) { f[14+2] = 0xff }), tcpHdr, 3, 2000, 0, errIPLength},
		{"IPv6 payload length beyond frame", withFrame(udpFrame, func(f []byte) { f[14+4] = 0xff }), udpHdr, 3, 2000, 0, errIPLength},
		{"IPv6 extension header", withFrame(udpFrame, func(f []byte) { f[14+6] = 0 }), udpHdr, 3, 2000, 0, errNotTCPOrUDP},
		{"TCP data offset 4", withFrame(tcpFrame, func(f []byte) { f[l4+12] = 0x40 }), tcpHdr, 3, 2000, 0, errTransportHeader},
		{"ARP frame", withFrame(tcpFrame, func(f []byte) { f[12], f[13] = 0x08, 0x06 }), tcpHdr, 3, 2000, 0, errNotIP},
		{"non-GSO checksum outside frame", tcpFrame[:60], VirtioNetHdr{Flags: VirtioNetHdrNeedsCsum, CsumStart: 50, CsumOffset: 9}, 3, 2000, 0, errOffloadBounds},
		{"non-GSO buffer too small", tcpFrame, VirtioNetHdr{}, 3, 2000, 0, errOutputTooSmall},
		{"non-GSO without buffers", tcpFrame, VirtioNetHdr{}, 0, 2000, 0, errTooManySegments},
	}
	for _, tc := range cases {
		out := make([][]byte, tc.out)
		for i := range out {
			out[i] = make([]byte, tc.outLen)
		}
		n, _, err := Segment(tc.frame, tc.hdr, out, tc.headroom, make([]int, tc.out))
		if !errors.Is(err, tc.want) || n != 0 {
			t.Errorf("%s: n=%d err=%v, want %v", tc.name, n, err, tc.want)
		}
	}
	for cut := range len(tcpFrame) {
		if _, _, err := Segment(tcpFrame[:cut], tcpHdr, make([][]byte, 3), 0, make([]int, 3)); err == nil {
			t.Fatalf("frame cut to %d bytes accepted", cut)
		}
	}
}

func segmentFrame(t *testing.T, frame []byte, hdr VirtioNetHdr, wantN int) [][]byte {
	t.Helper()
	out := make([][]byte, wantN)
	for i := range out {
		out[i] = make([]byte, len(frame))
	}
	sizes := make([]int, wantN)
	n, _, err := Segment(frame, hdr, out, 0, sizes)
	if err != nil || n != wantN {
		t.Fatalf("Segment: n=%d err=%v, want %d segments", n, err, wantN)
	}
	for i := range out {
		out[i] = out[i][:sizes[i]]
	}
	return out
}

// maxTCPv4SuperFrame is what a bulk TCP sender hands the TAP: 65535 bytes of
// IP with timestamps, cut into 46 segments of 1448 bytes.
func maxTCPv4SuperFrame() (frame []byte, hdr VirtioNetHdr) {
	s := bulkSpec(false, 1)
	s.payload = make([]byte, maxIPPacketLen-s.ipHeaderLen()-s.l4HeaderLen())
	return s.build(), s.gsoHeader(1448, false)
}

func TestSegmentDoesNotAllocate(t *testing.T) {
	frame, hdr := maxTCPv4SuperFrame()
	out, sizes := segmentBuffers(64, 128+1514)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := Segment(frame, hdr, out, 128, sizes); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Segment allocates %.1f times per call", allocs)
	}
}

func segmentBuffers(n, size int) ([][]byte, []int) {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size)
	}
	return out, make([]int, n)
}

func BenchmarkSegmentTCPv4(b *testing.B) {
	frame, hdr := maxTCPv4SuperFrame()
	out, sizes := segmentBuffers(64, 128+1514)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Segment(frame, hdr, out, 128, sizes); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzSegment(f *testing.F) {
	for _, s := range []packetSpec{bulkSpec(false, 1), bulkSpec(true, 2)} {
		s.payload = bytes.Repeat([]byte("burrow"), 500)
		h := s.gsoHeader(1000, false)
		f.Add(s.build(), h.Flags, h.GSOType, h.HdrLen, h.GSOSize, h.CsumStart, h.CsumOffset, uint8(16))
		s.udp = true
		h = s.gsoHeader(700, false)
		f.Add(s.build(), h.Flags, h.GSOType, h.HdrLen, h.GSOSize, h.CsumStart, h.CsumOffset, uint8(0))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06}, uint8(0), uint8(0), uint16(0), uint16(0), uint16(0), uint16(0), uint8(0))

	const buffers, bufferLen = 64, 4096
	out, sizes := segmentBuffers(buffers, bufferLen)
	f.Fuzz(func(t *testing.T, frame []byte, flags, gsoType uint8, hdrLen, gsoSize, csumStart, csumOffset uint16, headroom uint8) {
		hdr := VirtioNetHdr{Flags: flags, GSOType: gsoType, HdrLen: hdrLen, GSOSize: gsoSize, CsumStart: csumStart, CsumOffset: csumOffset}
		n, off, err := Segment(frame, hdr, out, int(headroom), sizes)
		if err != nil {
			return
		}
		segments := make([][]byte, n)
		for i := range n {
			segments[i] = out[i][int(headroom) : int(headroom)+sizes[i]]
		}
		if gsoType == VirtioNetHdrGSONone {
			if n != 1 || !bytes.Equal(segments[0], frame) {
				t.Fatalf("non-GSO frame changed")
			}
			return
		}
		r, err := parseRef(frame)
		if err != nil {
			t.Fatalf("Segment accepted a frame the reference parser refuses: %v", err)
		}
		var payload []byte
		for i, seg := range segments {
			if err := checkWholePacket(seg, off); err != nil {
				t.Fatalf("segment %d: %v", i, err)
			}
			if i < n-1 && len(seg)-r.payloadOff != int(gsoSize) {
				t.Fatalf("segment %d carries %d bytes, GSO size is %d", i, len(seg)-r.payloadOff, gsoSize)
			}
			payload = append(payload, seg[r.payloadOff:]...)
		}
		if !bytes.Equal(payload, frame[r.payloadOff:r.end]) {
			t.Fatalf("segment payloads do not add up to the input payload")
		}
	})
}
