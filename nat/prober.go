package nat

import (
	"io"
	"net/netip"
	"slices"
	"time"
)

// Behaviour is how this node's NAT maps its socket, as observed.
type Behaviour int

// NAT behaviours.
const (
	Unknown Behaviour = iota
	// Public: servers see the node's own address; there is no NAT.
	Public
	// EndpointIndependent: one mapping for every destination; hole
	// punching works.
	EndpointIndependent
	// AddressDependent: a new mapping per destination (symmetric NAT);
	// hole punching only works against an open peer, relays take over.
	AddressDependent
	// Translated: behind a NAT whose mapping kind one server cannot tell.
	Translated
)

var behaviourNames = [...]string{"unknown", "public", "endpoint-independent", "address-dependent", "translated"}

func (b Behaviour) String() string { return behaviourNames[b] }

// Prober asks STUN servers, in turn, how they see this node, and keeps
// the answers. It is pure: the caller sends what Due returns and hands
// back the responses.
type Prober struct {
	servers []netip.AddrPort
	local   []netip.AddrPort // this node's own addresses
	every   time.Duration
	rand    io.Reader

	next    time.Time
	pending map[TxID]netip.AddrPort           // transaction → server
	seen    map[netip.AddrPort]netip.AddrPort // server → mapped address
	// Sent and Answered count requests, for status.
	Sent, Answered uint64
}

// NewProber probes servers every interval.
func NewProber(servers, local []netip.AddrPort, every time.Duration, rand io.Reader, now time.Time) *Prober {
	return &Prober{servers: servers, local: local, every: every, rand: rand, next: now,
		pending: make(map[TxID]netip.AddrPort), seen: make(map[netip.AddrPort]netip.AddrPort)}
}

// AddServer asks server too from now on, at once; it reports false when
// server was known already or the prober holds max servers.
func (p *Prober) AddServer(server netip.AddrPort, max int, now time.Time) bool {
	if slices.Contains(p.servers, server) || len(p.servers) >= max {
		return false
	}
	p.servers = append(p.servers, server)
	p.next = now
	return true
}

// Request is a binding request to send.
type Request struct {
	To  netip.AddrPort
	Msg []byte
}

// Due returns the requests to send at now, if any.
func (p *Prober) Due(now time.Time) []Request {
	if len(p.servers) == 0 || now.Before(p.next) {
		return nil
	}
	p.next = now.Add(p.every)
	clear(p.pending) // unanswered ones are lost
	var out []Request
	for _, s := range p.servers {
		var id TxID
		if _, err := io.ReadFull(p.rand, id[:]); err != nil {
			panic("nat: random source failed: " + err.Error())
		}
		p.pending[id] = s
		p.Sent++
		out = append(out, Request{To: s, Msg: BindingRequest(id)})
	}
	return out
}

// NextDeadline is when Due next has work.
func (p *Prober) NextDeadline() time.Time { return p.next }

// Answer takes a binding success from a server; it reports whether the set
// of reflexive addresses changed (a new mapping: the NAT rebinding).
func (p *Prober) Answer(from netip.AddrPort, m Message) bool {
	server, ok := p.pending[m.TxID]
	if !ok || server != from || m.Request {
		return false
	}
	delete(p.pending, m.TxID)
	p.Answered++
	old := p.Reflexive()
	p.seen[server] = m.Mapped
	return !slices.Equal(old, p.Reflexive())
}

// Reflexive returns the distinct mapped addresses the servers reported
// that are not the node's own, sorted.
func (p *Prober) Reflexive() []netip.AddrPort {
	var out []netip.AddrPort
	for _, m := range p.seen {
		if !slices.Contains(out, m) && !slices.Contains(p.local, m) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return out
}

// Behaviour classifies the NAT from the answers so far: public if a server
// saw a local address, address-dependent if servers saw different
// mappings, endpoint-independent if at least two saw the same one, and
// translated when a single server saw a mapping.
func (p *Prober) Behaviour() Behaviour {
	if len(p.seen) == 0 {
		return Unknown
	}
	mapped := map[netip.AddrPort]bool{}
	for _, m := range p.seen {
		if slices.Contains(p.local, m) {
			return Public
		}
		mapped[m] = true
	}
	switch {
	case len(mapped) > 1:
		return AddressDependent
	case len(p.seen) > 1:
		return EndpointIndependent
	}
	return Translated
}
