package l2

import (
	"bytes"
	"encoding/binary"
)

// maxIPPacketLen bounds a coalesced super-frame: IPv4 total length and IPv6
// payload length are 16-bit fields.
const maxIPPacketLen = 65535

// Coalescer merges consecutive TCP segments of a flow back into GSO
// super-frames before they are written to a TAP device, so that the kernel
// sees few, large packets (receive offload done in burrow).
//
// Segments merge when they belong to the same flow (MACs, 802.1Q tag, IP
// addresses and ports), carry a partial checksum, have identical IP header
// fields (TOS, TTL, DF; IPv6 traffic class, flow label, hop limit; no IPv4
// options, and for IPv4 without DF consecutive IDs), contiguous sequence
// numbers, the same ACK number, window and TCP options, only the ACK flag
// (PSH allowed on the last segment), and the size of the first segment
// (the last may be shorter). Within a flow frames leave in the order they
// came; a frame that cannot merge ends the super-frame before it. An IP frame
// that is not a plain TCP or UDP packet (a fragment, an IPv6 extension header,
// ICMP) ends every super-frame between the same addresses, since it may
// belong to one of their flows.
//
// Memory is fixed at construction: the arena plus a gather buffer of
// VirtioNetHdrLen+MaxFrameLen bytes plus about 200 bytes per frame slot.
// A Coalescer is not safe for concurrent use.
type Coalescer struct {
	arena   []byte // stored frames and appended payloads
	used    int
	packets []pendingPacket // output packets in the order they started
	chunks  []payloadChunk  // payloads stored apart from their packet
	scratch []byte          // gathers a packet whose payload is not contiguous
}

// pendingPacket is one output packet: a single frame or a growing
// super-frame. Its first frame sits in the arena behind room for the virtio
// header; payloads that could not be appended right behind it are chunks.
type pendingPacket struct {
	start      int // arena offset of the virtio header room
	frameLen   int // bytes stored contiguously behind that room
	firstChunk int // -1 when the packet is contiguous
	lastChunk  int
	off        Offload

	tcp      bool    // a TCP segment: later segments of its flow must not pass it
	open     bool    // more segments may be appended
	flow     flowKey // valid when tcp
	l4Packet         // header layout of the first frame, valid when tcp

	nextSeq     uint32
	segmentSize int // L4 payload of the first segment
	segments    int
	ipLen       int // IP packet length so far
	push        bool
}

type payloadChunk struct {
	off, len int
	next     int // -1 at the end of a packet's chain
}

type flowKey struct {
	link  [EthernetTaggedHeaderLen]byte // MACs, 802.1Q tag and EtherType
	addrs [32]byte                      // IP source and destination
	ports [4]byte
}

// NewCoalescer returns a Coalescer holding up to maxFrames frames in
// arenaBytes bytes. The arena is raised to fit at least one frame of
// MaxFrameLen. 128 frames in 256 KiB take about 350 KiB in all.
func NewCoalescer(maxFrames, arenaBytes int) *Coalescer {
	maxFrames = max(maxFrames, 1)
	return &Coalescer{
		arena:   make([]byte, max(arenaBytes, VirtioNetHdrLen+MaxFrameLen)),
		packets: make([]pendingPacket, 0, maxFrames),
		chunks:  make([]payloadChunk, 0, maxFrames),
		scratch: make([]byte, 0, VirtioNetHdrLen+MaxFrameLen),
	}
}

// Add copies frame, with the checksum metadata it arrived with, into the
// Coalescer. It returns false when there is no room: the caller flushes and
// adds again. An empty Coalescer takes any frame of up to MaxFrameLen bytes.
func (c *Coalescer) Add(frame []byte, off Offload) bool {
	if len(frame) > MaxFrameLen {
		return false
	}
	p, err := parseL4(frame)
	if err == nil && p.proto == ipProtoTCP {
		return c.addTCP(frame, off, p)
	}
	if !c.push(frame, off) {
		return false
	}
	if err != nil {
		if ip, err := parseIP(frame); err == nil {
			c.closeFlowsBetween(addrKey(frame, ip))
		}
	}
	return true
}

