package node

import (
	"math/rand/v2"
	"net/netip"

	"burrow/link"
)

// testNAT is a NAT router as Linux's MASQUERADE makes one: a mapping per
// inside socket (endpointIndependent, keeping the socket's port when it
// is free) or per socket and destination at a random port (as with
// --random-fully) or at the port after the last one (sequential); and a
// filter that lets in only answers, datagrams from an address and port a
// mapping sent to.
type testNAT struct {
	public  netip.Addr
	kind    natKind
	rng     *rand.Rand
	last    uint16 // the sequential kind's last port
	out     map[natKey]uint16
	in      map[uint16]insideSocket
	answers map[[2]netip.AddrPort]bool // (public address, remote) pairs let in
}

type natKind int

const (
	endpointIndependent natKind = iota
	randomPorts
	sequentialPorts
)

// insideSocket is a node's main socket, or one of its spare ones.
type insideSocket struct {
	n      *testNode
	spare  bool
	socket uint16
}

type natKey struct {
	from insideSocket
	to   netip.AddrPort // zero for an endpoint-independent mapping
}

// behindNAT moves n behind a NAT router at public: n gets a private
// address, advertises that, and reaches everyone through the router.
func (w *testNet) behindNAT(n *testNode, public netip.Addr, kind natKind, seed uint64) *testNAT {
	t := &testNAT{public: public, kind: kind, rng: rand.New(rand.NewPCG(seed, seed)),
		out: map[natKey]uint16{}, in: map[uint16]insideSocket{}, answers: map[[2]netip.AddrPort]bool{}}
	t.last = uint16(1024 + t.rng.IntN(30000))
	if w.nats == nil {
		w.nats = map[netip.Addr]*testNAT{}
	}
	w.nats[public] = t
	delete(w.byAddr, n.addr)
	n.addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, public.As4()[3], 2}), n.addr.Port())
	w.byAddr[n.addr] = n
	n.node.ov.cfg.Advertise = []netip.AddrPort{n.addr}
	n.nat = t
	return t
}

// translate maps a datagram from s to to, and opens the filter to answers.
func (t *testNAT) translate(s insideSocket, to netip.AddrPort) netip.AddrPort {
	key := natKey{s, to}
	if t.kind == endpointIndependent {
		key.to = netip.AddrPort{}
	}
	port, ok := t.out[key]
	if !ok {
		port = s.n.addr.Port()
		if s.spare {
			port = 20000 + s.socket
		}
		if _, taken := t.in[port]; taken || t.kind != endpointIndependent {
			port = t.pick()
		}
		t.out[key], t.in[port] = port, s
	}
	from := netip.AddrPortFrom(t.public, port)
	t.answers[[2]netip.AddrPort{from, to}] = true
	return from
}

// pick is a free port for a new mapping: the next in sequence, or a
// random one.
func (t *testNAT) pick() uint16 {
	for {
		port := uint16(1024 + t.rng.IntN(65536-1024))
		if t.kind == sequentialPorts {
			t.last++
			port = t.last
		}
		if _, taken := t.in[port]; !taken {
			return port
		}
	}
}

// throughNAT is where a datagram to a NAT's public address goes: the
// inside socket whose mapping it answers, or nowhere.
func (w *testNet) throughNAT(p packet) (*testNode, link.Endpoint) {
	t := w.nats[p.to.Addr()]
	if t == nil || !t.answers[[2]netip.AddrPort{p.to, p.from}] {
		return nil, link.Endpoint{}
	}
	s := t.in[p.to.Port()]
	if s.spare {
		return s.n, link.SpareEndpoint(s.socket, p.from)
	}
	return s.n, link.UDPEndpoint(p.from)
}
