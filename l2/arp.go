package l2

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// ARPOp is the operation of an ARP packet.
type ARPOp uint16

// The two ARP operations burrow speaks.
const (
	ARPRequest ARPOp = 1
	ARPReply   ARPOp = 2
)

// ARPLen is the length of an ARP packet for IPv4 over Ethernet.
const ARPLen = 28

// ARP is an ARP packet for IPv4 over Ethernet.
//
// A gratuitous ARP is a request with SenderIP == TargetIP and a zero
// TargetMAC, sent to Broadcast.
type ARP struct {
	Op                   ARPOp
	SenderMAC, TargetMAC MAC
	SenderIP, TargetIP   netip.Addr
}

// Fixed fields of an ARP packet for IPv4 over Ethernet.
const (
	arpHardwareEthernet = 1
	arpHardwareLen      = 6
	arpProtocolLen      = 4
)

var (
	errShortARP       = errors.New("l2: ARP packet shorter than 28 bytes")
	errARPNotEthIPv4  = errors.New("l2: ARP packet is not IPv4 over Ethernet")
	errARPOp          = errors.New("l2: ARP operation is neither request nor reply")
	errARPAddrNotIPv4 = errors.New("l2: ARP addresses must be IPv4")
)

// ParseARP reads an ARP packet (the payload of an Ethernet frame; trailing
// link padding is ignored).
func ParseARP(b []byte) (ARP, error) {
	var a ARP
	if len(b) < ARPLen {
		return a, errShortARP
	}
	if binary.BigEndian.Uint16(b[0:2]) != arpHardwareEthernet ||
		EtherType(binary.BigEndian.Uint16(b[2:4])) != EtherTypeIPv4 ||
		b[4] != arpHardwareLen || b[5] != arpProtocolLen {
		return a, errARPNotEthIPv4
	}
	a.Op = ARPOp(binary.BigEndian.Uint16(b[6:8]))
	if a.Op != ARPRequest && a.Op != ARPReply {
		return a, errARPOp
	}
	copy(a.SenderMAC[:], b[8:14])
	a.SenderIP = netip.AddrFrom4([4]byte(b[14:18]))
	copy(a.TargetMAC[:], b[18:24])
	a.TargetIP = netip.AddrFrom4([4]byte(b[24:28]))
	return a, nil
}

// AppendARP appends the 28-byte ARP packet a to b. Both IP addresses must be
// IPv4 (IPv4-mapped IPv6 is accepted); b is returned unchanged otherwise.
func AppendARP(b []byte, a ARP) ([]byte, error) {
	sender, target := a.SenderIP.Unmap(), a.TargetIP.Unmap()
	if !sender.Is4() || !target.Is4() {
		return b, errARPAddrNotIPv4
	}
	b = binary.BigEndian.AppendUint16(b, arpHardwareEthernet)
	b = binary.BigEndian.AppendUint16(b, uint16(EtherTypeIPv4))
	b = append(b, arpHardwareLen, arpProtocolLen)
	b = binary.BigEndian.AppendUint16(b, uint16(a.Op))
	senderIP, targetIP := sender.As4(), target.As4()
	b = append(b, a.SenderMAC[:]...)
	b = append(b, senderIP[:]...)
	b = append(b, a.TargetMAC[:]...)
	return append(b, targetIP[:]...), nil
}