func (c *Coalescer) addTCP(frame []byte, off Offload, p l4Packet) bool {
	key := flowKey{addrs: addrKey(frame, p.ipPacket)}
	copy(key.link[:], frame[:p.ipOff])
	copy(key.ports[:], frame[p.l4Off:p.l4Off+4])
	if i := c.latestOfFlow(key); i >= 0 && c.canAppend(&c.packets[i], frame, off, p) {
		return c.appendSegment(&c.packets[i], frame, p)
	}
	opens := startsSuperFrame(frame, off, p)
	stored := frame
	if opens {
		stored = frame[:p.end] // payloads will follow the IP packet, not the link padding
	}
	if !c.push(stored, off) {
		return false
	}
	pp := &c.packets[len(c.packets)-1]
	pp.tcp, pp.open, pp.flow, pp.l4Packet = true, opens, key, p
	pp.nextSeq = binary.BigEndian.Uint32(frame[p.l4Off+4:]) + uint32(p.end-p.payloadOff)
	pp.segmentSize = p.end - p.payloadOff
	pp.ipLen = p.end - p.ipOff
	return true
}

// startsSuperFrame: a segment that later ones may be appended to.
func startsSuperFrame(frame []byte, off Offload, p l4Packet) bool {
	return off == p.offload() &&
		frame[p.l4Off+13] == tcpACK &&
		p.end > p.payloadOff &&
		(p.ipv6 || p.l4Off-p.ipOff == ipv4MinHeaderLen)
}

func (c *Coalescer) canAppend(pp *pendingPacket, frame []byte, off Offload, p l4Packet) bool {
	if !pp.open || off != p.offload() || p.l4Off != pp.l4Off || p.payloadOff != pp.payloadOff {
		return false
	}
	payloadLen := p.end - p.payloadOff
	flags := frame[p.l4Off+13]
	if payloadLen == 0 || payloadLen > pp.segmentSize || pp.ipLen+payloadLen > maxIPPacketLen ||
		flags&^tcpPSH != tcpACK ||
		binary.BigEndian.Uint32(frame[p.l4Off+4:]) != pp.nextSeq {
		return false
	}
	head := c.arena[pp.start+VirtioNetHdrLen:]
	return sameIPFields(head, frame, pp) &&
		// ACK number and data offset, window, options
		bytes.Equal(head[p.l4Off+8:p.l4Off+13], frame[p.l4Off+8:p.l4Off+13]) &&
		bytes.Equal(head[p.l4Off+14:p.l4Off+16], frame[p.l4Off+14:p.l4Off+16]) &&
		bytes.Equal(head[p.l4Off+tcpMinHeaderLen:p.payloadOff], frame[p.l4Off+tcpMinHeaderLen:p.payloadOff])
}

// sameIPFields compares what the kernel would copy from the first segment's
// IP header to all others when it segments the super-frame again.
func sameIPFields(head, frame []byte, pp *pendingPacket) bool {
	h, f := head[pp.ipOff:pp.l4Off], frame[pp.ipOff:pp.l4Off]
	if pp.ipv6 {
		return bytes.Equal(h[0:4], f[0:4]) && h[7] == f[7]
	}
	const dontFragment = 0x40
	if h[1] != f[1] || h[6] != f[6] || h[7] != f[7] || h[8] != f[8] {
		return false
	}
	return h[6]&dontFragment != 0 ||
		binary.BigEndian.Uint16(f[4:6]) == binary.BigEndian.Uint16(h[4:6])+uint16(pp.segments)
}

func (c *Coalescer) appendSegment(pp *pendingPacket, frame []byte, p l4Packet) bool {
	payload := frame[p.payloadOff:p.end]
	if len(c.arena)-c.used < len(payload) {
		return false
	}
	contiguousEnd := pp.start + VirtioNetHdrLen + pp.frameLen
	if pp.lastChunk >= 0 {
		contiguousEnd = c.chunks[pp.lastChunk].off + c.chunks[pp.lastChunk].len
	}
	switch {
	case contiguousEnd == c.used && pp.lastChunk < 0:
		pp.frameLen += len(payload)
	case contiguousEnd == c.used:
		c.chunks[pp.lastChunk].len += len(payload)
	case len(c.chunks) == cap(c.chunks):
		return false
	default:
		c.chunks = append(c.chunks, payloadChunk{off: c.used, len: len(payload), next: -1})
		chunk := len(c.chunks) - 1
		if pp.lastChunk >= 0 {
			c.chunks[pp.lastChunk].next = chunk
		} else {
			pp.firstChunk = chunk
		}
		pp.lastChunk = chunk
	}
	c.used += copy(c.arena[c.used:], payload)

	pp.nextSeq += uint32(len(payload))
	pp.ipLen += len(payload)
	pp.segments++
	pp.push = frame[p.l4Off+13]&tcpPSH != 0
	pp.open = !pp.push && len(payload) == pp.segmentSize
	return true
}

