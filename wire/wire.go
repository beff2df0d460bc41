// Package wire defines burrow's outer datagram formats: the headers of
// handshake and transport messages on the UDP socket, and the kinds of
// plaintext a transport message carries. Every decoder here rejects
// garbage with an error and never panics; each has a fuzz target.
//
// Outer datagrams start with a type byte in 0xB0-0xBF. That range cannot
// collide with STUN (first two bits zero), TURN channel data (0x40-0x7F) or
// DTLS (20-63), so one socket can carry all of them.
package wire

import (
	"encoding/binary"
	"errors"
)

// Type is the first byte of every burrow datagram.
type Type uint8

// Datagram types.
const (
	TypeHandshakeInit   Type = 0xB1
	TypeHandshakeReply  Type = 0xB2
	TypeHandshakeFinish Type = 0xB3
	TypeTransport       Type = 0xB4
	// TypeHandshakeCookie answers an initiation that a busy node will
	// not take on trust: the initiator sends it again with the cookie,
	// which proves it receives at its address.
	TypeHandshakeCookie Type = 0xB5
)

// IsBurrow reports whether b starts with a burrow datagram type.
func IsBurrow(b []byte) bool { return len(b) > 0 && b[0]&0xF0 == 0xB0 }

// Version is the handshake protocol version carried in handshake headers.
const Version = 1

// Handshake header: type(1) version(1) reserved(2) sender index(4)
// receiver index(4), then the Noise message.
const HandshakeHeaderLen = 12

// HandshakeHeader is the cleartext header in front of a Noise handshake message.
type HandshakeHeader struct {
	Type     Type
	Sender   uint32 // the sender's session index for this handshake
	Receiver uint32 // the receiver's session index; zero in an init
}

// AppendHandshake appends a handshake header and the Noise message body.
func AppendHandshake(dst []byte, h HandshakeHeader, noiseMsg []byte) []byte {
	dst = append(dst, byte(h.Type), Version, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, h.Sender)
	dst = binary.LittleEndian.AppendUint32(dst, h.Receiver)
	return append(dst, noiseMsg...)
}

// Errors returned by the decoders.
var (
	ErrShort   = errors.New("wire: datagram too short")
	ErrType    = errors.New("wire: unknown datagram type")
	ErrVersion = errors.New("wire: unsupported version")
	ErrField   = errors.New("wire: invalid field")
)

// ParseHandshake splits a handshake datagram into header and Noise message.
func ParseHandshake(b []byte) (HandshakeHeader, []byte, error) {
	var h HandshakeHeader
	if len(b) < HandshakeHeaderLen {
		return h, nil, ErrShort
	}
	h.Type = Type(b[0])
	switch h.Type {
	case TypeHandshakeInit, TypeHandshakeReply, TypeHandshakeFinish, TypeHandshakeCookie:
	default:
		return h, nil, ErrType
	}
	if b[1] != Version {
		return h, nil, ErrVersion
	}
	if b[2] != 0 || b[3] != 0 {
		return h, nil, ErrField
	}
	h.Sender = binary.LittleEndian.Uint32(b[4:])
	h.Receiver = binary.LittleEndian.Uint32(b[8:])
	// An initiation names only its sender, a cookie only the initiation
	// it answers (its receiver), the others both.
	if (h.Sender == 0) != (h.Type == TypeHandshakeCookie) || (h.Receiver == 0) != (h.Type == TypeHandshakeInit) {
		return h, nil, ErrField
	}
	return h, b[HandshakeHeaderLen:], nil
}

// Transport header: type(1) reserved(3) receiver index(4) counter(8).
// Bytes 4..16 double as the AEAD nonce, so sealing needs no scratch space.
const (
	TransportHeaderLen = 16
	TagLen             = 16
	// TransportOverhead is what a transport message adds to its plaintext.
	TransportOverhead = TransportHeaderLen + TagLen
)

// PutTransportHeader writes a transport header into b[:TransportHeaderLen].
func PutTransportHeader(b []byte, receiver uint32, counter uint64) {
	_ = b[TransportHeaderLen-1]
	b[0], b[1], b[2], b[3] = byte(TypeTransport), 0, 0, 0
	binary.LittleEndian.PutUint32(b[4:], receiver)
	binary.LittleEndian.PutUint64(b[8:], counter)
}

// ParseTransportHeader reads the receiver index and counter of a transport
// datagram; the ciphertext is b[TransportHeaderLen:].
func ParseTransportHeader(b []byte) (receiver uint32, counter uint64, err error) {
	if len(b) < TransportOverhead {
		return 0, 0, ErrShort
	}
	if Type(b[0]) != TypeTransport {
		return 0, 0, ErrType
	}
	if b[1] != 0 || b[2] != 0 || b[3] != 0 {
		return 0, 0, ErrField
	}
	return binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint64(b[8:]), nil
}

// Nonce returns the 12 header bytes used as the AEAD nonce.
func Nonce(header []byte) []byte { return header[4:TransportHeaderLen] }

// AdditionalData returns the header bytes authenticated but not in the nonce.
func AdditionalData(header []byte) []byte { return header[:4] }
