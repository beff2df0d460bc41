package l2

import (
	"encoding/binary"
	"errors"
)

// VirtioNetHdrLen is the size of the header in front of every frame read from
// or written to a TAP device opened with IFF_VNET_HDR (TUNSETVNETHDRSZ 10).
const VirtioNetHdrLen = 10

// Flags of a VirtioNetHdr.
const (
	// VirtioNetHdrNeedsCsum: the L4 checksum field holds only the
	// pseudo-header sum; the sum from CsumStart to the end still has to be
	// added and complemented into CsumStart+CsumOffset.
	VirtioNetHdrNeedsCsum uint8 = 1
	// VirtioNetHdrDataValid: the checksum has already been verified.
	VirtioNetHdrDataValid uint8 = 2
)

// GSO types of a VirtioNetHdr.
const (
	VirtioNetHdrGSONone  uint8 = 0
	VirtioNetHdrGSOTCPv4 uint8 = 1
	VirtioNetHdrGSOUDP   uint8 = 3 // UDP fragmentation offload; burrow does not segment it
	VirtioNetHdrGSOTCPv6 uint8 = 4
	VirtioNetHdrGSOUDPL4 uint8 = 5 // UDP segmentation: one datagram per segment
	// VirtioNetHdrGSOECN is or-ed into a TCP GSO type when the first segment
	// carries CWR.
	VirtioNetHdrGSOECN uint8 = 0x80
)

// VirtioNetHdr is struct virtio_net_hdr, the offload metadata of one frame.
type VirtioNetHdr struct {
	Flags   uint8
	GSOType uint8
	// HdrLen is a hint: the length of the headers in front of the payload.
	HdrLen uint16
	// GSOSize is the L4 payload size of each segment but the last.
	GSOSize uint16
	// CsumStart and CsumOffset locate the L4 checksum: it covers the frame
	// from CsumStart and is stored at CsumStart+CsumOffset.
	CsumStart  uint16
	CsumOffset uint16
}

var (
	errShortVirtioNetHdr = errors.New("l2: virtio_net_hdr shorter than 10 bytes")
	errVirtioFlags       = errors.New("l2: virtio_net_hdr has unknown flags")
	errVirtioGSOType     = errors.New("l2: virtio_net_hdr has an unknown GSO type")
)

// Decode reads the header from the first VirtioNetHdrLen bytes of b.
//
// The 16-bit fields are little-endian: the tun driver uses the virtio 1.0
// layout on little-endian hosts, and on big-endian hosts once TUNSETVNETLE
// is set. Decode rejects flags and GSO types Linux does not define; it does
// not check the header against the frame (Segment does).
func (h *VirtioNetHdr) Decode(b []byte) error {
	if len(b) < VirtioNetHdrLen {
		return errShortVirtioNetHdr
	}
	flags, gsoType := b[0], b[1]
	if flags&^(VirtioNetHdrNeedsCsum|VirtioNetHdrDataValid) != 0 {
		return errVirtioFlags
	}
	switch gsoType &^ VirtioNetHdrGSOECN {
	case VirtioNetHdrGSOTCPv4, VirtioNetHdrGSOUDP, VirtioNetHdrGSOTCPv6, VirtioNetHdrGSOUDPL4:
	case VirtioNetHdrGSONone:
		if gsoType != VirtioNetHdrGSONone {
			return errVirtioGSOType
		}
	default:
		return errVirtioGSOType
	}
	*h = VirtioNetHdr{
		Flags:      flags,
		GSOType:    gsoType,
		HdrLen:     binary.LittleEndian.Uint16(b[2:4]),
		GSOSize:    binary.LittleEndian.Uint16(b[4:6]),
		CsumStart:  binary.LittleEndian.Uint16(b[6:8]),
		CsumOffset: binary.LittleEndian.Uint16(b[8:10]),
	}
	return nil
}

// Encode writes the header into the first VirtioNetHdrLen bytes of b, in the
// little-endian layout Decode reads; b must be at least that long.
func (h VirtioNetHdr) Encode(b []byte) {
	_ = b[VirtioNetHdrLen-1]
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.LittleEndian.PutUint16(b[2:4], h.HdrLen)
	binary.LittleEndian.PutUint16(b[4:6], h.GSOSize)
	binary.LittleEndian.PutUint16(b[6:8], h.CsumStart)
	binary.LittleEndian.PutUint16(b[8:10], h.CsumOffset)
}

// Offload is the checksum metadata that travels through the tunnel with each
// frame. With NeedsCsum the L4 checksum field at CsumStart+CsumOffset holds
// only the pseudo-header sum ("checksum partial"); the receiver hands that on
// to its kernel or finishes it with CompleteChecksum. Offsets count from the
// start of the Ethernet frame.
type Offload struct {
	NeedsCsum  bool
	CsumStart  uint16
	CsumOffset uint16
}

var errOffloadBounds = errors.New("l2: checksum offload points outside the frame")

// Validate reports whether the checksum field lies inside a frame of
// frameLen bytes, so that the metadata can be trusted.
func (o Offload) Validate(frameLen int) error {
	if o.NeedsCsum && int(o.CsumStart)+int(o.CsumOffset)+2 > frameLen {
		return errOffloadBounds
	}
	return nil
}

// VirtioNetHdr is the header for writing a single (non-GSO) frame carrying o
// to a TAP device.
func (o Offload) VirtioNetHdr() VirtioNetHdr {
	if !o.NeedsCsum {
		return VirtioNetHdr{}
	}
	return VirtioNetHdr{
		Flags:      VirtioNetHdrNeedsCsum,
		HdrLen:     o.CsumStart + o.CsumOffset + 2,
		CsumStart:  o.CsumStart,
		CsumOffset: o.CsumOffset,
	}
}

// OffloadOf is the checksum offload h describes for its frame: none
// unless the checksum is left to fill in.
func OffloadOf(h VirtioNetHdr) Offload {
	if h.Flags&VirtioNetHdrNeedsCsum == 0 {
		return Offload{}
	}
	return Offload{NeedsCsum: true, CsumStart: h.CsumStart, CsumOffset: h.CsumOffset}
}
