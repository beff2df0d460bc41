package l2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"pgregory.net/rapid"
)

// packetSpec describes a TCP or UDP packet in an Ethernet frame; build lays
// it out independently of the code under test.
type packetSpec struct {
	dst, src         MAC
	tagged           bool
	vlanTag          uint16
	ipv6             bool
	udp              bool
	srcIP, dstIP     netip.Addr
	tos, ttl         uint8 // IPv6: traffic class and hop limit
	flowLabel        uint32
	ipID             uint16
	dontFragment     bool
	ipOptions        []byte // IPv4 only, a multiple of 4 bytes
	srcPort, dstPort uint16
	seq, ack         uint32
	flags            uint8
	window           uint16
	tcpOptions       []byte // a multiple of 4 bytes
	payload          []byte
}

func (s packetSpec) linkLen() int {
	if s.tagged {
		return 18
	}
	return 14
}

func (s packetSpec) ipHeaderLen() int {
	if s.ipv6 {
		return 40
	}
	return 20 + len(s.ipOptions)
}

func (s packetSpec) l4HeaderLen() int {
	if s.udp {
		return 8
	}
	return 20 + len(s.tcpOptions)
}

func (s packetSpec) l4Off() int { return s.linkLen() + s.ipHeaderLen() }

func (s packetSpec) proto() uint8 {
	if s.udp {
		return 17
	}
	return 6
}

func (s packetSpec) checksumOffset() int {
	if s.udp {
		return 6
	}
	return 16
}

// offload is the metadata of the built frame: its L4 checksum is partial.
func (s packetSpec) offload() Offload {
	return Offload{NeedsCsum: true, CsumStart: uint16(s.l4Off()), CsumOffset: uint16(s.checksumOffset())}
}

// gsoHeader is the header Linux puts in front of such a super-frame.
func (s packetSpec) gsoHeader(gsoSize int, ecn bool) VirtioNetHdr {
	gsoType := VirtioNetHdrGSOTCPv4
	switch {
	case s.udp:
		gsoType = VirtioNetHdrGSOUDPL4
	case s.ipv6:
		gsoType = VirtioNetHdrGSOTCPv6
	}
	if ecn {
		gsoType |= VirtioNetHdrGSOECN
	}
	return VirtioNetHdr{
		Flags:      VirtioNetHdrNeedsCsum,
		GSOType:    gsoType,
		HdrLen:     uint16(s.l4Off() + s.l4HeaderLen()),
		GSOSize:    uint16(gsoSize),
		CsumStart:  uint16(s.l4Off()),
		CsumOffset: uint16(s.checksumOffset()),
	}
}

// build lays out the frame with valid IP lengths and header checksum and,
// as Linux hands over offloaded packets, the pseudo-header sum in the L4
// checksum field.
func (s packetSpec) build() []byte {
	b := append([]byte{}, s.dst[:]...)
	b = append(b, s.src[:]...)
	if s.tagged {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, s.vlanTag)
	}
	l4Len := s.l4HeaderLen() + len(s.payload)
	src, dst := s.srcIP.AsSlice(), s.dstIP.AsSlice()
	if s.ipv6 {
		b = binary.BigEndian.AppendUint16(b, 0x86dd)
		b = binary.BigEndian.AppendUint32(b, 6<<28|uint32(s.tos)<<20|s.flowLabel&0xfffff)
		b = binary.BigEndian.AppendUint16(b, uint16(l4Len))
		b = append(b, s.proto(), s.ttl)
		b = append(b, src...)
		b = append(b, dst...)
	} else {
		b = binary.BigEndian.AppendUint16(b, 0x0800)
		ip := len(b)
		b = append(b, byte(0x40|s.ipHeaderLen()/4), s.tos)
		b = binary.BigEndian.AppendUint16(b, uint16(s.ipHeaderLen()+l4Len))
		b = binary.BigEndian.AppendUint16(b, s.ipID)
		var flags uint16
		if s.dontFragment {
			flags = 0x4000
		}
		b = binary.BigEndian.AppendUint16(b, flags)
		b = append(b, s.ttl, s.proto(), 0, 0)
		b = append(b, src...)
		b = append(b, dst...)
		b = append(b, s.ipOptions...)
		binary.BigEndian.PutUint16(b[ip+10:], ^refSum(b[ip:]))
	}
	b = binary.BigEndian.AppendUint16(b, s.srcPort)
	b = binary.BigEndian.AppendUint16(b, s.dstPort)
	if s.udp {
		b = binary.BigEndian.AppendUint16(b, uint16(l4Len))
		b = append(b, 0, 0)
	} else {
		b = binary.BigEndian.AppendUint32(b, s.seq)
		b = binary.BigEndian.AppendUint32(b, s.ack)
		b = append(b, byte(s.l4HeaderLen()/4)<<4, s.flags)
		b = binary.BigEndian.AppendUint16(b, s.window)
		b = append(b, 0, 0, 0, 0)
		b = append(b, s.tcpOptions...)
	}
	b = append(b, s.payload...)
	binary.BigEndian.PutUint16(b[s.l4Off()+s.checksumOffset():], refSum(refPseudoHeader(s.ipv6, src, dst, s.proto(), l4Len)))
	return b
}

