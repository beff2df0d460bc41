package wire

import (
	"encoding/binary"

	"burrow/l2"
)

// Inner is the kind of plaintext inside a transport message. An empty
// plaintext is a keepalive.
type Inner uint8

// Plaintext kinds.
const (
	InnerFrame   Inner = 1 // an Ethernet frame switched as unicast
	InnerFlood   Inner = 2 // a Bounded Flood message (see package flood)
	InnerControl Inner = 3 // an overlay control message
	// InnerRelayTo asks the receiving member to pass the datagram that
	// follows the peer's node ID on to that peer.
	InnerRelayTo Inner = 4
	// InnerRelayFrom delivers a datagram relayed from the node whose ID
	// precedes it.
	InnerRelayFrom Inner = 5
)

// RelayHeaderLen is the kind byte and node ID in front of a relayed
// datagram; a relayed datagram costs RelayHeaderLen plus a transport
// overhead more than a direct one.
const RelayHeaderLen = 1 + 16

// RelayOverhead is what relaying adds to a datagram.
const RelayOverhead = RelayHeaderLen + TransportOverhead

// Frame header: kind(1) flags(1) checksum start(2) checksum offset(2).
// The checksum fields carry "checksum partial" state from the sender's TAP
// to the receiver's, so neither side computes a full checksum.
const FrameHeaderLen = 6

const frameNeedsCsum = 1

// PutFrameHeader writes the frame header into b[:FrameHeaderLen].
func PutFrameHeader(b []byte, off l2.Offload) {
	_ = b[FrameHeaderLen-1]
	b[0] = byte(InnerFrame)
	b[1] = 0
	if off.NeedsCsum {
		b[1] = frameNeedsCsum
	}
	binary.LittleEndian.PutUint16(b[2:], off.CsumStart)
	binary.LittleEndian.PutUint16(b[4:], off.CsumOffset)
}

// ParseFrame splits a frame plaintext into its offload state and the
// Ethernet frame. A partial checksum must lie inside the frame.
func ParseFrame(b []byte) (l2.Offload, []byte, error) {
	var off l2.Offload
	if len(b) < FrameHeaderLen+14 {
		return off, nil, ErrShort
	}
	if Inner(b[0]) != InnerFrame || b[1]&^frameNeedsCsum != 0 {
		return off, nil, ErrField
	}
	frame := b[FrameHeaderLen:]
	if b[1]&frameNeedsCsum != 0 {
		off.NeedsCsum = true
		off.CsumStart = binary.LittleEndian.Uint16(b[2:])
		off.CsumOffset = binary.LittleEndian.Uint16(b[4:])
		if int(off.CsumStart)+int(off.CsumOffset)+2 > len(frame) || off.CsumStart < 14 {
			return off, nil, ErrField
		}
	} else if b[2] != 0 || b[3] != 0 || b[4] != 0 || b[5] != 0 {
		return off, nil, ErrField
	}
	return off, frame, nil
}
