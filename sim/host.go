package sim

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"burrow/l2"
	"burrow/nid"
)

// Frames between the virtual hosts: an Ethernet header with the local
// experimental EtherType, then what the frame is, whose (a flow or a
// broadcast) and a sequence number, padded to the frame's size.
const (
	etherType    = 0x88b5
	hdrKind      = l2.EthernetHeaderLen
	hdrID        = hdrKind + 1
	hdrSeq       = hdrID + 4
	frameHdrLen  = hdrSeq + 4
	minFrameSize = 60 // Ethernet's minimum without the checksum
)

type frameKind uint8

const (
	frameBroadcast frameKind = iota + 1 // ARP-like: to everyone
	framePing                           // a probe; the receiving host answers
	framePong                           // the answer to a probe
	frameBulk                           // bulk data
	frameAck                            // the receiver's answer to bulk data
	frameOneWay                         // a frame nobody answers
)

// AckEvery makes a bulk receiver answer every few frames, as TCP acks do,
// so that the sender's bridge learns where the receiver lives.
const AckEvery = 4

func (s *Sim) frame(kind frameKind, dst, src l2.MAC, id int, seq uint32, size int) []byte {
	size = max(size, minFrameSize, frameHdrLen)
	b := s.bufferFor(size)[:size]
	clear(b)
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], etherType)
	b[hdrKind] = byte(kind)
	binary.BigEndian.PutUint32(b[hdrID:], uint32(id))
	binary.BigEndian.PutUint32(b[hdrSeq:], seq)
	return b
}

func parseFrame(b []byte) (kind frameKind, id int, seq uint32, ok bool) {
	if len(b) < frameHdrLen || binary.BigEndian.Uint16(b[12:]) != etherType {
		return 0, 0, 0, false
	}
	return frameKind(b[hdrKind]), int(binary.BigEndian.Uint32(b[hdrID:])), binary.BigEndian.Uint32(b[hdrSeq:]), true
}

// toHost is a frame written to node n's TAP, read by its host. Like a NIC
// out of promiscuous mode, the host ignores unicast for other MACs (the
// copies an unknown-unicast flood leaves everywhere).
func (s *Sim) toHost(n *Node, b []byte) {
	kind, id, seq, ok := parseFrame(b)
	if !ok {
		return
	}
	var dst l2.MAC
	copy(dst[:], b[0:6])
	if kind == frameBroadcast {
		if dst.IsBroadcast() && id < len(s.bcasts) {
			s.bcasts[id].received(n.Index)
		}
		return
	}
	if dst != n.MAC || id >= len(s.flows) {
		return
	}
	f := s.flows[id]
	switch kind {
	case framePing:
		if int(seq) < len(f.Probes) {
			p := &f.Probes[seq]
			p.Deliveries++
			p.Hops = s.cur.hop
		}
		var src l2.MAC
		copy(src[:], b[6:12])
		s.inject(n, s.now, int32(id), s.frame(framePong, src, n.MAC, id, seq, 0))
	case framePong:
		if int(seq) < len(f.Probes) && f.Probes[seq].Replied < 0 {
			f.Probes[seq].Replied = s.Elapsed()
			f.Probes[seq].ReplyHops = s.cur.hop
		}
	case frameBulk, frameOneWay:
		if int(seq) < len(f.Frames) {
			f.Frames[seq].arrived(s.Elapsed())
		}
		f.RecvFrames++
		f.RecvBytes += int64(len(b))
		f.HopSum += int64(s.cur.hop)
		f.LastHops = s.cur.hop
		if kind == frameBulk && f.RecvFrames%AckEvery == 0 {
			var src l2.MAC
			copy(src[:], b[6:12])
			s.inject(n, s.now, int32(id), s.frame(frameAck, src, n.MAC, id, seq, 0))
		}
	case frameAck:
		f.Acks++
		if int(seq) < len(f.Frames) && f.Frames[seq].Acked < 0 {
			f.Frames[seq].Acked = s.Elapsed()
		}
	}
}

// delivered is the core's trace of a broadcast reaching this node's TAP,
// with the links it crossed.
func (n *Node) delivered(root nid.ID, hops uint8, b []byte) {
	kind, id, _, ok := parseFrame(b)
	if ok && kind == frameBroadcast && id < len(n.sim.bcasts) {
		n.sim.bcasts[id].hops[n.Index] = hops
	}
}

// broadcast records where one broadcast arrived.
type broadcast struct {
	src      int
	expected []bool // up and on the source's side when it was sent
	count    []uint8
	hops     []uint8
}