// refSum is RFC 1071 done the slow, obvious way: one big-endian word at a time.
func refSum(b []byte) uint16 {
	var s uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		s += w
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func refPseudoHeader(ipv6 bool, src, dst []byte, proto uint8, l4Len int) []byte {
	b := append(append([]byte{}, src...), dst...)
	if ipv6 {
		b = binary.BigEndian.AppendUint32(b, uint32(l4Len))
		return append(b, 0, 0, 0, proto)
	}
	b = append(b, 0, proto)
	return binary.BigEndian.AppendUint16(b, uint16(l4Len))
}

// refLayout locates the headers of a well-formed TCP or UDP frame without
// the code under test.
type refLayout struct {
	ipOff, l4Off, payloadOff, end int
	ipv6, udp                     bool
}

func parseRef(frame []byte) (refLayout, error) {
	var r refLayout
	if len(frame) < 14 {
		return r, fmt.Errorf("short frame")
	}
	r.ipOff = 14
	etherType := binary.BigEndian.Uint16(frame[12:])
	if etherType == 0x8100 {
		if len(frame) < 18 {
			return r, fmt.Errorf("short tagged frame")
		}
		r.ipOff = 18
		etherType = binary.BigEndian.Uint16(frame[16:])
	}
	ip := frame[r.ipOff:]
	var proto byte
	switch etherType {
	case 0x0800:
		if len(ip) < 20 || len(ip) < int(ip[0]&15)*4 {
			return r, fmt.Errorf("short IPv4 header")
		}
		r.l4Off = r.ipOff + int(ip[0]&15)*4
		r.end = r.ipOff + int(binary.BigEndian.Uint16(ip[2:]))
		proto = ip[9]
	case 0x86dd:
		if len(ip) < 40 {
			return r, fmt.Errorf("short IPv6 header")
		}
		r.ipv6 = true
		r.l4Off = r.ipOff + 40
		r.end = r.l4Off + int(binary.BigEndian.Uint16(ip[4:]))
		proto = ip[6]
	default:
		return r, fmt.Errorf("EtherType %#x", etherType)
	}
	if r.end > len(frame) || r.end < r.l4Off {
		return r, fmt.Errorf("IP length %d outside frame of %d", r.end, len(frame))
	}
	switch proto {
	case 6:
		if r.end-r.l4Off < 20 {
			return r, fmt.Errorf("short TCP header")
		}
		r.payloadOff = r.l4Off + int(frame[r.l4Off+12]>>4)*4
	case 17:
		r.udp = true
		r.payloadOff = r.l4Off + 8
	default:
		return r, fmt.Errorf("protocol %d", proto)
	}
	if r.payloadOff > r.end {
		return r, fmt.Errorf("L4 header beyond IP packet")
	}
	return r, nil
}

// checkWholePacket verifies a segment as a receiver would: IP lengths match
// the frame, the IPv4 header checksum is valid, the UDP length is right, and
// once CompleteChecksum has run (on a copy) the L4 checksum verifies.
func checkWholePacket(frame []byte, off Offload) error {
	r, err := parseRef(frame)
	if err != nil {
		return err
	}
	if r.end != len(frame) {
		return fmt.Errorf("IP packet ends at %d, frame at %d", r.end, len(frame))
	}
	if !r.ipv6 && refSum(frame[r.ipOff:r.l4Off]) != 0xffff {
		return fmt.Errorf("bad IPv4 header checksum")
	}
	l4Len := r.end - r.l4Off
	if r.udp && int(binary.BigEndian.Uint16(frame[r.l4Off+4:])) != l4Len {
		return fmt.Errorf("UDP length %d, want %d", binary.BigEndian.Uint16(frame[r.l4Off+4:]), l4Len)
	}
	wantOff := Offload{NeedsCsum: true, CsumStart: uint16(r.l4Off), CsumOffset: 16}
	if r.udp {
		wantOff.CsumOffset = 6
	}
	if off != wantOff {
		return fmt.Errorf("offload %+v, want %+v", off, wantOff)
	}
	done := append([]byte{}, frame...)
	if err := CompleteChecksum(done, int(off.CsumStart), int(off.CsumOffset)); err != nil {
		return err
	}
	var src, dst []byte
	if r.ipv6 {
		src, dst = done[r.ipOff+8:r.ipOff+24], done[r.ipOff+24:r.ipOff+40]
	} else {
		src, dst = done[r.ipOff+12:r.ipOff+16], done[r.ipOff+16:r.ipOff+20]
	}
	proto := byte(6)
	if r.udp {
		proto = 17
	}
	whole := append(refPseudoHeader(r.ipv6, src, dst, proto, l4Len), done[r.l4Off:]...)
	if refSum(whole) != 0xffff {
		return fmt.Errorf("L4 checksum does not verify")
	}
	return nil
}

var tcpFlagChoices = []uint8{
	tcpACK, tcpACK | tcpPSH, tcpACK | tcpFIN, tcpACK | tcpPSH | tcpFIN, tcpACK | tcpCWR, tcpACK | tcpCWR | tcpPSH,
}

func drawMAC(t *rapid.T, label string) MAC {
	return MAC(rapid.SliceOfN(rapid.Byte(), 6, 6).Draw(t, label))
}

func drawAddr(t *rapid.T, ipv6 bool, label string) netip.Addr {
	if ipv6 {
		return netip.AddrFrom16([16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label)))
	}
	return netip.AddrFrom4([4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, label)))
}

