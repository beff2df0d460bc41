package l2

import (
	"encoding/binary"
	"errors"
)

// IP protocol numbers of the transports burrow segments and coalesces.
const (
	ipProtoTCP = 6
	ipProtoUDP = 17
)

const (
	ipv4MinHeaderLen = 20
	ipv6HeaderLen    = 40
	tcpMinHeaderLen  = 20
	udpHeaderLen     = 8

	tcpChecksumOffset = 16
	udpChecksumOffset = 6

	ipv4FlagMoreFragments = 0x2000
	ipv4FragmentOffset    = 0x1fff
)

// TCP flags, in byte 13 of the header.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
	tcpCWR = 0x80
)

// ipPacket locates the IP header of an IPv4 or IPv6 packet in an Ethernet
// frame. Only the fixed IPv6 header is understood: proto is its Next Header.
type ipPacket struct {
	ipOff    int // start of the IP header
	l4Off    int // end of the IP header
	end      int // end of the IP packet; what follows is link padding
	ipv6     bool
	proto    uint8
	fragment bool
}

// l4Packet is a whole TCP or UDP packet in an Ethernet frame.
type l4Packet struct {
	ipPacket
	payloadOff int // start of the TCP or UDP payload
}

var (
	errNotIP           = errors.New("l2: frame does not carry IPv4 or IPv6")
	errIPHeader        = errors.New("l2: malformed IP header")
	errIPLength        = errors.New("l2: IP length disagrees with the frame")
	errIPFragment      = errors.New("l2: IP fragment")
	errNotTCPOrUDP     = errors.New("l2: packet is neither TCP nor UDP directly over IP")
	errTransportHeader = errors.New("l2: malformed TCP or UDP header")
)

func parseIP(frame []byte) (ipPacket, error) {
	var p ipPacket
	etherType, ipOff, err := parseLinkType(frame)
	if err != nil {
		return p, err
	}
	p.ipOff = ipOff
	ip := frame[p.ipOff:]
	switch etherType {
	case EtherTypeIPv4:
		if len(ip) < ipv4MinHeaderLen || ip[0]>>4 != 4 {
			return p, errIPHeader
		}
		headerLen := int(ip[0]&0x0f) * 4
		totalLen := int(binary.BigEndian.Uint16(ip[2:4]))
		if headerLen < ipv4MinHeaderLen || totalLen < headerLen {
			return p, errIPHeader
		}
		if totalLen > len(ip) {
			return p, errIPLength
		}
		p.l4Off = p.ipOff + headerLen
		p.end = p.ipOff + totalLen
		p.proto = ip[9]
		p.fragment = binary.BigEndian.Uint16(ip[6:8])&(ipv4FlagMoreFragments|ipv4FragmentOffset) != 0
	case EtherTypeIPv6:
		if len(ip) < ipv6HeaderLen || ip[0]>>4 != 6 {
			return p, errIPHeader
		}
		payloadLen := int(binary.BigEndian.Uint16(ip[4:6]))
		if ipv6HeaderLen+payloadLen > len(ip) {
			return p, errIPLength
		}
		p.ipv6 = true
		p.l4Off = p.ipOff + ipv6HeaderLen
		p.end = p.l4Off + payloadLen
		p.proto = ip[6]
	default:
		return p, errNotIP
	}
	return p, nil
}

// parseL4 finds the TCP or UDP header and payload of a frame. IPv6 extension
// headers and IP fragments are refused: segments could not be built from them.
func parseL4(frame []byte) (l4Packet, error) {
	ip, err := parseIP(frame)
	p := l4Packet{ipPacket: ip}
	if err != nil {
		return p, err
	}
	if p.fragment {
		return p, errIPFragment
	}
	l4 := frame[p.l4Off:p.end]
	switch p.proto {
	case ipProtoTCP:
		if len(l4) < tcpMinHeaderLen {
			return p, errTransportHeader
		}
		headerLen := int(l4[12]>>4) * 4
		if headerLen < tcpMinHeaderLen || headerLen > len(l4) {
			return p, errTransportHeader
		}
		p.payloadOff = p.l4Off + headerLen
	case ipProtoUDP:
		if len(l4) < udpHeaderLen {
			return p, errTransportHeader
		}
		p.payloadOff = p.l4Off + udpHeaderLen
	default:
		return p, errNotTCPOrUDP
	}
	return p, nil
}

