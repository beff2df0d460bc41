package nat

import (
	"errors"
	"net/netip"

	"github.com/pion/stun/v4"
)

// IsSTUN reports whether b looks like a STUN message, which shares the
// socket with burrow's own datagrams (those start with 0xB0-0xBF).
func IsSTUN(b []byte) bool { return stun.IsMessage(b) }

// TxID is a STUN transaction ID.
type TxID [stun.TransactionIDSize]byte

// Message is what burrow reads from a STUN message.
type Message struct {
	Request bool // a binding request; otherwise a binding success response
	// ChangePort: the request asks to be answered from the server's other
	// port (CHANGE-REQUEST, RFC 5780), to test the NAT's filtering.
	ChangePort bool
	TxID       TxID
	Mapped     netip.AddrPort // the XOR-MAPPED-ADDRESS of a response
}

// Errors.
var (
	ErrNotBinding = errors.New("nat: not a STUN binding request or success")
	ErrNoAddress  = errors.New("nat: binding success without a mapped address")
	// ErrWouldAmplify: anyone can send a request from a forged address,
	// so a request shorter than its answer gets none.
	ErrWouldAmplify = errors.New("nat: the answer would be longer than the request")
)

// Parse decodes a binding request or binding success response.
func Parse(b []byte) (Message, error) {
	var m Message
	msg := &stun.Message{Raw: append([]byte(nil), b...)}
	if err := msg.Decode(); err != nil {
		return m, err
	}
	m.TxID = msg.TransactionID
	switch msg.Type {
	case stun.BindingRequest:
		m.Request = true
		if v, err := msg.Get(stun.AttrChangeRequest); err == nil && len(v) == 4 {
			m.ChangePort = v[3]&changePortFlag != 0
		}
		return m, nil
	case stun.BindingSuccess:
		var xor stun.XORMappedAddress
		if err := xor.GetFrom(msg); err != nil {
			return m, ErrNoAddress
		}
		addr, ok := netip.AddrFromSlice(xor.IP)
		if !ok || xor.Port <= 0 || xor.Port > 65535 {
			return m, ErrNoAddress
		}
		m.Mapped = netip.AddrPortFrom(addr.Unmap(), uint16(xor.Port))
		return m, nil
	}
	return m, ErrNotBinding
}

// STUN sizes (RFC 5389): the message header, an attribute's header.
const (
	stunHeaderLen     = 20
	stunAttrHeaderLen = 4
	fingerprintLen    = stunAttrHeaderLen + 4
)

// MaxBindingSuccessLen is the longest answer a STUN server of burrow's
// sends: header, an IPv6 XOR-MAPPED-ADDRESS (family, port, 16 bytes) and
// FINGERPRINT.
const MaxBindingSuccessLen = stunHeaderLen + stunAttrHeaderLen + 4 + 16 + fingerprintLen

// requestPadding fills a request with a PADDING attribute (RFC 5780,
// section 7.6) up to MaxBindingSuccessLen, so that a server answers no
// more bytes than it was sent and cannot be used to amplify traffic
// toward a forged source address.
var requestPadding = stun.RawAttribute{Type: stun.AttrPadding,
	Value: make([]byte, MaxBindingSuccessLen-stunHeaderLen-stunAttrHeaderLen-fingerprintLen)}

// BindingRequest builds a request with the given transaction ID, padded to
// the length of the longest answer.
func BindingRequest(id TxID) []byte {
	msg, err := stun.Build(stun.BindingRequest, stun.NewTransactionIDSetter(id), requestPadding, stun.Fingerprint)
	if err != nil {
		panic("nat: building a binding request: " + err.Error())
	}
	return msg.Raw
}

// changePortFlag is CHANGE-REQUEST's "change port" bit (RFC 5780).
const changePortFlag = 0x02

// ChangePortRequest builds a request asking to be answered from the
// server's other port, padded like BindingRequest.
func ChangePortRequest(id TxID) []byte {
	changePort := stun.RawAttribute{Type: stun.AttrChangeRequest, Value: []byte{0, 0, 0, changePortFlag}}
	msg, err := stun.Build(stun.BindingRequest, stun.NewTransactionIDSetter(id), changePort, requestPadding, stun.Fingerprint)
	if err != nil {
		panic("nat: building a binding request: " + err.Error())
	}
	return msg.Raw
}

// Answer is the answer to request m, which was reqLen bytes long, from
// from: ErrWouldAmplify when it would be longer than the request.
func Answer(m Message, reqLen int, from netip.AddrPort) ([]byte, error) {
	answer := BindingSuccess(m.TxID, from)
	if len(answer) > reqLen {
		return nil, ErrWouldAmplify
	}
	return answer, nil
}

// SecondPort is where a beacon at beacon answers STUN too: the port after
// its own. Asked at two ports, a single beacon sees whether a NAT maps
// every destination to a new port. ok is false for the last port.
func SecondPort(beacon netip.AddrPort) (second netip.AddrPort, ok bool) {
	if beacon.Port() == 65535 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(beacon.Addr(), beacon.Port()+1), true
}

// BindingSuccess answers a request: the requester's address as we saw it.
func BindingSuccess(id TxID, mapped netip.AddrPort) []byte {
	a := mapped.Addr().Unmap()
	msg, err := stun.Build(stun.BindingSuccess, stun.NewTransactionIDSetter(id),
		&stun.XORMappedAddress{IP: a.AsSlice(), Port: int(mapped.Port())}, stun.Fingerprint)
	if err != nil {
		panic("nat: building a binding success: " + err.Error())
	}
	return msg.Raw
}
