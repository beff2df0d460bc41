package overlay

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"

	"burrow/nid"
)

// Info describes a node: its ID, the endpoints it can be reached at, and
// members it has a direct link with that may relay for it.
type Info struct {
	ID        nid.ID
	Endpoints []netip.AddrPort
	Relays    []nid.ID
	// TURN, when valid, is the one of Endpoints that is the node's relayed
	// address on a TURN server: reached like any endpoint, but a path to it
	// crosses that server, and status should say so.
	TURN netip.AddrPort
}

// relayedFlag marks, in an endpoint's address family byte, the node's TURN
// relayed address.
const relayedFlag = 0x80

// MaxEndpoints bounds the endpoints one Info carries, MaxRelays its relays.
const (
	MaxEndpoints = 8
	MaxRelays    = 4
)

// Type is the kind of a control message.
type Type uint8

// Control message types. Routed messages travel greedily toward Dest; the
// others only cross one link.
const (
	// FindSuccessor is routed toward Dest; the node that finds no neighbour
	// closer to Dest answers with Successors.
	FindSuccessor Type = iota + 1
	// Successors answers FindSuccessor with the nodes the sender knows
	// closest to the asker on either side, and Stabilize with the sender's
	// own predecessor and successor list; sent unasked, it tells a node
	// of a new node between it and the sender.
	Successors
	// LinkRequest asks the node at (or just before) Dest for a link.
	LinkRequest
	// LinkReply answers LinkRequest: accepted or not, and where to reach it.
	LinkReply
	// Stabilize asks an adjacent successor for its predecessor and successors.
	Stabilize
	// Notify tells a node that the sender believes it is its predecessor.
	Notify
	// LinkUse tells the peer at the other end of a link why this side keeps
	// it, and whether this side has found its place on the ring.
	LinkUse
	// Leave announces a graceful departure with the leaver's neighbours.
	Leave
	// Topology asks the node Dest for its links, for an operator's map.
	Topology
	// TopologyReply answers Topology: the node's name and links.
	TopologyReply
	// Data carries a payload for a service on the ring (the DHT), routed
	// like any request; its interpretation is up to that service.
	Data
	// Ping asks the node Dest to answer at once with a Pong, for an
	// operator's `burrow ping`: which path the answer took, and its round
	// trip.
	Ping
	// Pong answers Ping.
	Pong
	// LeaseMoved tells the member Dest that a DHCP client whose lease it
	// holds moved to the sender's TAP; its Payload is the address (4
	// bytes) and the client's MAC (6 bytes).
	LeaseMoved
	// LeaseReleased answers LeaseMoved: the holder found its client gone
	// and let the lease go, so the sender may take it over. Same Payload.
	LeaseReleased
	maxType
)

var typeNames = [...]string{"", "find-successor", "successors", "link-request", "link-reply", "stabilize", "notify", "link-use", "leave", "topology", "topology-reply", "data", "ping", "pong", "lease-moved", "lease-released"}

// IsReply reports whether t answers a request; replies find their way back
// to the request's origin through its Via node.
func (t Type) IsReply() bool {
	return t == Successors || t == LinkReply || t == TopologyReply || t == Pong || t == LeaseReleased
}

func (t Type) String() string {
	if t == 0 || t >= maxType {
		return "unknown"
	}
	return typeNames[t]
}

// Reason says why a node wants a link. Both ends announce their reasons
// with LinkUse; a link is closed when neither end has one left.
type Reason uint8

// Link reasons.
const (
	ReasonSuccessor Reason = 1 << iota
	ReasonLongDistance
	ReasonOnDemand
	ReasonBootstrap // contacting a known node to find our place or merge rings
	ReasonStatic    // configured by the operator
	ReasonBeacon    // our beacon: STUN, relay and signaling for a node behind a NAT
)

// Message is a control message. Dest is the routing key; Origin the sender;
// Via, when set, is a node adjacent to Origin, through which replies reach
// Origin while it is not yet routable on the ring.
type Message struct {
	Type   Type
	TTL    uint8
	Exact  bool // deliver only to the node whose ID is Dest
	Dest   nid.ID
	Origin nid.ID
	Via    nid.ID
	ID     uint64 // matches replies to requests

	From       Info   // the sender's contact information (all but Data and TopologyReply)
	Reasons    Reason // LinkRequest, LinkUse
	Joined     bool   // LinkUse: the sender has a successor link
	Closing    bool   // LinkUse: the sender is closing the link; stop using it
	Relaying   bool   // LinkUse: the sender relays for other members
	Ask        bool   // LinkUse: the sender has not heard the receiver's LinkUse on this link (with Closing: its Closing); answer with one
	Accepted   bool   // LinkReply
	Passed     bool   // LinkRequest: a node with no room passed it on to its successor; not to be passed again
	Pred       Info   // Successors, Leave: the sender's predecessor (zero ID if unknown)
	Successors []Info // Successors, Leave
	// Own: Successors lists the sender's own successors, all it knows of
	// that stretch of the ring, rather than the nodes it knows closest to
	// the asker; only then may the receiver drop the nodes it leaves out.
	Own       bool
	Name      string     // TopologyReply: the sender's certificate name
	Neighbors []Neighbor // TopologyReply: the sender's links
	Payload   []byte     // Data, LeaseMoved, LeaseReleased
}

