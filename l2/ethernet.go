package l2

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// EtherType identifies the protocol carried in an Ethernet frame. Values below
// 0x0600 are 802.3 length fields, passed on unchanged like any other type.
type EtherType uint16

// EtherTypes burrow looks into.
const (
	EtherTypeIPv4 EtherType = 0x0800
	EtherTypeARP  EtherType = 0x0806
	EtherTypeVLAN EtherType = 0x8100 // 802.1Q tag
	EtherTypeIPv6 EtherType = 0x86DD
)

// Header lengths of an Ethernet frame without and with one 802.1Q tag.
const (
	EthernetHeaderLen       = 14
	EthernetTaggedHeaderLen = 18
)

// MaxFrameLen is the longest frame burrow handles: a 65535-byte IP packet
// behind a tagged Ethernet header.
const MaxFrameLen = EthernetTaggedHeaderLen + 65535

// Ethernet is a parsed Ethernet header.
type Ethernet struct {
	Dst, Src MAC
	// Tagged says the frame carries one 802.1Q tag; VLANTag is its tag
	// control information (priority, drop eligibility, VLAN ID).
	Tagged  bool
	VLANTag uint16
	// EtherType is the type of the payload, after the tag if there is one.
	EtherType EtherType
	// PayloadOffset is where the payload starts in the frame.
	PayloadOffset int
}

var (
	errShortEthernet = errors.New("l2: frame shorter than its Ethernet header")
	errShortVLAN     = errors.New("l2: frame shorter than its 802.1Q-tagged Ethernet header")
)

// ParseEthernet reads the Ethernet header of frame. A second tag inside the
// first is not unwrapped: it shows up as EtherType EtherTypeVLAN.
func ParseEthernet(frame []byte) (Ethernet, error) {
	var e Ethernet
	etherType, payloadOff, err := parseLinkType(frame)
	if err != nil {
		return e, err
	}
	copy(e.Dst[:], frame[0:6])
	copy(e.Src[:], frame[6:12])
	if payloadOff == EthernetTaggedHeaderLen {
		e.Tagged = true
		e.VLANTag = binary.BigEndian.Uint16(frame[14:16])
	}
	e.EtherType = etherType
	e.PayloadOffset = payloadOff
	return e, nil
}

// parseLinkType is ParseEthernet without the addresses, for the data path.
func parseLinkType(frame []byte) (EtherType, int, error) {
	if len(frame) < EthernetHeaderLen {
		return 0, 0, errShortEthernet
	}
	etherType := EtherType(binary.BigEndian.Uint16(frame[12:14]))
	if etherType != EtherTypeVLAN {
		return etherType, EthernetHeaderLen, nil
	}
	if len(frame) < EthernetTaggedHeaderLen {
		return 0, 0, errShortVLAN
	}
	return EtherType(binary.BigEndian.Uint16(frame[16:18])), EthernetTaggedHeaderLen, nil
}

// VLANID is the 12-bit VLAN identifier of the tag.
func (e Ethernet) VLANID() uint16 { return e.VLANTag & 0x0fff }

// AppendHeader appends the header described by e (PayloadOffset is ignored)
// to b and returns the extended slice.
func (e Ethernet) AppendHeader(b []byte) []byte {
	b = append(b, e.Dst[:]...)
	b = append(b, e.Src[:]...)
	if e.Tagged {
		b = binary.BigEndian.AppendUint16(b, uint16(EtherTypeVLAN))
		b = binary.BigEndian.AppendUint16(b, e.VLANTag)
	}
	return binary.BigEndian.AppendUint16(b, uint16(e.EtherType))
}

// SourceAddr is the address a frame says it comes from: an IPv4 or IPv6
// packet's source, or an ARP packet's sender IP. ok is false for other
// frames and ones too short to say.
func SourceAddr(frame []byte) (a netip.Addr, ok bool) {
	etherType, off, err := parseLinkType(frame)
	if err != nil {
		return a, false
	}
	p := frame[off:]
	switch etherType {
	case EtherTypeIPv4:
		if len(p) >= 20 && p[0]>>4 == 4 {
			return netip.AddrFrom4([4]byte(p[12:16])), true
		}
	case EtherTypeIPv6:
		if len(p) >= 40 && p[0]>>4 == 6 {
			return netip.AddrFrom16([16]byte(p[8:24])), true
		}
	case EtherTypeARP:
		if len(p) >= ARPLen && binary.BigEndian.Uint16(p[2:4]) == uint16(EtherTypeIPv4) && p[5] == arpProtocolLen {
			return netip.AddrFrom4([4]byte(p[14:18])), true
		}
	}
	return a, false
}
