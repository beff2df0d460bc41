package sim

import "burrow/wire"

// Kind classifies the datagrams a node sends.
type Kind int

// Datagram kinds. Handshakes and keepalives show in the datagram itself;
// the rest is encrypted, so the engine classifies a transport datagram by
// what the receiving core found inside it. One that never reached a
// running receiver, or that the receiver refused, is Undelivered.
const (
	KindHandshake Kind = iota
	KindKeepalive
	KindControl
	KindFlood
	KindData
	KindRelay
	KindUndelivered
	NumKinds
)

var kindNames = [NumKinds]string{"handshake", "keepalive", "control", "flood", "data", "relay", "undelivered"}

func (k Kind) String() string { return kindNames[k] }

func innerKind(in wire.Inner) Kind {
	switch in {
	case wire.InnerControl:
		return KindControl
	case wire.InnerFlood:
		return KindFlood
	case wire.InnerFrame:
		return KindData
	case wire.InnerRelayTo, wire.InnerRelayFrom:
		return KindRelay
	}
	return KindUndelivered
}

// Traffic counts datagrams and their bytes (UDP payload) by kind. A
// datagram is counted for its sender when its fate is known: when it is
// delivered (classified by what the receiver found) or lost. So a reading
// never holds a datagram that a later reading classifies differently, and
// the difference of two readings counts what was decided between them.
type Traffic struct {
	Messages [NumKinds]int64
	Bytes    [NumKinds]int64
}

// wireKind is what a datagram shows without decrypting it: a handshake, a
// keepalive (an empty transport message), or transport whose content only
// its receiver can tell (Undelivered until then).
func wireKind(b []byte) (k Kind, transport bool) {
	switch {
	case len(b) == 0:
	case wire.Type(b[0]) == wire.TypeTransport:
		if len(b) == wire.TransportOverhead {
			return KindKeepalive, false
		}
		return KindUndelivered, true
	case wire.Type(b[0]) >= wire.TypeHandshakeInit && wire.Type(b[0]) <= wire.TypeHandshakeFinish, wire.Type(b[0]) == wire.TypeHandshakeCookie:
		return KindHandshake, false
	}
	return KindUndelivered, false
}

func (t *Traffic) count(k Kind, size int) {
	t.Messages[k]++
	t.Bytes[k] += int64(size)
}

// Sub returns t minus an earlier reading.
func (t Traffic) Sub(earlier Traffic) Traffic {
	for k := range NumKinds {
		t.Messages[k] -= earlier.Messages[k]
		t.Bytes[k] -= earlier.Bytes[k]
	}
	return t
}

// Add returns t plus o.
func (t Traffic) Add(o Traffic) Traffic {
	for k := range NumKinds {
		t.Messages[k] += o.Messages[k]
		t.Bytes[k] += o.Bytes[k]
	}
	return t
}

// TotalBytes sums the bytes of every kind.
func (t Traffic) TotalBytes() int64 {
	var sum int64
	for _, b := range t.Bytes {
		sum += b
	}
	return sum
}

// TotalMessages sums the datagrams of every kind.
func (t Traffic) TotalMessages() int64 {
	var sum int64
	for _, m := range t.Messages {
		sum += m
	}
	return sum
}
