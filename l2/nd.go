package l2

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"github.com/mdlayher/ndp"
)

// IPv6 neighbour discovery (RFC 4861) in Ethernet frames. The messages
// themselves are mdlayher/ndp's; this finds them in frames, so that a node
// can learn which MAC holds an IPv6 address and answer solicitations the
// way it answers ARP, and builds the frame of an answer.

// ND is a neighbour solicitation or advertisement found in a frame.
type ND struct {
	Eth      Ethernet
	Src, Dst netip.Addr // the IPv6 header's addresses
	Message  ndp.Message
}

const (
	protoICMPv6 = 58
	// ndHopLimit is the only hop limit a neighbour discovery message may
	// carry: anything less was forwarded by a router, so is not from the
	// link (RFC 4861 §7.1).
	ndHopLimit                = 255
	icmpNeighborSolicitation  = 135
	icmpNeighborAdvertisement = 136
)

var errNotND = errors.New("l2: frame is not a neighbour solicitation or advertisement")

// ParseND returns the neighbour solicitation or advertisement a frame
// carries: IPv6 straight to ICMPv6 with hop limit 255 and a valid checksum.
func ParseND(frame []byte) (ND, error) {
	var nd ND
	eth, err := ParseEthernet(frame)
	if err != nil || eth.EtherType != EtherTypeIPv6 {
		return nd, errNotND
	}
	p, err := parseIP(frame)
	if err != nil || p.proto != protoICMPv6 {
		return nd, errNotND
	}
	ip, icmp := frame[p.ipOff:p.l4Off], frame[p.l4Off:p.end]
	if ip[7] != ndHopLimit || len(icmp) < 4 || (icmp[0] != icmpNeighborSolicitation && icmp[0] != icmpNeighborAdvertisement) {
		return nd, errNotND
	}
	if Checksum(icmp, PseudoHeaderSum(ip[8:24], ip[24:40], protoICMPv6, len(icmp))) != 0 {
		return nd, errNotND
	}
	m, err := ndp.ParseMessage(icmp)
	if err != nil {
		return nd, err
	}
	nd.Eth, nd.Message = eth, m
	nd.Src, nd.Dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
	return nd, nil
}

// AnnouncesAddress reports, without checking it further, whether a frame
// tells which MAC holds an address or which groups a host listens to: ARP,
// an IPv6 neighbour advertisement, an IGMP or MLD message. It is cheap
// enough for every frame of a flow, so that the rare announcement can take
// the slow path, where the node learns from it.
func AnnouncesAddress(frame []byte) bool {
	etherType, off, err := parseLinkType(frame)
	if err != nil {
		return false
	}
	ip := frame[off:]
	return etherType == EtherTypeARP || isGroupReport(etherType, ip) || etherType == EtherTypeIPv6 && len(ip) > ipv6HeaderLen && ip[6] == protoICMPv6 && ip[7] == ndHopLimit && ip[ipv6HeaderLen] == icmpNeighborAdvertisement
}

// AdvertisedAddr is the target address of an IPv6 neighbour
// advertisement, the address whose link-layer address it gives: the one
// the sender says it holds. ok is false for any other frame.
func AdvertisedAddr(frame []byte) (netip.Addr, bool) {
	etherType, off, err := parseLinkType(frame)
	if err != nil || etherType != EtherTypeIPv6 {
		return netip.Addr{}, false
	}
	ip := frame[off:]
	const target = ipv6HeaderLen + 8 // after type, code, checksum and flags
	if len(ip) < target+16 || ip[6] != protoICMPv6 || ip[7] != ndHopLimit || ip[ipv6HeaderLen] != icmpNeighborAdvertisement {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16([16]byte(ip[target : target+16])), true
}

// LinkLayerAddress returns the source (for a solicitation) or target (for
// an advertisement) link-layer address option of an ND message.
func (nd ND) LinkLayerAddress() (MAC, bool) {
	var opts []ndp.Option
	want := ndp.Source
	switch m := nd.Message.(type) {
	case *ndp.NeighborSolicitation:
		opts = m.Options
	case *ndp.NeighborAdvertisement:
		opts, want = m.Options, ndp.Target
	}
	for _, o := range opts {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == want && len(lla.Addr) == len(MAC{}) {
			return MAC(lla.Addr), true
		}
	}
	return MAC{}, false
}

// AppendNeighborAdvertisement appends the frame of a solicited
// advertisement that target (holding address at MAC targetMAC, a router
// or not) sends to the host that asked (askerMAC, askerAddr).
func AppendNeighborAdvertisement(b []byte, askerMAC MAC, askerAddr netip.Addr, targetMAC MAC, target netip.Addr, router bool) ([]byte, error) {
	na := &ndp.NeighborAdvertisement{
		Router: router, Solicited: true, Override: true, TargetAddress: target,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: net.HardwareAddr(targetMAC[:])}},
	}
	return AppendND(b, ND{Eth: Ethernet{Dst: askerMAC, Src: targetMAC}, Src: target, Dst: askerAddr, Message: na})
}

// AppendND appends the frame of an ND message: nd.Eth's addresses, an IPv6
// header from nd.Src to nd.Dst with hop limit 255, and the message with
// its checksum.
func AppendND(b []byte, nd ND) ([]byte, error) {
	icmp, err := ndp.MarshalMessageChecksum(nd.Message, nd.Src, nd.Dst)
	if err != nil {
		return b, err
	}
	b = (Ethernet{Dst: nd.Eth.Dst, Src: nd.Eth.Src, EtherType: EtherTypeIPv6}).AppendHeader(b)
	b = append(b, 6<<4, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(icmp)))
	b = append(b, protoICMPv6, ndHopLimit)
	src, dst := nd.Src.As16(), nd.Dst.As16()
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	return append(b, icmp...), nil
}