// Neighbor is one link in a TopologyReply.
type Neighbor struct {
	ID      nid.ID
	Reasons Reason // why the sender keeps the link
	Path    uint8  // the link's path kind, as the sender's status numbers them
}

// Limits of the variable parts.
const (
	MaxNeighbors = 64
	MaxName      = 64
	MaxPayload   = 1200
)

// MaxSuccessors bounds the successor list one message carries.
const MaxSuccessors = 16

// HeaderLen is the fixed part of every control message.
const HeaderLen = 1 + 1 + 1 + 1 + 3*nid.Size + 8

const (
	version   = 1
	flagExact = 1
	flagJoin  = 2
	flagAck   = 4
	flagClose = 8
	flagRelay = 16
	flagAsk   = 32
	flagOwn   = 64
	flagPass  = 128
)

// Decoding errors.
var (
	ErrTruncated = errors.New("overlay: control message truncated")
	ErrVersion   = errors.New("overlay: unknown control message version")
	ErrType      = errors.New("overlay: unknown control message type")
	ErrField     = errors.New("overlay: invalid control message field")
	ErrTrailing  = errors.New("overlay: bytes after the control message")
)

// Append encodes m after dst.
func (m *Message) Append(dst []byte) []byte {
	var flags byte
	if m.Exact {
		flags |= flagExact
	}
	if m.Joined {
		flags |= flagJoin
	}
	if m.Accepted {
		flags |= flagAck
	}
	if m.Closing {
		flags |= flagClose
	}
	if m.Relaying {
		flags |= flagRelay
	}
	if m.Ask {
		flags |= flagAsk
	}
	if m.Own {
		flags |= flagOwn
	}
	if m.Passed {
		flags |= flagPass
	}
	dst = append(dst, version, byte(m.Type), m.TTL, flags)
	dst = append(dst, m.Dest[:]...)
	dst = append(dst, m.Origin[:]...)
	dst = append(dst, m.Via[:]...)
	dst = binary.BigEndian.AppendUint64(dst, m.ID)
	switch m.Type {
	case FindSuccessor, Notify:
		dst = appendInfo(dst, m.From)
	case LinkRequest:
		dst = append(dst, byte(m.Reasons))
		dst = appendInfo(dst, m.From)
	case LinkReply:
		dst = appendInfo(dst, m.From)
	case LinkUse:
		dst = append(dst, byte(m.Reasons))
		dst = appendInfo(dst, m.From)
	case Successors, Leave:
		dst = appendInfo(dst, m.From)
		dst = appendInfo(dst, m.Pred)
		n := min(len(m.Successors), MaxSuccessors)
		dst = append(dst, byte(n))
		for _, s := range m.Successors[:n] {
			dst = appendInfo(dst, s)
		}
	case Topology, Ping, Pong:
		dst = appendInfo(dst, m.From)
	case TopologyReply:
		name := m.Name[:min(len(m.Name), MaxName)]
		dst = append(dst, byte(len(name)))
		dst = append(dst, name...)
		n := min(len(m.Neighbors), MaxNeighbors)
		dst = append(dst, byte(n))
		for _, nb := range m.Neighbors[:n] {
			dst = append(dst, nb.ID[:]...)
			dst = append(dst, byte(nb.Reasons), nb.Path)
		}
	case Data, LeaseMoved, LeaseReleased:
		p := m.Payload[:min(len(m.Payload), MaxPayload)]
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(p)))
		dst = append(dst, p...)
	}
	return dst
}

func appendInfo(dst []byte, in Info) []byte {
	dst = append(dst, in.ID[:]...)
	n := min(len(in.Endpoints), MaxEndpoints)
	dst = append(dst, byte(n))
	turn := in.TURN
	for _, ep := range in.Endpoints[:n] {
		var flag byte
		if ep == turn {
			flag, turn = relayedFlag, netip.AddrPort{}
		}
		addr := ep.Addr().Unmap()
		if addr.Is4() {
			a := addr.As4()
			dst = append(dst, 4|flag)
			dst = append(dst, a[:]...)
		} else {
			a := addr.As16()
			dst = append(dst, 6|flag)
			dst = append(dst, a[:]...)
		}
		dst = binary.BigEndian.AppendUint16(dst, ep.Port())
	}
	n = min(len(in.Relays), MaxRelays)
	dst = append(dst, byte(n))
	for _, r := range in.Relays[:n] {
		dst = append(dst, r[:]...)
	}
	return dst
}