// drawTCPOptions is no options, NOP NOP timestamps as Linux sends on an
// established connection, or arbitrary option bytes.
func drawTCPOptions(t *rapid.T) []byte {
	switch rapid.IntRange(0, 2).Draw(t, "tcpOptionsKind") {
	case 1:
		ts := rapid.SliceOfN(rapid.Byte(), 8, 8).Draw(t, "timestamps")
		return append([]byte{1, 1, 8, 10}, ts...)
	case 2:
		words := rapid.IntRange(1, 10).Draw(t, "tcpOptionWords")
		return rapid.SliceOfN(rapid.Byte(), 4*words, 4*words).Draw(t, "tcpOptions")
	}
	return nil
}

// drawSpec draws the headers of a random valid TCP or UDP packet; the
// payload is left to the caller.
func drawSpec(t *rapid.T) packetSpec {
	s := packetSpec{
		dst:     drawMAC(t, "dst"),
		src:     drawMAC(t, "src"),
		tagged:  rapid.Bool().Draw(t, "tagged"),
		vlanTag: rapid.Uint16().Draw(t, "vlanTag"),
		ipv6:    rapid.Bool().Draw(t, "ipv6"),
		udp:     rapid.Bool().Draw(t, "udp"),
		tos:     rapid.Uint8().Draw(t, "tos"),
		ttl:     rapid.Uint8().Draw(t, "ttl"),
		srcPort: rapid.Uint16().Draw(t, "srcPort"),
		dstPort: rapid.Uint16().Draw(t, "dstPort"),
	}
	s.srcIP = drawAddr(t, s.ipv6, "srcIP")
	s.dstIP = drawAddr(t, s.ipv6, "dstIP")
	if s.ipv6 {
		s.flowLabel = rapid.Uint32Range(0, 0xfffff).Draw(t, "flowLabel")
	} else {
		s.ipID = rapid.Uint16().Draw(t, "ipID")
		s.dontFragment = rapid.Bool().Draw(t, "dontFragment")
		if rapid.IntRange(0, 4).Draw(t, "ipOptionsOdds") == 0 {
			words := rapid.IntRange(1, 10).Draw(t, "ipOptionWords")
			s.ipOptions = rapid.SliceOfN(rapid.Byte(), 4*words, 4*words).Draw(t, "ipOptions")
		}
	}
	if !s.udp {
		s.seq = rapid.Uint32().Draw(t, "seq")
		s.ack = rapid.Uint32().Draw(t, "ack")
		s.flags = rapid.SampledFrom(tcpFlagChoices).Draw(t, "flags")
		s.window = rapid.Uint16().Draw(t, "window")
		s.tcpOptions = drawTCPOptions(t)
	}
	return s
}

