package turnc

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/pion/stun/v4"
)

// ChannelData message (RFC 8656 §12.4), the relay's 4-byte data framing:
//
//	0                   1                   2                   3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Channel Number        |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Application Data ...                    |
//
// Over UDP no padding is needed; a received message may carry some.
const (
	channelDataHeaderLen = 4
	firstChannel         = 0x4000
	lastChannel          = 0x7FFF
	maxChannels          = lastChannel - firstChannel + 1
	// maxPayload is the largest datagram a ChannelData message carries in
	// one UDP datagram over IPv4.
	maxPayload = 65507 - channelDataHeaderLen
)

const (
	stunHeaderLen = 20
	magicCookie   = 0x2112A442
	// protoUDP is REQUESTED-TRANSPORT's value for UDP relaying.
	protoUDP = 17
)

// dataIndication is the message type of a Data indication, in wire form.
var dataIndication = stun.NewType(stun.MethodData, stun.ClassIndication).Value()

// appendChannelData frames payload for channel number.
func appendChannelData(dst []byte, number uint16, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, number)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(payload)))
	return append(dst, payload...)
}

// parseChannelData returns the channel number and payload of a ChannelData
// message; ok is false for anything else.
func parseChannelData(b []byte) (number uint16, payload []byte, ok bool) {
	if len(b) < channelDataHeaderLen || b[0]&0xC0 != 0x40 {
		return 0, nil, false
	}
	n := int(binary.BigEndian.Uint16(b[2:4]))
	if channelDataHeaderLen+n > len(b) {
		return 0, nil, false
	}
	return binary.BigEndian.Uint16(b[0:2]), b[channelDataHeaderLen : channelDataHeaderLen+n], true
}

// parseDataIndication returns the peer and payload of a Data indication
// without copying or allocating; ok is false when b is not a well-formed
// one.
func parseDataIndication(b []byte) (peer netip.AddrPort, payload []byte, ok bool) {
	if !stun.IsMessage(b) || binary.BigEndian.Uint16(b[0:2]) != dataIndication {
		return netip.AddrPort{}, nil, false
	}
	size := int(binary.BigEndian.Uint16(b[2:4]))
	if stunHeaderLen+size > len(b) {
		return netip.AddrPort{}, nil, false
	}
	txID := b[8:stunHeaderLen]
	attrs := b[stunHeaderLen : stunHeaderLen+size]
	var havePeer, haveData, afterIntegrity bool
	for len(attrs) > 0 {
		if len(attrs) < 4 {
			return netip.AddrPort{}, nil, false
		}
		typ := stun.AttrType(binary.BigEndian.Uint16(attrs[0:2]))
		n := int(binary.BigEndian.Uint16(attrs[2:4]))
		padded := 4 + (n+3)&^3
		if padded > len(attrs) {
			return netip.AddrPort{}, nil, false
		}
		value := attrs[4 : 4+n]
		// As in pion/stun, the first of repeated attributes counts, and
		// those after MESSAGE-INTEGRITY are ignored (RFC 8489 §14.5).
		switch {
		case afterIntegrity:
		case typ == stun.AttrMessageIntegrity || typ == stun.AttrMessageIntegritySHA256:
			afterIntegrity = true
		case typ == stun.AttrXORPeerAddress && !havePeer:
			if peer, havePeer = parseXORAddress(value, txID); !havePeer {
				return netip.AddrPort{}, nil, false
			}
		case typ == stun.AttrData && !haveData:
			payload, haveData = value, true
		}
		attrs = attrs[padded:]
	}
	return peer, payload, havePeer && haveData
}

// parseXORAddress decodes an XOR-PEER-ADDRESS value (RFC 8489 §14.2).
func parseXORAddress(v, txID []byte) (netip.AddrPort, bool) {
	if len(v) < 4 {
		return netip.AddrPort{}, false
	}
	port := binary.BigEndian.Uint16(v[2:4]) ^ magicCookie>>16
	var key [16]byte
	binary.BigEndian.PutUint32(key[:4], magicCookie)
	copy(key[4:], txID)
	switch {
	case v[1] == 0x01 && len(v) == 8:
		var ip [4]byte
		for i := range ip {
			ip[i] = v[4+i] ^ key[i]
		}
		return netip.AddrPortFrom(netip.AddrFrom4(ip), port), true
	case v[1] == 0x02 && len(v) == 20:
		var ip [16]byte
		for i := range ip {
			ip[i] = v[4+i] ^ key[i]
		}
		return netip.AddrPortFrom(netip.AddrFrom16(ip), port), true
	}
	return netip.AddrPort{}, false
}

// xorAddressAttr is an XOR-encoded address attribute for stun.Build.
type xorAddressAttr struct {
	typ  stun.AttrType
	addr netip.AddrPort
}

func (a xorAddressAttr) AddTo(m *stun.Message) error {
	x := stun.XORMappedAddress{IP: a.addr.Addr().Unmap().AsSlice(), Port: int(a.addr.Port())}
	return x.AddToAs(m, a.typ)
}

// getXORAddress reads an XOR-encoded address attribute of a response.
func getXORAddress(m *stun.Message, typ stun.AttrType) (netip.AddrPort, error) {
	var x stun.XORMappedAddress
	if err := x.GetFromAs(m, typ); err != nil {
		return netip.AddrPort{}, err
	}
	ip, _ := netip.AddrFromSlice(x.IP)
	return netip.AddrPortFrom(ip.Unmap(), uint16(x.Port)), nil
}

func lifetimeAttr(d time.Duration) stun.RawAttribute {
	return stun.RawAttribute{Type: stun.AttrLifetime, Value: binary.BigEndian.AppendUint32(nil, uint32(d/time.Second))}
}

func getLifetime(m *stun.Message) (time.Duration, error) {
	v, err := m.Get(stun.AttrLifetime)
	if err != nil {
		return 0, err
	}
	if len(v) != 4 {
		return 0, stun.ErrAttributeSizeInvalid
	}
	return time.Duration(binary.BigEndian.Uint32(v)) * time.Second, nil
}

func channelNumberAttr(number uint16) stun.RawAttribute {
	return stun.RawAttribute{Type: stun.AttrChannelNumber, Value: []byte{byte(number >> 8), byte(number), 0, 0}}
}

var requestedTransportUDP = stun.RawAttribute{Type: stun.AttrRequestedTransport, Value: []byte{protoUDP, 0, 0, 0}}