// Parse decodes a control message. It copies what it keeps, so b may be
// reused afterwards.
func Parse(b []byte) (Message, error) {
	var m Message
	if len(b) < HeaderLen {
		return m, ErrTruncated
	}
	if b[0] != version {
		return m, ErrVersion
	}
	m.Type = Type(b[1])
	if m.Type == 0 || m.Type >= maxType {
		return m, ErrType
	}
	m.TTL = b[2]
	flags := b[3]
	if flags&^(flagExact|flagJoin|flagAck|flagClose|flagRelay|flagAsk|flagOwn|flagPass) != 0 {
		return m, ErrField
	}
	m.Exact, m.Joined, m.Accepted = flags&flagExact != 0, flags&flagJoin != 0, flags&flagAck != 0
	m.Closing, m.Relaying, m.Ask = flags&flagClose != 0, flags&flagRelay != 0, flags&flagAsk != 0
	m.Own, m.Passed = flags&flagOwn != 0, flags&flagPass != 0
	copy(m.Dest[:], b[4:])
	copy(m.Origin[:], b[4+nid.Size:])
	copy(m.Via[:], b[4+2*nid.Size:])
	m.ID = binary.BigEndian.Uint64(b[4+3*nid.Size:])
	r := reader{b: b[HeaderLen:]}
	switch m.Type {
	case FindSuccessor, Notify, LinkReply:
		m.From = r.info()
	case LinkRequest:
		m.Reasons = Reason(r.byte())
		m.From = r.info()
	case LinkUse:
		m.Reasons = Reason(r.byte())
		m.From = r.info()
	case Successors, Leave:
		m.From = r.info()
		m.Pred = r.info()
		n := int(r.byte())
		if n > MaxSuccessors {
			return m, ErrField
		}
		for range n {
			if r.err != nil {
				break
			}
			m.Successors = append(m.Successors, r.info())
		}
	case Topology, Ping, Pong:
		m.From = r.info()
	case TopologyReply:
		name := r.take(int(r.byte()))
		if len(name) > MaxName {
			return m, ErrField
		}
		m.Name = string(name)
		n := int(r.byte())
		if n > MaxNeighbors {
			return m, ErrField
		}
		for range n {
			id, tail := r.take(nid.Size), r.take(2)
			if r.err != nil {
				break
			}
			m.Neighbors = append(m.Neighbors, Neighbor{ID: nid.ID(id), Reasons: Reason(tail[0]), Path: tail[1]})
		}
	case Data, LeaseMoved, LeaseReleased:
		size := r.take(2)
		if r.err != nil {
			break
		}
		n := int(binary.BigEndian.Uint16(size))
		if n > MaxPayload {
			return m, ErrField
		}
		m.Payload = append([]byte(nil), r.take(n)...)
	}
	if r.err != nil {
		return m, r.err
	}
	if len(r.b) != 0 {
		return m, ErrTrailing
	}
	return m, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = ErrTruncated
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) byte() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) info() Info {
	var in Info
	if id := r.take(nid.Size); id != nil {
		copy(in.ID[:], id)
	}
	n := int(r.byte())
	if n > MaxEndpoints {
		r.err = ErrField
		return in
	}
	for range n {
		var addr netip.Addr
		family := r.byte()
		relayed := family&relayedFlag != 0
		if relayed && in.TURN.IsValid() {
			r.err = ErrField // a node has one relayed address
			return in
		}
		switch family &^ relayedFlag {
		case 4:
			if a := r.take(4); a != nil {
				addr = netip.AddrFrom4([4]byte(a))
			}
		case 6:
			if a := r.take(16); a != nil {
				addr = netip.AddrFrom16([16]byte(a))
				if addr.Is4In6() {
					r.err = ErrField // always sent unmapped; anything else is garbage
				}
			}
		default:
			if r.err == nil {
				r.err = ErrField
			}
		}
		port := r.take(2)
		if r.err != nil {
			return in
		}
		p := binary.BigEndian.Uint16(port)
		if p == 0 || !addr.IsValid() {
			r.err = ErrField
			return in
		}
		ep := netip.AddrPortFrom(addr, p)
		if relayed {
			if slices.Contains(in.Endpoints, ep) {
				r.err = ErrField // flagged where it first appears, or nowhere
				return in
			}
			in.TURN = ep
		}
		in.Endpoints = append(in.Endpoints, ep)
	}
	n = int(r.byte())
	if n > MaxRelays {
		r.err = ErrField
		return in
	}
	for range n {
		if id := r.take(nid.Size); id != nil {
			in.Relays = append(in.Relays, nid.ID(id))
		}
	}
	return in
}
