package firewall

import (
	"encoding/binary"
	"net/netip"

	"burrow/l2"
)

const (
	ipProtoICMP   = 1
	ipProtoTCP    = 6
	ipProtoUDP    = 17
	ipProtoICMPv6 = 58
	ipProtoIGMP   = 2

	// maxExtensionHeaders bounds the IPv6 extension headers walked.
	maxExtensionHeaders = 4
)

// frameKind sorts frames before any rule is looked at.
type frameKind uint8

const (
	kindIP        frameKind = iota // IPv4 or IPv6 the rules decide on
	kindAlways                     // ARP, neighbour discovery, group membership (IGMP, MLD)
	kindOther                      // another ethertype
	kindMalformed                  // IP too short or inconsistent
)

// packet is what the firewall reads from an IP packet. Ports are zero for
// protocols without them and for fragments after the first; for ICMP
// echo both ports hold the echo identifier, so a reply finds its request.
type packet struct {
	proto        uint8
	src, dst     [16]byte // IPv4 as IPv4-mapped IPv6
	v4           bool
	sport, dport uint16
	icmpType     int16
}

// parse reads a frame's IP header and the first bytes of its payload.
func parse(frame []byte) (packet, frameKind) {
	var p packet
	eth, err := l2.ParseEthernet(frame)
	if err != nil {
		return p, kindMalformed
	}
	ip := frame[eth.PayloadOffset:]
	var l4 []byte
	firstFragment := true
	switch eth.EtherType {
	case l2.EtherTypeARP:
		return p, kindAlways
	case l2.EtherTypeIPv4:
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return p, kindMalformed
		}
		headerLen := int(ip[0]&0x0f) * 4
		if headerLen < 20 || len(ip) < headerLen {
			return p, kindMalformed
		}
		p.v4 = true
		p.proto = ip[9]
		p.src = [16]byte(netip.AddrFrom4([4]byte(ip[12:16])).As16())
		p.dst = [16]byte(netip.AddrFrom4([4]byte(ip[16:20])).As16())
		firstFragment = binary.BigEndian.Uint16(ip[6:8])&0x1fff == 0
		l4 = ip[headerLen:]
	case l2.EtherTypeIPv6:
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return p, kindMalformed
		}
		p.src, p.dst = [16]byte(ip[8:24]), [16]byte(ip[24:40])
		next, rest := ip[6], ip[40:]
		for range maxExtensionHeaders {
			switch next {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if len(rest) < 8 || len(rest) < (int(rest[1])+1)*8 {
					return p, kindMalformed
				}
				next, rest = rest[0], rest[(int(rest[1])+1)*8:]
				continue
			case 44: // fragment
				if len(rest) < 8 {
					return p, kindMalformed
				}
				firstFragment = firstFragment && binary.BigEndian.Uint16(rest[2:4])>>3 == 0
				next, rest = rest[0], rest[8:]
				continue
			}
			break
		}
		p.proto, l4 = next, rest
	default:
		return p, kindOther
	}
	if !firstFragment {
		return p, kindIP
	}
	switch p.proto {
	case ipProtoIGMP:
		return p, kindAlways // group membership, which multicast snooping reads
	case ipProtoTCP, ipProtoUDP:
		if len(l4) < 4 {
			return p, kindMalformed
		}
		p.sport, p.dport = binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4])
	case ipProtoICMP, ipProtoICMPv6:
		if len(l4) < 4 {
			return p, kindMalformed
		}
		p.icmpType = int16(l4[0])
		if p.proto == ipProtoICMPv6 && (l4[0] >= 133 && l4[0] <= 137 || l4[0] >= 130 && l4[0] <= 132 || l4[0] == 143) {
			// Router and neighbour solicitation and advertisement,
			// redirect; MLD's queries, reports and dones.
			return p, kindAlways
		}
		if isEcho(p.proto, l4[0]) && len(l4) >= 6 {
			id := binary.BigEndian.Uint16(l4[4:6])
			p.sport, p.dport = id, id
		}
	}
	return p, kindIP
}

// isEcho reports echo requests and replies, whose identifier pairs them.
func isEcho(proto, typ uint8) bool {
	if proto == ipProtoICMP {
		return typ == 8 || typ == 0
	}
	return typ == 128 || typ == 129
}

// key is the connection the packet belongs to, seen from this node: the
// local end is the source of an outbound packet, the destination of an
// inbound one.
func (p *packet) key(d Direction) connKey {
	if d == Outbound {
		return connKey{proto: p.proto, local: p.src, remote: p.dst, lport: p.sport, rport: p.dport}
	}
	return connKey{proto: p.proto, local: p.dst, remote: p.src, lport: p.dport, rport: p.sport}
}

// view is the packet's connection as a rule of direction rd sees it: for
// an inbound rule the destination port is the local one, for an outbound
// rule the remote one. d is the packet's own direction.
func (p *packet) view(rd, d Direction, icmpType int16) flowView {
	k := p.key(d)
	v := flowView{proto: p.proto, remote: addrOf(k.remote, p.v4), icmpType: icmpType}
	if rd == Inbound {
		v.dport = k.lport
	} else {
		v.dport = k.rport
	}
	return v
}

func addrOf(b [16]byte, v4 bool) netip.Addr {
	a := netip.AddrFrom16(b)
	if v4 {
		return a.Unmap()
	}
	return a
}