func (b *broadcast) received(i int) {
	if i < len(b.count) && b.count[i] < 255 {
		b.count[i]++
	}
}

// Broadcast makes node src's host send one broadcast frame now and returns
// the broadcast's id. Every node up on src's side should get it once.
func (s *Sim) Broadcast(src int) int {
	id := len(s.bcasts)
	n := s.nodes[src]
	b := &broadcast{src: src, expected: make([]bool, len(s.nodes)), count: make([]uint8, len(s.nodes)), hops: make([]uint8, len(s.nodes))}
	for i, m := range s.nodes {
		b.expected[i] = m.up && m.group == n.group && i != src
	}
	s.bcasts = append(s.bcasts, b)
	s.inject(n, s.now, -1, s.frame(frameBroadcast, l2.Broadcast, n.MAC, id, 0, 0))
	return id
}

// BroadcastHops returns, for each node, the links broadcast id crossed to
// reach it (0 where it did not arrive).
func (s *Sim) BroadcastHops(id int) []uint8 { return s.bcasts[id].hops }

// FlowKind says what a flow sends.
type FlowKind int

// Flow kinds.
const (
	// Probes: ping-like requests every Every; the receiving host answers.
	Probes FlowKind = iota + 1
	// Bulk: frames of Size bytes at Rate bytes per second; the receiving
	// host acknowledges every few.
	Bulk
	// OneWay: a frame every Every (one when zero), not answered; traced,
	// a single one shows the path unicast takes.
	OneWay
	// Tag sends nothing: it marks what a node does (see Sim.Tag).
	Tag
)

// FlowConfig describes a traffic flow between two hosts.
type FlowConfig struct {
	Kind     FlowKind
	Src, Dst int
	// Every is the interval between probes; zero sends one probe.
	Every time.Duration
	Rate  float64 // bytes per second, for bulk
	Size  int     // frame size; at least the Ethernet minimum
	// Start and Stop bound the flow in virtual time since the simulation's
	// start; Stop zero runs until the simulation ends.
	Start, Stop time.Duration
	// Trace records the links the flow's datagrams cross.
	Trace bool
	// Record keeps, for a bulk flow, when each frame was sent, arrived and
	// was acknowledged (Flow.Frames): outages measured frame by frame.
	Record bool
}

// Flow is a running or finished flow and what it measured.
type Flow struct {
	ID int
	FlowConfig
	// Probes are the probes sent, in order.
	Probes []Probe
	// Frames are a recorded bulk flow's frames, in the order sent.
	Frames []Frame
	// Bulk counters.
	SentFrames, SentBytes int64
	RecvFrames, RecvBytes int64
	Acks                  int64
	// HopSum adds the links every received bulk or one-way frame crossed;
	// LastHops is the last one's.
	HopSum   int64
	LastHops uint8
	// Traffic counts the datagrams sent on the flow's behalf: its frames
	// and everything nodes sent while handling them.
	Traffic Traffic
	links   map[[2]int32]int64
	hops    []crossing
	stopped bool
}

// crossing is a traced datagram: from a node to another, as the frame's
// hop-th link.
type crossing struct {
	from, to int32
	hop      uint8
}

// Probe is one probe of a flow.
type Probe struct {
	Sent time.Duration // virtual time since the start
	// Replied is when the answer came back, -1 if it did not.
	Replied time.Duration
	// Deliveries counts the copies of the request its destination got.
	Deliveries int
	// Hops and ReplyHops are the links the request and its answer crossed.
	Hops, ReplyHops uint8
}

// Frame is one frame of a recorded bulk flow.
type Frame struct {
	Sent time.Duration // virtual time since the start
	// Arrived is when its first copy reached the receiving host, Acked
	// when the acknowledgement it caused reached the sender (only every
	// AckEvery-th frame received causes one); -1 if they did not.
	Arrived, Acked time.Duration
	// Copies counts the copies the receiving host got.
	Copies int
}

func (fr *Frame) arrived(at time.Duration) {
	if fr.Copies == 0 {
		fr.Arrived = at
	}
	fr.Copies++
}

// AddFlow starts a flow at its Start time.
func (s *Sim) AddFlow(cfg FlowConfig) *Flow {
	f := &Flow{ID: len(s.flows), FlowConfig: cfg}
	if cfg.Trace {
		f.links = make(map[[2]int32]int64)
	}
	s.flows = append(s.flows, f)
	s.push(event{at: max(s.start+int64(cfg.Start), s.now), kind: evFlow, node: int32(f.ID)})
	return f
}

