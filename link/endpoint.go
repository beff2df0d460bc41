package link

import (
	"fmt"
	"net/netip"

	"burrow/nid"
)

// Transport is how a datagram leaves the node.
type Transport uint8

// Transports.
const (
	// UDP: the shared socket, straight to Addr.
	UDP Transport = iota
	// TURN: through this node's allocation on a TURN server, to Addr as
	// the server sees the peer.
	TURN
	// Stream: over a message-framed stream connection (WebSocket) to a
	// beacon, identified by Stream.
	Stream
	// Spare: UDP straight to Addr from one of the spare sockets, the one
	// Socket names, that a node behind a NAT mapping every destination to
	// a new port opens for birthday probing (see node's birthday.go): the
	// link punched through one of them stays on it.
	Spare
)

// Endpoint is where a link's datagrams go, and where they came from.
type Endpoint struct {
	Via    Transport
	Addr   netip.AddrPort
	Stream uint32
	Socket uint16
	// Relay, when set, is a member that carries the datagrams inside its
	// own links with both ends; Peer is then the far end. Relayed datagrams
	// stay encrypted end to end: the relay cannot read them.
	Relay nid.ID
	Peer  nid.ID
}

// Source is who datagrams from e count as, for rate limits: the source
// address; for relayed ones the originating node; and for a WebSocket or
// TCP stream, which has no address, the stream, as a multicast address
// no datagram comes from (otherwise every stream would share one limit).
func (e Endpoint) Source() netip.Addr {
	switch {
	case e.IsRelay():
		return netip.AddrFrom16(e.Peer)
	case e.Via == Stream:
		return netip.AddrFrom16([16]byte{0xff, 0x0e, 12: byte(e.Stream >> 24), 13: byte(e.Stream >> 16), 14: byte(e.Stream >> 8), 15: byte(e.Stream)})
	}
	return e.Addr.Addr()
}

// UDPEndpoint is a direct endpoint on the shared socket.
func UDPEndpoint(ap netip.AddrPort) Endpoint { return Endpoint{Addr: ap} }

// SpareEndpoint is a direct endpoint on spare socket socket.
func SpareEndpoint(socket uint16, ap netip.AddrPort) Endpoint {
	return Endpoint{Via: Spare, Socket: socket, Addr: ap}
}

// IsDirect reports whether datagrams go straight to the peer's address,
// from the shared socket or a spare one.
func (e Endpoint) IsDirect() bool { return (e.Via == UDP || e.Via == Spare) && !e.IsRelay() }

// RelayEndpoint reaches peer through the member relay.
func RelayEndpoint(relay, peer nid.ID) Endpoint { return Endpoint{Relay: relay, Peer: peer} }

// IsRelay reports whether datagrams travel inside another link.
func (e Endpoint) IsRelay() bool { return e.Relay != (nid.ID{}) }

// Path names the kind of path for status: direct, relay, turn or websocket.
func (e Endpoint) Path() string {
	switch {
	case e.IsRelay():
		return "relay"
	case e.Via == TURN:
		return "turn"
	case e.Via == Stream:
		return "websocket"
	}
	return "direct"
}

// bestRank is the rank of a direct IPv6 path, which nothing beats.
const bestRank = 3

// rank orders paths by preference: direct beats TURN and WebSocket, which
// beat a member relay; among direct paths IPv6 beats IPv4, whose addresses
// pass through NATs that may rebind them, as the Happy Eyeballs algorithm
// (RFC 8305) prefers it. A link on a direct IPv4 path so keeps trying the
// peer's IPv6 candidates.
func (e Endpoint) rank() int {
	switch {
	case e.IsRelay():
		return 0
	case e.Via == UDP && e.Addr.Addr().Is6() && !e.Addr.Addr().Is4In6():
		return bestRank
	case e.IsDirect():
		return 2
	}
	return 1
}

// IsBest reports whether no kind of path beats this one.
func (e Endpoint) IsBest() bool { return e.rank() == bestRank }

func (e Endpoint) String() string {
	switch {
	case e.IsRelay():
		return fmt.Sprintf("relay:%s", e.Relay.Short())
	case e.Via == TURN:
		return fmt.Sprintf("turn:%v", e.Addr)
	case e.Via == Stream:
		return fmt.Sprintf("websocket:%d", e.Stream)
	case e.Via == Spare:
		return fmt.Sprintf("%v/spare%d", e.Addr, e.Socket)
	}
	return e.Addr.String()
}
