package l2

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Multicast group membership: IGMP (v1-v3, RFC 3376) for IPv4 and MLD
// (v1, v2, RFC 3810) for IPv6, as a snooping switch reads them: this finds
// them in frames, says which groups a report joins and leaves, and builds
// the general queries that make hosts report. (gopacket decodes them too,
// but its layers package costs every daemon ~7 MiB of memory at start.)

// GroupReport is what a membership report says: the host that sent it and
// the groups it listens to from now on, or no longer.
type GroupReport struct {
	Host         MAC
	Joined, Left []netip.Addr
	IPv6         bool
	reported     int
}

const (
	protoIGMP   = 2
	protoHopOpt = 0 // IPv6 hop-by-hop options, which MLD messages carry

	igmpQuery    = 0x11
	igmpV1Report = 0x12
	igmpV2Report = 0x16
	igmpV2Leave  = 0x17
	igmpV3Report = 0x22

	icmpMLDQuery    = 130
	icmpMLDv1Report = 131
	icmpMLDv1Done   = 132
	icmpMLDv2Report = 143
)

var errNotGroupReport = errors.New("l2: frame is not a multicast group membership report")

// groupPacket finds the IGMP message or the ICMPv6 message behind an IPv6
// hop-by-hop header in a frame; ok is false for other frames.
func groupPacket(frame []byte) (msg []byte, ipv6, ok bool) {
	p, err := parseIP(frame)
	if err != nil || p.fragment {
		return nil, false, false
	}
	if !p.ipv6 {
		return frame[p.l4Off:p.end], false, p.proto == protoIGMP
	}
	if p.proto != protoHopOpt {
		return nil, true, false
	}
	hbh := frame[p.l4Off:p.end]
	if len(hbh) < 8 || hbh[0] != protoICMPv6 {
		return nil, true, false
	}
	n := (int(hbh[1]) + 1) * 8
	if n > len(hbh) {
		return nil, true, false
	}
	return hbh[n:], true, true
}

// ParseGroupReport reads an IGMP or MLD membership report, leave or done
// message from a frame.
func ParseGroupReport(frame []byte) (GroupReport, error) {
	var r GroupReport
	msg, ipv6, ok := groupPacket(frame)
	if !ok || len(msg) < 8 {
		return r, errNotGroupReport
	}
	copy(r.Host[:], frame[6:12])
	r.IPv6 = ipv6
	var err error
	switch {
	case !ipv6 && (msg[0] == igmpV1Report || msg[0] == igmpV2Report):
		r.add(msg[4:8], true)
	case !ipv6 && msg[0] == igmpV2Leave:
		r.add(msg[4:8], false)
	case !ipv6 && msg[0] == igmpV3Report:
		err = r.records(msg[8:], binary.BigEndian.Uint16(msg[6:8]), 4)
	case ipv6 && (msg[0] == icmpMLDv1Report || msg[0] == icmpMLDv1Done) && len(msg) >= 24:
		r.add(msg[8:24], msg[0] == icmpMLDv1Report)
	case ipv6 && msg[0] == icmpMLDv2Report:
		err = r.records(msg[8:], binary.BigEndian.Uint16(msg[6:8]), 16)
	default:
		return r, errNotGroupReport
	}
	if err != nil || r.reported == 0 {
		return r, errNotGroupReport
	}
	return r, nil
}

// records reads n IGMPv3 or MLDv2 group records (the same layout, with
// addresses of addrLen bytes): type, aux length, source count, group,
// sources, aux data.
func (r *GroupReport) records(b []byte, n uint16, addrLen int) error {
	for range n {
		if len(b) < 4+addrLen {
			return errNotGroupReport
		}
		sources := int(binary.BigEndian.Uint16(b[2:4]))
		size := 4 + addrLen + sources*addrLen + int(b[1])*4
		if len(b) < size {
			return errNotGroupReport
		}
		r.record(b[0], sources, b[4:4+addrLen])
		b = b[size:]
	}
	return nil
}

// record reads an IGMPv3 or MLDv2 group record (their types are the same):
// excluding sources means listening to the group; including some means
// listening to those; including none means not listening.
func (r *GroupReport) record(kind uint8, sources int, group []byte) {
	const (
		isInclude, isExclude, toInclude, toExclude, allow = 1, 2, 3, 4, 5
	)
	switch kind {
	case isExclude, toExclude:
		r.add(group, true)
	case isInclude, toInclude, allow:
		r.add(group, sources > 0)
	}
}

// add notes a join or a leave of a multicast group of the report's family.
func (r *GroupReport) add(group []byte, joined bool) {
	a, ok := netip.AddrFromSlice(group)
	if !ok || a.Unmap().Is4() == r.IPv6 || !a.Unmap().IsMulticast() {
		return
	}
	r.reported++
	if joined {
		r.Joined = append(r.Joined, a.Unmap())
	} else {
		r.Left = append(r.Left, a.Unmap())
	}
}