// randomPayload fills n bytes from a drawn seed: drawing every byte through
// rapid would be slow for 64 KiB.
func randomPayload(t *rapid.T, n int) []byte {
	rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "payloadSeed"), 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// bulkSpec is a plain established TCP flow, the kind the Coalescer merges.
func bulkSpec(ipv6 bool, srcPort uint16) packetSpec {
	s := packetSpec{
		dst:          MAC{2, 0, 0, 0, 0, 2},
		src:          MAC{2, 0, 0, 0, 0, 1},
		ipv6:         ipv6,
		srcIP:        netip.MustParseAddr("10.0.0.1"),
		dstIP:        netip.MustParseAddr("10.0.0.2"),
		ttl:          64,
		ipID:         100,
		dontFragment: true,
		srcPort:      srcPort,
		dstPort:      5201,
		seq:          1000,
		ack:          7,
		flags:        tcpACK,
		window:       500,
		tcpOptions:   []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2},
	}
	if ipv6 {
		s.srcIP = netip.MustParseAddr("fd00::1")
		s.dstIP = netip.MustParseAddr("fd00::2")
	}
	return s
}

// segmentsOf cuts spec's payload into frames the way a peer's Segment would.
func segmentsOf(s packetSpec, payloadLen, mss int) [][]byte {
	s.payload = make([]byte, payloadLen)
	for i := range s.payload {
		s.payload[i] = byte(i*7 + int(s.srcPort))
	}
	segments, _, err := segmentAll(s.build(), s.gsoHeader(mss, false))
	if err != nil {
		panic(err)
	}
	return segments
}

// segmentAll cuts frame into its segments with a Segmenter, which builds
// them in frame, and returns copies. After each segment it overwrites
// everything of the frame up to that segment's end, as a caller that has
// sent it may: the segments after must not depend on those bytes.
func segmentAll(frame []byte, hdr VirtioNetHdr) ([][]byte, Offload, error) {
	var s Segmenter
	n, off, err := s.Start(frame, hdr)
	if err != nil {
		return nil, off, err
	}
	segments := make([][]byte, 0, n)
	for i := 0; ; i++ {
		start, end, ok := s.Next()
		if !ok {
			break
		}
		if start != i*int(hdr.GSOSize) {
			return nil, off, fmt.Errorf("segment %d starts at %d, not at %d × the GSO size", i, start, i)
		}
		segments = append(segments, bytes.Clone(frame[start:end]))
		for j := range frame[:end] {
			frame[j] = 0xa5
		}
	}
	if len(segments) != n {
		return nil, off, fmt.Errorf("%d segments built, Start said %d", len(segments), n)
	}
	return segments, off, nil
}
