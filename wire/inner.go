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
	// InnerProbe asks the peer to answer at once with an InnerProbeReply
	// carrying the same stamp: a link that sends and hears nothing back
	// finds out within round trips whether the peer is still there.
	InnerProbe      Inner = 6
	InnerProbeReply Inner = 7
	// InnerRouted carries a unicast frame toward the bridge whose node ID
	// follows, greedily over the ring: every hop forwards it to a neighbour
	// strictly closer to that bridge the short way round, so it cannot loop.
	// It is how a frame keeps moving when the link its learned path used
	// has failed. A hop that finds no neighbour closer the short way sends
	// it on as InnerRoutedOnward: from there every hop gets strictly closer
	// clockwise, which a ring of successor links always allows.
	InnerRouted       Inner = 8
	InnerRoutedOnward Inner = 9
	// InnerRevocation carries a revocation signed by the network's CA
	// (identity.Revocation); every member passes a new one on to its
	// neighbours once.
	InnerRevocation Inner = 10
)

// ProbeLen is the size of a probe or probe reply plaintext: the kind and
// the prober's clock reading, echoed back to measure the round trip.
const ProbeLen = 1 + 8

// AppendProbe appends a probe (or, with reply, its answer) stamped at.
func AppendProbe(dst []byte, reply bool, stamp int64) []byte {
	kind := InnerProbe
	if reply {
		kind = InnerProbeReply
	}
	dst = append(dst, byte(kind))
	return binary.LittleEndian.AppendUint64(dst, uint64(stamp))
}

// ParseProbe reads the stamp of a probe or probe reply plaintext.
func ParseProbe(b []byte) (int64, error) {
	if len(b) != ProbeLen {
		return 0, ErrShort
	}
	if k := Inner(b[0]); k != InnerProbe && k != InnerProbeReply {
		return 0, ErrType
	}
	return int64(binary.LittleEndian.Uint64(b[1:])), nil
}

// RoutedHeaderLen is the kind byte, the destination bridge's ID and the
// source bridge's ID in front of the frame plaintext (frame header and
// frame) of a routed frame. The destination bridge learns from the source
// bridge to send its answers routed back, as the hops between keep no
// state to switch them by.
const RoutedHeaderLen = 1 + 16 + 16

// Routed is a parsed routed-frame header.
type Routed struct {
	Dest, Source [16]byte // Source is zero when the sender did not know it
	Onward       bool     // clockwise only from here
}

// PutRoutedHeader writes a routed-frame header into b[:RoutedHeaderLen].
func PutRoutedHeader(b []byte, r Routed) {
	_ = b[RoutedHeaderLen-1]
	b[0] = byte(InnerRouted)
	if r.Onward {
		b[0] = byte(InnerRoutedOnward)
	}
	copy(b[1:17], r.Dest[:])
	copy(b[17:RoutedHeaderLen], r.Source[:])
}

// ParseRouted splits a routed frame into its header and the frame
// plaintext inside, which ParseFrame reads.
func ParseRouted(b []byte) (Routed, []byte, error) {
	var r Routed
	if len(b) < RoutedHeaderLen+FrameHeaderLen+14 {
		return r, nil, ErrShort
	}
	kind := Inner(b[0])
	if kind != InnerRouted && kind != InnerRoutedOnward || Inner(b[RoutedHeaderLen]) != InnerFrame {
		return r, nil, ErrType
	}
	copy(r.Dest[:], b[1:17])
	copy(r.Source[:], b[17:RoutedHeaderLen])
	r.Onward = kind == InnerRoutedOnward
	return r, b[RoutedHeaderLen:], nil
}

// RelayHeaderLen is the kind byte and node ID in front of a relayed
// datagram; a relayed datagram costs RelayHeaderLen plus a transport
// overhead more than a direct one.
const RelayHeaderLen = 1 + 16

// RelayOverhead is what relaying adds to a datagram.
const RelayOverhead = RelayHeaderLen + TransportOverhead

// Frame header: kind(1) flags(1) checksum start(2) checksum offset(2),
// then, with frameHasSource, the node ID of the bridge the frame's source
// sits behind. The checksum fields carry "checksum partial" state from the
// sender's TAP to the receiver's, so neither side computes a full
// checksum. The source bridge rides on the first frames of a flow, which
// every bridge on the path switches in its core: they learn where the
// source lives, which they need to route around a failure, from the
// frames themselves even when its host never broadcast.
const (
	FrameHeaderLen = 6
	SourceLen      = 16
)

const (
	frameNeedsCsum = 1
	frameHasSource = 2
)

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

// AppendFrame appends a frame plaintext: header, the source bridge when
// it is known (not zero), and the frame.
func AppendFrame(dst []byte, off l2.Offload, source [16]byte, frame []byte) []byte {
	at := len(dst)
	dst = append(dst, make([]byte, FrameHeaderLen)...)
	PutFrameHeader(dst[at:], off)
	if source != ([16]byte{}) {
		dst[at+1] |= frameHasSource
		dst = append(dst, source[:]...)
	}
	return append(dst, frame...)
}

// Frame is a parsed frame plaintext.
type Frame struct {
	Offload l2.Offload
	// Source is the bridge the frame's source sits behind; zero when the
	// frame does not say.
	Source   [16]byte
	Ethernet []byte
}

// ParseFrame reads a frame plaintext. A partial checksum must lie inside
// the frame.
func ParseFrame(b []byte) (Frame, error) {
	var f Frame
	if len(b) < FrameHeaderLen+14 {
		return f, ErrShort
	}
	if Inner(b[0]) != InnerFrame || b[1]&^(frameNeedsCsum|frameHasSource) != 0 {
		return f, ErrField
	}
	f.Ethernet = b[FrameHeaderLen:]
	if b[1]&frameHasSource != 0 {
		if len(f.Ethernet) < SourceLen+14 {
			return f, ErrShort
		}
		copy(f.Source[:], f.Ethernet)
		if f.Source == ([16]byte{}) {
			return f, ErrField
		}
		f.Ethernet = f.Ethernet[SourceLen:]
	}
	if b[1]&frameNeedsCsum != 0 {
		f.Offload.NeedsCsum = true
		f.Offload.CsumStart = binary.LittleEndian.Uint16(b[2:])
		f.Offload.CsumOffset = binary.LittleEndian.Uint16(b[4:])
		if int(f.Offload.CsumStart)+int(f.Offload.CsumOffset)+2 > len(f.Ethernet) || f.Offload.CsumStart < 14 {
			return f, ErrField
		}
	} else if b[2] != 0 || b[3] != 0 || b[4] != 0 || b[5] != 0 {
		return f, ErrField
	}
	return f, nil
}
