package sim

import (
	"math"
	"time"

	"burrow/l2"
	"burrow/link"
	"burrow/node"
	"burrow/wire"
)

// Latency is the one-way delay between two nodes: the base latency plus
// the pair's fixed share of the jitter.
func (s *Sim) Latency(a, b *Node) time.Duration {
	if s.cfg.Jitter <= 0 {
		return s.cfg.Latency
	}
	lo, hi := uint64(min(a.Index, b.Index)), uint64(max(a.Index, b.Index))
	u := float64(splitmix64(s.cfg.Seed^lo<<32^hi)>>11) / (1 << 53)
	return s.cfg.Latency + time.Duration(u*float64(s.cfg.Jitter))
}

// Partition splits the network: the nodes of each set reach only each
// other; nodes in no set form one more side. It replaces any earlier
// partition. Datagrams already in flight still arrive.
func (s *Sim) Partition(sets ...[]int) {
	s.Heal()
	for side, set := range sets {
		for _, i := range set {
			s.nodes[i].group = int32(side + 1)
		}
	}
}

// Heal ends any partition.
func (s *Sim) Heal() {
	for _, n := range s.nodes {
		n.group = 0
	}
}

// send carries a datagram from a node toward an address.
func (s *Sim) send(from *Node, to link.Endpoint, b []byte) {
	s.stats.Sent++
	var dst *Node
	if to.Via == link.UDP && !to.IsRelay() {
		dst = s.lookup(to.Addr)
	}
	lost := func() { s.counted(from, s.cur.flow, KindUndelivered, len(b)) }
	switch {
	case dst == nil:
		s.stats.Unroutable++
		lost()
		return
	case dst.group != from.group:
		s.stats.Partitioned++
		lost()
		return
	case s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss:
		s.stats.Lost++
		lost()
		return
	}
	hop := s.cur.hop
	if hop < math.MaxUint8 {
		hop++
	}
	s.push(event{
		at:   s.now + int64(s.Latency(from, dst)),
		kind: evDatagram, data: s.buffer(b),
		node: int32(dst.Index), from: int32(from.Index),
		flow: s.cur.flow, hop: hop,
	})
}

// flushTx sends what the data path put in the shared transmit batch, on
// behalf of the node being handled.
func (s *Sim) flushTx(msgs []node.TxMsg) {
	for _, m := range msgs {
		s.send(s.curNode, m.To, m.Buf)
	}
}

func (s *Sim) flush() { s.tx.Flush() }

// deliver hands an arriving datagram to the receiver's data path, then
// what it passed up to the core, and classifies the sender's transport
// datagram by what the receiver found inside.
func (s *Sim) deliver(e *event) {
	defer s.release(e.data)
	n := s.nodes[e.node]
	from := s.nodes[e.from]
	size := len(e.data)
	if !n.up {
		s.stats.ToDown++
		s.counted(from, e.flow, KindUndelivered, size)
		return
	}
	s.stats.Delivered++
	if e.flow >= 0 {
		s.flows[e.flow].crossed(e.from, e.node, size, e.hop)
	}
	k, transport := wireKind(e.data)
	s.curNode, s.cur = n, cause{flow: e.flow, hop: e.hop}
	if e.flow < 0 {
		s.cur.flow = n.tag
	}
	n.rxInner, n.rxData = 0, false
	n.core.Dataplane().FromNetwork(&s.worker, link.UDPEndpoint(from.Addr), e.data, s.now)
	if transport {
		switch {
		case n.rxInner != 0:
			k = innerKind(wire.Inner(n.rxInner))
		case n.rxData || len(s.tx.Msgs) > 0:
			k = KindData
		}
	}
	s.counted(from, e.flow, k, size)
	s.handleSlowAndRearm(n)
	if s.cfg.Observe != nil {
		s.cfg.Observe(Delivery{At: s.Elapsed(), From: int(e.from), To: int(e.node), Size: size, Kind: k, Flow: int(e.flow), Hop: int(e.hop)})
	}
}

// counted counts a datagram whose fate is known for its sender and, when
// it belongs to one, its flow.
func (s *Sim) counted(from *Node, flow int32, k Kind, size int) {
	from.traffic.count(k, size)
	if flow >= 0 {
		s.flows[flow].Traffic.count(k, size)
	}
}

// fromHost hands a frame from the node's host to its TAP.
func (s *Sim) fromHost(e *event) {
	defer s.release(e.data)
	n := s.nodes[e.node]
	if !n.up {
		return
	}
	s.curNode, s.cur = n, cause{flow: e.flow}
	if e.flow < 0 {
		s.cur.flow = n.tag
	}
	n.core.Dataplane().FromTAP(&s.worker, l2.VirtioNetHdr{}, e.data, s.now)
	s.handleSlowAndRearm(n)
}

// inject schedules a frame from node n's host at time at.
func (s *Sim) inject(n *Node, at int64, flow int32, frame []byte) {
	s.push(event{at: at, kind: evTAP, node: int32(n.Index), flow: flow, data: frame})
}