// push stores frame as the start of a new output packet.
func (c *Coalescer) push(frame []byte, off Offload) bool {
	need := VirtioNetHdrLen + len(frame)
	if len(c.packets) == cap(c.packets) || len(c.arena)-c.used < need {
		return false
	}
	c.packets = append(c.packets, pendingPacket{
		start:      c.used,
		frameLen:   len(frame),
		firstChunk: -1,
		lastChunk:  -1,
		off:        off,
		segments:   1,
	})
	copy(c.arena[c.used+VirtioNetHdrLen:], frame)
	c.used += need
	return true
}

// latestOfFlow finds the newest packet of the flow: only it may grow, so
// that no segment overtakes another frame of its flow.
func (c *Coalescer) latestOfFlow(key flowKey) int {
	for i := len(c.packets) - 1; i >= 0; i-- {
		if c.packets[i].tcp && c.packets[i].flow == key {
			return i
		}
	}
	return -1
}

func (c *Coalescer) closeFlowsBetween(addrs [32]byte) {
	for i := range c.packets {
		if c.packets[i].tcp && c.packets[i].flow.addrs == addrs {
			c.packets[i].open = false
		}
	}
}

func addrKey(frame []byte, p ipPacket) [32]byte {
	var k [32]byte
	copy(k[:], p.addrs(frame))
	return k
}

// Flush calls write once per output packet, in order: a VirtioNetHdr
// followed by a frame. The slice is only valid during the call. Flush writes
// every packet even when some writes fail, returns the first error, and
// leaves the Coalescer empty.
func (c *Coalescer) Flush(write func(pkt []byte) error) error {
	var firstErr error
	for i := range c.packets {
		if err := write(c.finish(&c.packets[i])); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	c.packets = c.packets[:0]
	c.chunks = c.chunks[:0]
	c.used = 0
	return firstErr
}

// finish lays out a packet with its virtio header. A super-frame gets the
// headers the kernel's own TSO frames carry: lengths of the whole, PSH if
// its last segment had it, and the pseudo-header sum for the whole length in
// the checksum field.
func (c *Coalescer) finish(pp *pendingPacket) []byte {
	pkt := c.arena[pp.start : pp.start+VirtioNetHdrLen+pp.frameLen]
	if pp.segments == 1 {
		pp.off.VirtioNetHdr().Encode(pkt)
		return pkt
	}
	if pp.firstChunk >= 0 {
		pkt = append(c.scratch[:0], pkt...)
		for i := pp.firstChunk; i >= 0; i = c.chunks[i].next {
			chunk := c.chunks[i]
			pkt = append(pkt, c.arena[chunk.off:chunk.off+chunk.len]...)
		}
	}
	frame := pkt[VirtioNetHdrLen:]
	p := pp.l4Packet
	p.setIPLength(frame, pp.ipLen, p.ipv4ID(frame), p.ipv4FixedSum(frame))
	if pp.push {
		frame[p.l4Off+13] |= tcpPSH
	}
	p.setPartialChecksum(frame, OnesComplementSum(p.addrs(frame), 0), len(frame)-p.l4Off)
	gsoType := VirtioNetHdrGSOTCPv4
	if p.ipv6 {
		gsoType = VirtioNetHdrGSOTCPv6
	}
	VirtioNetHdr{
		Flags:      VirtioNetHdrNeedsCsum,
		GSOType:    gsoType,
		HdrLen:     uint16(p.payloadOff),
		GSOSize:    uint16(pp.segmentSize),
		CsumStart:  uint16(p.l4Off),
		CsumOffset: tcpChecksumOffset,
	}.Encode(pkt)
	return pkt
}
