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
		frame := s.build()

		segments, off, err := segmentAll(frame, s.gsoHeader(gsoSize, ecn))
		if err != nil {
			t.Fatalf("Segmenter: %v", err)
		}
		if n, want := len(segments), (payloadLen+gsoSize-1)/gsoSize; n != want {
			t.Fatalf("%d segments, want %d", n, want)
		}
		n := len(segments)
		for i := range n {
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
			if !bytes.Equal(packets[0][VirtioNetHdrLen:], s.build()) {
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

// resegment undoes coalescing: every packet goes through a Segmenter with
// its own virtio header, as the kernel would cut it again.
func resegment(t failer, packets [][]byte, wantOff Offload) [][]byte {
	var frames [][]byte
	for _, pkt := range packets {
		var hdr VirtioNetHdr
		if err := hdr.Decode(pkt); err != nil {
			t.Fatalf("coalesced packet has a bad virtio header: %v", err)
		}
		frame := pkt[VirtioNetHdrLen:]
		segments, off, err := [][]byte{frame}, OffloadOf(hdr), error(nil)
		if hdr.GSOType != VirtioNetHdrGSONone {
			segments, off, err = segmentAll(frame, hdr)
		}
		if err != nil {
			t.Fatalf("coalesced packet does not segment: %v", err)
		}
		if wantOff.NeedsCsum && off != wantOff {
			t.Fatalf("offload %+v after coalescing, want %+v", off, wantOff)
		}
		frames = append(frames, segments...)
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
		name  string
		frame []byte
		hdr   VirtioNetHdr
		want  error
	}{
		{"UDP GSO type on TCP", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOUDPL4 }), errGSOMismatch},
		{"TCPv6 GSO type on IPv4", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOTCPv6 }), errGSOMismatch},
		{"TCPv4 GSO type on UDP", udpFrame, withHdr(udpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOTCPv4 }), errGSOMismatch},
		{"ECN on UDP", udpFrame, withHdr(udpHdr, func(h *VirtioNetHdr) { h.GSOType |= VirtioNetHdrGSOECN }), errGSOMismatch},
		{"UDP fragmentation offload", udpFrame, withHdr(udpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOUDP }), errGSOType},
		{"ECN without GSO type", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOType = VirtioNetHdrGSOECN }), errGSOType},
		{"zero GSO size", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.GSOSize = 0 }), errGSOSize},
		{"checksum start off", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.CsumStart-- }), errGSOChecksum},
		{"UDP checksum offset on TCP", tcpFrame, withHdr(tcpHdr, func(h *VirtioNetHdr) { h.CsumOffset = 6 }), errGSOChecksum},
		{"IPv4 fragment", withFrame(tcpFrame, func(f []byte) { f[14+6] |= 0x20 }), tcpHdr, errIPFragment},
		{"IPv4 header length 4", withFrame(tcpFrame, func(f []byte) { f[14] = 0x44 }), tcpHdr, errIPHeader},
		{"IP version 5", withFrame(tcpFrame, func(f []byte) { f[14] = 0x55 }), tcpHdr, errIPHeader},
		{"IPv4 total length beyond frame", withFrame(tcpFrame, func(f []byte) { f[14+2] = 0xff }), tcpHdr, errIPLength},
		{"IPv6 payload length beyond frame", withFrame(udpFrame, func(f []byte) { f[14+4] = 0xff }), udpHdr, errIPLength},
		{"IPv6 extension header", withFrame(udpFrame, func(f []byte) { f[14+6] = 0 }), udpHdr, errNotTCPOrUDP},
		{"TCP data offset 4", withFrame(tcpFrame, func(f []byte) { f[l4+12] = 0x40 }), tcpHdr, errTransportHeader},
		{"ARP frame", withFrame(tcpFrame, func(f []byte) { f[12], f[13] = 0x08, 0x06 }), tcpHdr, errNotIP},
		{"no GSO", tcpFrame, VirtioNetHdr{}, errGSOType},
	}
	for _, tc := range cases {
		var s Segmenter
		n, _, err := s.Start(tc.frame, tc.hdr)
		if !errors.Is(err, tc.want) || n != 0 {
			t.Errorf("%s: n=%d err=%v, want %v", tc.name, n, err, tc.want)
		}
	}
	for cut := range len(tcpFrame) {
		var s Segmenter
		if _, _, err := s.Start(tcpFrame[:cut], tcpHdr); err == nil {
			t.Fatalf("frame cut to %d bytes accepted", cut)
		}
	}
}

