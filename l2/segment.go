package l2

import (
	"encoding/binary"
	"errors"
)

var (
	errGSOType     = errors.New("l2: unsupported GSO type")
	errGSOMismatch = errors.New("l2: GSO type does not match the packet")
	errGSOSize     = errors.New("l2: GSO size is zero")
	errGSOChecksum = errors.New("l2: checksum offload does not point at the L4 checksum")
)

// maxSegmentHeaders is the most that can precede a segment's payload: a
// VLAN-tagged Ethernet header, IPv4 with the most options (longer than the
// fixed IPv6 header) and TCP with the most options.
const maxSegmentHeaders = EthernetTaggedHeaderLen + 60 + 60

// Segmenter splits a GSO super-frame into frames carrying at most
// GSOSize bytes of L4 payload each, the way a NIC doing TSO/USO would, and
// builds each one in place in the super-frame: segment i's headers are
// written right in front of its payload, over the end of segment i-1's,
// so a segment's payload is never copied. Every segment leaves with a
// partial checksum (the pseudo-header sum for its own length), described
// by the Offload Start returns.
//
// The header is checked against the packet, and its HdrLen hint is
// ignored. TCPv4, TCPv6 and UDP L4 over IPv4 or IPv6 are supported; IP
// and TCP options are copied to every segment; IPv6 extension headers are
// refused.
type Segmenter struct {
	frame    []byte
	p        l4Packet
	headers  [maxSegmentHeaders]byte // the super-frame's own, kept from segment 0
	size     int                     // payload bytes per segment
	n, next  int
	addrSum  uint16 // of the IP addresses, for the partial checksums
	ipSum    uint16 // of the IPv4 header fields the segments share
	firstID  uint16
	firstSeq uint32
}

// Start checks frame against hdr and readies its segments, returning how
// many there are and their checksum offload. It changes nothing in frame;
// Next does.
func (s *Segmenter) Start(frame []byte, hdr VirtioNetHdr) (n int, off Offload, err error) {
	p, err := parseL4(frame)
	if err != nil {
		return 0, off, err
	}
	if err := checkGSOHeader(hdr, p); err != nil {
		return 0, off, err
	}
	*s = Segmenter{frame: frame, p: p, size: int(hdr.GSOSize),
		addrSum: OnesComplementSum(p.addrs(frame), 0), ipSum: p.ipv4FixedSum(frame), firstID: p.ipv4ID(frame)}
	copy(s.headers[:], frame[:p.payloadOff])
	if p.proto == ipProtoTCP {
		s.firstSeq = binary.BigEndian.Uint32(frame[p.l4Off+4:])
	}
	s.n = max(1, (p.end-p.payloadOff+s.size-1)/s.size)
	return s.n, p.offload(), nil
}

// Next builds the next segment in the super-frame and returns where it
// lies: frame[start:end]. Every byte of the frame in front of start is
// free for the caller to write (segment i starts at i × GSOSize), and Next
// overwrites the end of the segment before: use each segment up before
// asking for the next. It returns false once every segment was built.
func (s *Segmenter) Next() (start, end int, ok bool) {
	if s.next == s.n {
		return 0, 0, false
	}
	i := s.next
	s.next++
	p := s.p
	payloadStart := p.payloadOff + i*s.size
	end = min(payloadStart+s.size, p.end)
	start = payloadStart - p.payloadOff
	seg := s.frame[start:end]
	copy(seg, s.headers[:p.payloadOff])
	p.setIPLength(seg, len(seg)-p.ipOff, s.firstID+uint16(i), s.ipSum)
	l4Len := len(seg) - p.l4Off
	if p.proto == ipProtoTCP {
		binary.BigEndian.PutUint32(seg[p.l4Off+4:], s.firstSeq+uint32(i*s.size))
		seg[p.l4Off+13] &^= tcpFlagsClearedOnSegment(i, s.n)
	} else {
		binary.BigEndian.PutUint16(seg[p.l4Off+4:], uint16(l4Len))
	}
	p.setPartialChecksum(seg, s.addrSum, l4Len)
	return start, end, true
}

// tcpFlagsClearedOnSegment: FIN and PSH belong to the last segment only, CWR
// to the first only, as in Linux's TSO.
func tcpFlagsClearedOnSegment(i, n int) uint8 {
	var clear uint8
	if i != n-1 {
		clear |= tcpFIN | tcpPSH
	}
	if i != 0 {
		clear |= tcpCWR
	}
	return clear
}

// checkGSOHeader refuses a header that disagrees with the packet it came with.
func checkGSOHeader(hdr VirtioNetHdr, p l4Packet) error {
	ecn := hdr.GSOType&VirtioNetHdrGSOECN != 0
	switch hdr.GSOType &^ VirtioNetHdrGSOECN {
	case VirtioNetHdrGSOTCPv4:
		if p.ipv6 || p.proto != ipProtoTCP {
			return errGSOMismatch
		}
	case VirtioNetHdrGSOTCPv6:
		if !p.ipv6 || p.proto != ipProtoTCP {
			return errGSOMismatch
		}
	case VirtioNetHdrGSOUDPL4:
		// Linux refuses the ECN flag on UDP segmentation too.
		if p.proto != ipProtoUDP || ecn {
			return errGSOMismatch
		}
	default:
		return errGSOType
	}
	if hdr.GSOSize == 0 {
		return errGSOSize
	}
	if hdr.Flags&VirtioNetHdrNeedsCsum != 0 &&
		(int(hdr.CsumStart) != p.l4Off || int(hdr.CsumOffset) != p.checksumOffset()) {
		return errGSOChecksum
	}
	return nil
}
