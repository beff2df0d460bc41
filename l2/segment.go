package l2

import (
	"encoding/binary"
	"errors"
)

var (
	errHeadroom        = errors.New("l2: negative headroom")
	errGSOType         = errors.New("l2: unsupported GSO type")
	errGSOMismatch     = errors.New("l2: GSO type does not match the packet")
	errGSOSize         = errors.New("l2: GSO size is zero")
	errGSOChecksum     = errors.New("l2: checksum offload does not point at the L4 checksum")
	errTooManySegments = errors.New("l2: more segments than output buffers")
	errOutputTooSmall  = errors.New("l2: output buffer too small for a segment")
)

// Segment splits the GSO super-frame described by hdr into frames carrying at
// most hdr.GSOSize bytes of L4 payload each, the way a NIC doing TSO/USO
// would. Segment i is written to out[i][headroom:headroom+sizes[i]]; the
// headroom is left for tunnel headers. Every segment leaves with a partial
// checksum (the pseudo-header sum for its own length), described by off.
//
// hdr is checked against the packet, and its HdrLen hint is ignored. TCPv4,
// TCPv6 and UDP L4 over IPv4 or IPv6 are supported; IP and TCP options are
// copied to every segment; IPv6 extension headers are refused. A GSO_NONE
// frame is copied unchanged into out[0] with its own checksum metadata. The
// output buffers must not overlap frame.
func Segment(frame []byte, hdr VirtioNetHdr, out [][]byte, headroom int, sizes []int) (n int, off Offload, err error) {
	if headroom < 0 {
		return 0, off, errHeadroom
	}
	if hdr.GSOType == VirtioNetHdrGSONone {
		return copyWhole(frame, offloadOf(hdr), out, headroom, sizes)
	}
	p, err := parseL4(frame)
	if err != nil {
		return 0, off, err
	}
	if err := checkGSOHeader(hdr, p); err != nil {
		return 0, off, err
	}
	segmentSize := int(hdr.GSOSize)
	payload := frame[p.payloadOff:p.end]
	n = max(1, (len(payload)+segmentSize-1)/segmentSize)
	if n > len(out) || n > len(sizes) {
		return 0, off, errTooManySegments
	}

	headers := frame[:p.payloadOff]
	addrSum := OnesComplementSum(p.addrs(frame), 0)
	firstID := p.ipv4ID(frame)
	var firstSeq uint32
	if p.proto == ipProtoTCP {
		firstSeq = binary.BigEndian.Uint32(frame[p.l4Off+4:])
	}
	for i := range n {
		start := i * segmentSize
		chunk := payload[start:min(start+segmentSize, len(payload))]
		size := len(headers) + len(chunk)
		if len(out[i]) < headroom || len(out[i])-headroom < size {
			return 0, off, errOutputTooSmall
		}
		seg := out[i][headroom : headroom+size]
		copy(seg, headers)
		copy(seg[len(headers):], chunk)

		p.setIPLength(seg, size-p.ipOff, firstID+uint16(i))
		l4Len := size - p.l4Off
		if p.proto == ipProtoTCP {
			binary.BigEndian.PutUint32(seg[p.l4Off+4:], firstSeq+uint32(start))
			seg[p.l4Off+13] &^= tcpFlagsClearedOnSegment(i, n)
		} else {
			binary.BigEndian.PutUint16(seg[p.l4Off+4:], uint16(l4Len))
		}
		p.setPartialChecksum(seg, addrSum, l4Len)
		sizes[i] = size
	}
	return n, p.offload(), nil
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

func copyWhole(frame []byte, off Offload, out [][]byte, headroom int, sizes []int) (int, Offload, error) {
	if err := off.Validate(len(frame)); err != nil {
		return 0, Offload{}, err
	}
	if len(out) == 0 || len(sizes) == 0 {
		return 0, Offload{}, errTooManySegments
	}
	if len(out[0]) < headroom || len(out[0])-headroom < len(frame) {
		return 0, Offload{}, errOutputTooSmall
	}
	sizes[0] = copy(out[0][headroom:], frame)
	return 1, off, nil
}