// Ping sends one probe from src to dst now.
func (s *Sim) Ping(src, dst int, trace bool) *Flow {
	return s.AddFlow(FlowConfig{Kind: Probes, Src: src, Dst: dst, Start: s.Elapsed(), Trace: trace})
}

// StopFlow stops a flow now.
func (f *Flow) StopFlow() { f.stopped = true }

func (f *Flow) next(s *Sim) {
	if f.stopped || f.Stop > 0 && s.Elapsed() >= f.Stop {
		return
	}
	src, dst := s.nodes[f.Src], s.nodes[f.Dst]
	var wait time.Duration
	switch f.Kind {
	case Probes:
		seq := uint32(len(f.Probes))
		f.Probes = append(f.Probes, Probe{Sent: s.Elapsed(), Replied: -1})
		s.inject(src, s.now, int32(f.ID), s.frame(framePing, dst.MAC, src.MAC, f.ID, seq, f.Size))
		wait = f.Every
	case Bulk, OneWay:
		kind := frameBulk
		if f.Kind == OneWay {
			kind = frameOneWay
		}
		fr := s.frame(kind, dst.MAC, src.MAC, f.ID, uint32(f.SentFrames), f.Size)
		if f.Record && f.Kind == Bulk {
			f.Frames = append(f.Frames, Frame{Sent: s.Elapsed(), Arrived: -1, Acked: -1})
		}
		f.SentFrames++
		f.SentBytes += int64(len(fr))
		s.inject(src, s.now, int32(f.ID), fr)
		if f.Kind == Bulk {
			wait = time.Duration(float64(len(fr)) / f.Rate * float64(time.Second))
		} else {
			wait = f.Every
		}
	case Tag:
		return
	}
	if wait > 0 {
		s.push(event{at: s.now + int64(wait), kind: evFlow, node: int32(f.ID)})
	}
}

func (f *Flow) crossed(from, to int32, size int, hop uint8) {
	if f.links != nil {
		f.links[[2]int32{from, to}] += int64(size)
		if f.Kind == OneWay {
			f.hops = append(f.hops, crossing{from, to, hop})
		}
	}
}

// Tag marks node i: from now on, everything it sends — and everything
// other nodes send while handling that — counts toward the returned flow's
// Traffic, until Untag. A join's cost is what a new node's tag collects.
func (s *Sim) Tag(i int) *Flow {
	f := s.AddFlow(FlowConfig{Kind: Tag, Src: i, Dst: i})
	s.nodes[i].tag = int32(f.ID)
	return f
}

// Untag ends a Tag.
func (s *Sim) Untag(i int) { s.nodes[i].tag = -1 }

// Path returns the nodes a traced flow's last received frame crossed from
// Src to Dst, in order. It follows the frame back from the datagram that
// brought it to Dst, hop by hop, so it holds whether the frame was switched
// as unicast or flooded on the way by a bridge that did not know the
// destination (the flood may also pass nodes the frame had crossed). It
// fails if the frame did not arrive. Trace one frame per flow for this.
func (f *Flow) Path() ([]int, error) {
	if f.RecvFrames == 0 {
		return nil, fmt.Errorf("flow %d: the frame did not get from node %d to %d", f.ID, f.Src, f.Dst)
	}
	path := []int{f.Dst}
	at := int32(f.Dst)
	for hop := f.LastHops; hop > 0; hop-- {
		i := slices.IndexFunc(f.hops, func(c crossing) bool { return c.to == at && c.hop == hop })
		if i < 0 {
			return nil, fmt.Errorf("flow %d: no datagram brought the frame to node %d at hop %d", f.ID, at, hop)
		}
		at = f.hops[i].from
		path = append(path, int(at))
	}
	if at != int32(f.Src) {
		return nil, fmt.Errorf("flow %d: the frame's path leads back to node %d, not %d", f.ID, at, f.Src)
	}
	slices.Reverse(path)
	return path, nil
}

// Links returns the bytes the flow's datagrams carried over each directed
// link (sender, receiver by node index); nil unless the flow is traced.
func (f *Flow) Links() map[[2]int32]int64 { return f.links }

// Delivered counts the probes answered.
func (f *Flow) Delivered() int {
	c := 0
	for _, p := range f.Probes {
		if p.Replied >= 0 {
			c++
		}
	}
	return c
}
