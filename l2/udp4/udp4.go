// Package udp4 reads and writes the UDP-over-IPv4-over-Ethernet frames
// that burrow's local services exchange with the TAP device: the DHCP
// server (package ipam) and the virtual DNS (package vdns), the IPOP
// paper's DHCP over the DHT and virtual DNS. It is a packet format like
// those of package l2, whose Ethernet header and checksums it uses, and
// imports nothing else of burrow.
//
// Parse is strict about structure (lengths, IPv4 header checksum, no
// fragments, no options beyond what the header length says) but does not
// verify UDP checksums: frames come from the local kernel, which leaves
// them partial when checksum offload is on. Append always writes complete
// checksums.
package udp4

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"burrow/l2"
)

// Datagram is a UDP datagram with the addresses of the frame that carried
// it.
type Datagram struct {
	SrcMAC, DstMAC l2.MAC
	Src, Dst       netip.AddrPort // IPv4
	// Payload aliases the parsed frame.
	Payload []byte
}

// Header lengths.
const (
	IPv4HeaderLen = 20
	UDPHeaderLen  = 8
	// Overhead is what Append adds in front of the payload.
	Overhead = l2.EthernetHeaderLen + IPv4HeaderLen + UDPHeaderLen
)

const (
	protoUDP     = 17
	ipv4TTL      = 64
	flagDF       = 0x4000
	fragmentBits = 0x3fff // more-fragments and offset
)

// Parse errors.
var (
	ErrNotIPv4   = errors.New("udp4: not an untagged IPv4 frame")
	ErrNotUDP    = errors.New("udp4: not UDP")
	ErrMalformed = errors.New("udp4: malformed IPv4 or UDP header")
	ErrChecksum  = errors.New("udp4: bad IPv4 header checksum")
	ErrFragment  = errors.New("udp4: IPv4 fragment")
)

// Peek returns the destination of an untagged UDP-over-IPv4 frame without
// validating the rest, so that a service can pass over frames that are not
// its own — every frame from the TAP — before paying for Parse.
func Peek(frame []byte) (netip.AddrPort, bool) {
	const ip = l2.EthernetHeaderLen
	if len(frame) < ip+IPv4HeaderLen || l2.EtherType(binary.BigEndian.Uint16(frame[12:14])) != l2.EtherTypeIPv4 ||
		frame[ip+9] != protoUDP || binary.BigEndian.Uint16(frame[ip+6:])&0x1fff != 0 {
		return netip.AddrPort{}, false // not UDP, or a later fragment without a UDP header
	}
	udp := ip + int(frame[ip]&0x0f)*4
	if len(frame) < udp+UDPHeaderLen {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(frame[ip+16:ip+20])), binary.BigEndian.Uint16(frame[udp+2:])), true
}

// IsDHCP reports whether a frame is DHCP for IPv4: UDP to a server's port
// (67) or a client's (68).
func IsDHCP(frame []byte) bool {
	dst, ok := Peek(frame)
	return ok && (dst.Port() == 67 || dst.Port() == 68)
}

// Parse reads a UDP datagram from an untagged Ethernet frame.
func Parse(frame []byte) (Datagram, error) {
	var d Datagram
	eth, err := l2.ParseEthernet(frame)
	if err != nil || eth.Tagged || eth.EtherType != l2.EtherTypeIPv4 {
		return d, ErrNotIPv4
	}
	ip := frame[eth.PayloadOffset:]
	if len(ip) < IPv4HeaderLen || ip[0]>>4 != 4 {
		return d, ErrMalformed
	}
	hlen := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if hlen < IPv4HeaderLen || total < hlen || total > len(ip) {
		return d, ErrMalformed
	}
	if l2.Checksum(ip[:hlen], 0) != 0 {
		return d, ErrChecksum
	}
	if binary.BigEndian.Uint16(ip[6:8])&fragmentBits != 0 {
		return d, ErrFragment
	}
	if ip[9] != protoUDP {
		return d, ErrNotUDP
	}
	udp := ip[hlen:total]
	if len(udp) < UDPHeaderLen {
		return d, ErrMalformed
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:6]))
	if ulen < UDPHeaderLen || ulen > len(udp) {
		return d, ErrMalformed
	}
	d.DstMAC, d.SrcMAC = eth.Dst, eth.Src
	d.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(udp[0:2]))
	d.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(udp[2:4]))
	d.Payload = udp[UDPHeaderLen:ulen]
	return d, nil
}

// ErrTooLong reports a payload that does not fit one IPv4 packet.
var ErrTooLong = errors.New("udp4: payload too long for one IPv4 packet")

// Append appends the frame carrying d to dst: Ethernet, an IPv4 header
// with DF and TTL 64, and UDP, both checksums filled in. Src and Dst must
// be IPv4.
func Append(dst []byte, d Datagram) ([]byte, error) {
	src, to := d.Src.Addr().Unmap(), d.Dst.Addr().Unmap()
	if !src.Is4() || !to.Is4() {
		return dst, errors.New("udp4: addresses must be IPv4")
	}
	if len(d.Payload) > 65535-IPv4HeaderLen-UDPHeaderLen {
		return dst, ErrTooLong
	}
	dst = l2.Ethernet{Dst: d.DstMAC, Src: d.SrcMAC, EtherType: l2.EtherTypeIPv4}.AppendHeader(dst)
	ipStart := len(dst)
	total := IPv4HeaderLen + UDPHeaderLen + len(d.Payload)
	s4, d4 := src.As4(), to.As4()
	dst = append(dst, 0x45, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(total))
	dst = append(dst, 0, 0) // identification: DF is set, nothing to reassemble
	dst = binary.BigEndian.AppendUint16(dst, flagDF)
	dst = append(dst, ipv4TTL, protoUDP, 0, 0)
	dst = append(dst, s4[:]...)
	dst = append(dst, d4[:]...)
	binary.BigEndian.PutUint16(dst[ipStart+10:], l2.IPv4HeaderChecksum(dst[ipStart:]))
	udpStart := len(dst)
	ulen := UDPHeaderLen + len(d.Payload)
	dst = binary.BigEndian.AppendUint16(dst, d.Src.Port())
	dst = binary.BigEndian.AppendUint16(dst, d.Dst.Port())
	dst = binary.BigEndian.AppendUint16(dst, uint16(ulen))
	dst = append(dst, 0, 0)
	dst = append(dst, d.Payload...)
	sum := l2.Checksum(dst[udpStart:], l2.PseudoHeaderSum(s4[:], d4[:], protoUDP, ulen))
	if sum == 0 {
		sum = 0xffff // zero means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(dst[udpStart+6:], sum)
	return dst, nil
}