// addrs is the source address followed by the destination address, which
// are adjacent in both IPv4 and IPv6 headers.
func (p ipPacket) addrs(frame []byte) []byte {
	if p.ipv6 {
		return frame[p.ipOff+8 : p.ipOff+40]
	}
	return frame[p.ipOff+12 : p.ipOff+20]
}

func (p l4Packet) checksumOffset() int {
	if p.proto == ipProtoTCP {
		return tcpChecksumOffset
	}
	return udpChecksumOffset
}

func (p l4Packet) offload() Offload {
	return Offload{NeedsCsum: true, CsumStart: uint16(p.l4Off), CsumOffset: uint16(p.checksumOffset())}
}

// setIPLength rewrites the length of the IP packet that starts at p.ipOff in
// pkt to ipLen bytes. An IPv4 header also gets id and its checksum, from
// fixed, the sum of its other fields (ipv4FixedSum): the segments of a
// frame differ only in length and ID, and summing the rest once per frame
// instead of once per segment matters at tens of thousands of segments a
// second.
func (p l4Packet) setIPLength(pkt []byte, ipLen int, id, fixed uint16) {
	ip := pkt[p.ipOff:p.l4Off]
	if p.ipv6 {
		binary.BigEndian.PutUint16(ip[4:6], uint16(ipLen-ipv6HeaderLen))
		return
	}
	binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen))
	binary.BigEndian.PutUint16(ip[4:6], id)
	binary.BigEndian.PutUint16(ip[10:12], ^addSums(addSums(fixed, uint16(ipLen)), id))
}

// ipv4FixedSum is the one's complement sum of the fields of frame's IPv4
// header that setIPLength leaves alone: all but the total length, the ID
// and the checksum. It is zero for IPv6.
func (p ipPacket) ipv4FixedSum(frame []byte) uint16 {
	if p.ipv6 {
		return 0
	}
	ip := frame[p.ipOff:p.l4Off]
	return OnesComplementSum(ip[12:], OnesComplementSum(ip[6:10], OnesComplementSum(ip[:2], 0)))
}

// setPartialChecksum stores the pseudo-header sum for an L4 packet of l4Len
// bytes in the checksum field, given the sum of the addresses.
func (p l4Packet) setPartialChecksum(pkt []byte, addrSum uint16, l4Len int) {
	field := pkt[p.l4Off+p.checksumOffset():]
	binary.BigEndian.PutUint16(field, pseudoHeaderSum(addrSum, p.proto, l4Len))
}

// ipv4ID is the identification field of an IPv4 header; IPv6 has none.
func (p ipPacket) ipv4ID(frame []byte) uint16 {
	if p.ipv6 {
		return 0
	}
	return binary.BigEndian.Uint16(frame[p.ipOff+4:])
}

// FlowHash hashes what tells a frame's transport flow apart — its IP
// addresses, protocol and, for TCP and UDP, ports; for frames that are
// not IP, its MAC addresses and EtherType — so that a fair queue can give
// every flow its own share. Frames of one flow hash alike; it is FNV-1a,
// fixed, since it only spreads flows and guards nothing.
func FlowHash(frame []byte) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	add := func(b []byte) {
		for _, c := range b {
			h = (h ^ uint32(c)) * prime
		}
	}
	p, err := parseIP(frame)
	if err != nil {
		add(frame[:min(len(frame), EthernetHeaderLen)])
		return h
	}
	add(p.addrs(frame))
	h = (h ^ uint32(p.proto)) * prime
	if (p.proto == ipProtoTCP || p.proto == ipProtoUDP) && !p.fragment && p.l4Off+4 <= p.end {
		add(frame[p.l4Off : p.l4Off+4])
	}
	return h
}