// isGroupReport reports, without checking it further, whether an IP packet
// is an IGMP message or an IPv6 packet with hop-by-hop options (which MLD
// messages are): cheap, for the data path.
func isGroupReport(etherType EtherType, ip []byte) bool {
	switch etherType {
	case EtherTypeIPv4:
		return len(ip) >= ipv4MinHeaderLen && ip[9] == protoIGMP
	case EtherTypeIPv6:
		return len(ip) >= ipv6HeaderLen && ip[6] == protoHopOpt
	}
	return false
}

// SnoopedGroup is the multicast group a frame is addressed to, when a
// snooping switch decides who gets it (IsSnooped).
func SnoopedGroup(frame []byte) (netip.Addr, bool) {
	if frame[0]&1 == 0 {
		return netip.Addr{}, false
	}
	etherType, off, err := parseLinkType(frame)
	if err != nil {
		return netip.Addr{}, false
	}
	ip := frame[off:]
	switch etherType {
	case EtherTypeIPv4:
		if len(ip) < ipv4MinHeaderLen || ip[0]>>4 != 4 {
			return netip.Addr{}, false
		}
		g := netip.AddrFrom4([4]byte(ip[16:20]))
		return g, IsSnooped(g)
	case EtherTypeIPv6:
		if len(ip) < ipv6HeaderLen || ip[0]>>4 != 6 {
			return netip.Addr{}, false
		}
		g := netip.AddrFrom16([16]byte(ip[24:40]))
		return g, IsSnooped(g)
	}
	return netip.Addr{}, false
}

// IsSnooped reports whether a group is one snooping decides on: a
// multicast group beyond the link-local ones (224.0.0.0/24, and IPv6
// scopes up to link-local), which every host gets like broadcast.
func IsSnooped(g netip.Addr) bool {
	if g.Is4() {
		return g.IsMulticast() && !g.IsLinkLocalMulticast()
	}
	return g.IsMulticast() && g.As16()[1]&0x0f > 2
}

// AppendIGMPQuery appends the frame of an IGMPv3 general query from the
// unspecified address (as a snooping switch sends when no router does),
// asking hosts to report within maxResponse tenths of a second.
func AppendIGMPQuery(b []byte, src MAC, maxResponse uint8) []byte {
	b = (Ethernet{Dst: MAC{0x01, 0x00, 0x5e, 0, 0, 1}, Src: src, EtherType: EtherTypeIPv4}).AppendHeader(b)
	ip := len(b)
	// IPv4 with a router alert option (RFC 2113), TTL 1, protocol IGMP.
	b = append(b, 0x46, 0xc0, 0, 36, 0, 0, 0x40, 0, 1, protoIGMP, 0, 0, 0, 0, 0, 0, 224, 0, 0, 1, 0x94, 0x04, 0, 0)
	binary.BigEndian.PutUint16(b[ip+10:], IPv4HeaderChecksum(b[ip:]))
	q := len(b)
	// Type, max response, checksum, group 0, S/QRV 2, QQIC 125 s, no sources.
	b = append(b, igmpQuery, maxResponse, 0, 0, 0, 0, 0, 0, 2, 125, 0, 0)
	binary.BigEndian.PutUint16(b[q+2:], Checksum(b[q:], 0))
	return b
}

// AppendMLDQuery appends the frame of an MLDv2 general query from src, a
// link-local address (hosts ignore others), asking hosts to report within
// maxResponse milliseconds.
func AppendMLDQuery(b []byte, srcMAC MAC, src netip.Addr, maxResponse uint16) []byte {
	allNodes := netip.AddrFrom16([16]byte{0xff, 0x02, 15: 1})
	b = (Ethernet{Dst: MAC{0x33, 0x33, 0, 0, 0, 1}, Src: srcMAC, EtherType: EtherTypeIPv6}).AppendHeader(b)
	const hbhLen, queryLen = 8, 28
	b = append(b, 6<<4, 0, 0, 0, 0, hbhLen+queryLen, protoHopOpt, 1)
	s, d := src.As16(), allNodes.As16()
	b = append(b, s[:]...)
	b = append(b, d[:]...)
	// Hop-by-hop: next header ICMPv6, router alert (MLD), padding.
	b = append(b, protoICMPv6, 0, 5, 2, 0, 0, 1, 0)
	q := len(b)
	b = append(b, icmpMLDQuery, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, maxResponse)
	b = append(b, make([]byte, 18)...) // reserved, group :: (general)
	b = append(b, 2, 125, 0, 0)        // S/QRV 2, QQIC 125 s, no sources
	sum := Checksum(b[q:], PseudoHeaderSum(s[:], d[:], protoICMPv6, queryLen))
	binary.BigEndian.PutUint16(b[q+2:], sum)
	return b
}