func segmentFrame(t *testing.T, frame []byte, hdr VirtioNetHdr, wantN int) [][]byte {
	t.Helper()
	segments, _, err := segmentAll(frame, hdr)
	if err != nil || len(segments) != wantN {
		t.Fatalf("Segmenter: %d segments, err=%v; want %d segments", len(segments), err, wantN)
	}
	return segments
}

// maxTCPv4SuperFrame is what a bulk TCP sender hands the TAP: 65535 bytes of
// IP with timestamps, cut into 46 segments of 1448 bytes.
func maxTCPv4SuperFrame() (frame []byte, hdr VirtioNetHdr) {
	s := bulkSpec(false, 1)
	s.payload = make([]byte, maxIPPacketLen-s.ipHeaderLen()-s.l4HeaderLen())
	return s.build(), s.gsoHeader(1448, false)
}

func TestSegmentingAllocatesNothing(t *testing.T) {
	frame, hdr := maxTCPv4SuperFrame()
	headers := bytes.Clone(frame[:66])
	var s Segmenter
	allocs := testing.AllocsPerRun(100, func() {
		copy(frame, headers)
		if _, _, err := s.Start(frame, hdr); err != nil {
			t.Fatal(err)
		}
		for _, _, ok := s.Next(); ok; _, _, ok = s.Next() {
		}
	})
	if allocs != 0 {
		t.Fatalf("segmenting allocates %.1f times per frame", allocs)
	}
}

// BenchmarkSegmentTCPv4 builds every segment of a 64 KiB frame in place;
// the frame's headers are put back first, as segment 0 changed them.
func BenchmarkSegmentTCPv4(b *testing.B) {
	frame, hdr := maxTCPv4SuperFrame()
	headers := bytes.Clone(frame[:66])
	var s Segmenter
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		copy(frame, headers)
		if _, _, err := s.Start(frame, hdr); err != nil {
			b.Fatal(err)
		}
		for _, _, ok := s.Next(); ok; _, _, ok = s.Next() {
		}
	}
}

func FuzzSegment(f *testing.F) {
	for _, s := range []packetSpec{bulkSpec(false, 1), bulkSpec(true, 2)} {
		s.payload = bytes.Repeat([]byte("burrow"), 500)
		h := s.gsoHeader(1000, false)
		f.Add(s.build(), h.Flags, h.GSOType, h.HdrLen, h.GSOSize, h.CsumStart, h.CsumOffset)
		s.udp = true
		h = s.gsoHeader(700, false)
		f.Add(s.build(), h.Flags, h.GSOType, h.HdrLen, h.GSOSize, h.CsumStart, h.CsumOffset)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06}, uint8(0), uint8(0), uint16(0), uint16(0), uint16(0), uint16(0))

	f.Fuzz(func(t *testing.T, frame []byte, flags, gsoType uint8, hdrLen, gsoSize, csumStart, csumOffset uint16) {
		hdr := VirtioNetHdr{Flags: flags, GSOType: gsoType, HdrLen: hdrLen, GSOSize: gsoSize, CsumStart: csumStart, CsumOffset: csumOffset}
		segments, off, err := segmentAll(bytes.Clone(frame), hdr)
		if err != nil {
			return
		}
		n := len(segments)
		r, err := parseRef(frame)
		if err != nil {
			t.Fatalf("Segmenter accepted a frame the reference parser refuses: %v", err)
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
