package node

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"burrow/l2"
	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// An operator's `burrow ping` sends a Ping control message to a member
// and times its Pong. The path is read off the link the Pong arrived on:
// the link to the member itself names its kind (lan, direct, relay, turn,
// websocket); a Pong from any other neighbour crossed the overlay, hop by
// hop. A member with no link yet is asked for an on-demand link at the
// first ping, so that later pings show the path turn direct.

// PingResult is the answer to one ping, or its absence.
type PingResult struct {
	Target   nid.ID
	Name     string // the member's certificate name, when this node holds it
	Answered bool
	RTT      time.Duration
	// Path is lan, direct, relay, turn or websocket when the Pong came
	// over the link to the member, and multi-hop when it crossed the
	// overlay.
	Path string
	// Endpoint is where the link's datagrams go (lan, direct, turn).
	Endpoint string
	// Via is the relaying member's name (relay), or the neighbour the
	// Pong came from (multi-hop); ViaPath is the kind of this node's own
	// link to it, e.g. websocket for a node that only reaches its beacon
	// over WebSocket.
	Via     string
	ViaPath string
	// Hops is how many links the Pong crossed.
	Hops int
}

type pendingPing struct {
	target   nid.ID
	sent     time.Time
	deadline time.Time
	done     func(PingResult)
}

type pingState struct {
	pending map[uint64]*pendingPing
}

// ErrPingSelf: the member to ping is this node.
var ErrPingSelf = errors.New("that is this node")

// Ping sends target a Ping at now and calls done, inside the core, with
// its Pong or once timeout passed without one.
func (n *Node) Ping(target nid.ID, timeout time.Duration, now time.Time, done func(PingResult)) error {
	n.now = now
	if target == n.self {
		return ErrPingSelf
	}
	if n.pings.pending == nil {
		n.pings.pending = make(map[uint64]*pendingPing)
	}
	id := n.ov.rng.Uint64() | 1
	n.pings.pending[id] = &pendingPing{target: target, sent: now, deadline: now.Add(timeout), done: done}
	n.originate(&overlay.Message{Type: overlay.Ping, Dest: target, Exact: true, Origin: n.self, Via: n.via(),
		ID: id, From: n.selfInfo()}, now)
	n.openOnDemandLink(target, now)
	n.publishIfDirty()
	return nil
}

func (n *Node) answerPing(m *overlay.Message, now time.Time) {
	n.reply(m, &overlay.Message{Type: overlay.Pong, From: n.selfInfo()}, now)
}

// takePong times the Pong of a pending ping and names the path it took.
func (n *Node) takePong(m *overlay.Message, from *link.Link, now time.Time) {
	p := n.pings.pending[m.ID]
	if p == nil || p.target != m.Origin {
		return // late, or not ours
	}
	delete(n.pings.pending, m.ID)
	r := PingResult{Target: p.target, Answered: true, RTT: now.Sub(p.sent), Hops: controlTTL - int(m.TTL)}
	if l := n.links.Links()[p.target]; l != nil {
		r.Name = l.Peer.Name
	}
	switch {
	case from == nil:
	case from.Peer.ID == p.target:
		r.Path = n.pathOf(from)
		ep := from.Endpoint()
		if ep.IsRelay() {
			r.Via, r.ViaPath = n.describeNeighbour(ep.Relay)
		} else if ep.Addr.IsValid() {
			r.Endpoint = ep.Addr.String()
		}
	default:
		r.Path = "multi-hop"
		r.Via, r.ViaPath = from.Peer.Name, n.pathOf(from)
	}
	p.done(r)
}

// describeNeighbour is an adjacent member's name (its ID's first digits
// without a link) and the kind of this node's link to it.
func (n *Node) describeNeighbour(id nid.ID) (name, path string) {
	l := n.links.Links()[id]
	if l == nil {
		return id.Short(), ""
	}
	return l.Peer.Name, n.pathOf(l)
}

// pingTick gives up on the pings whose time is up.
func (n *Node) pingTick(now time.Time) {
	for id, p := range n.pings.pending {
		if !now.Before(p.deadline) {
			delete(n.pings.pending, id)
			p.done(PingResult{Target: p.target})
		}
	}
}

// pingDeadline is the earliest time a ping gives up; zero for none.
func (n *Node) pingDeadline() time.Time {
	var next time.Time
	for _, p := range n.pings.pending {
		if next.IsZero() || p.deadline.Before(next) {
			next = p.deadline
		}
	}
	return next
}

// ResolveMember finds the member an operator names: by certificate name,
// by node ID (its first digits suffice when they are unique among the
// members this node knows of) or by an address inside the network (from
// certificates, or learned from the member's traffic). ok is false when
// nothing known matches; an error means the query matches several.
func (n *Node) ResolveMember(query string) (id nid.ID, ok bool, err error) {
	if full, err := nid.Parse(query); err == nil {
		return full, true, nil
	}
	if ip, err := netip.ParseAddr(query); err == nil {
		id, ok := n.memberAt(ip.Unmap())
		return id, ok, nil
	}
	matches := map[nid.ID]bool{}
	hexPrefix := len(query) >= 4 && strings.Trim(strings.ToLower(query), "0123456789abcdef") == ""
	consider := func(cand nid.ID, name string) {
		if name == query || hexPrefix && strings.HasPrefix(cand.String(), strings.ToLower(query)) {
			matches[cand] = true
		}
	}
	if n.cfg.Name == query {
		return n.self, true, nil
	}
	for cand, l := range n.links.Links() {
		consider(cand, l.Peer.Name)
	}
	for cand, e := range n.topo.entries {
		consider(cand, e.name)
	}
	for cand := range n.ov.peers {
		consider(cand, "")
	}
	switch len(matches) {
	case 0:
		return nid.ID{}, false, nil
	case 1:
		for cand := range matches {
			return cand, true, nil
		}
	}
	var names []string
	for _, cand := range nid.SortedKeys(matches) {
		names = append(names, cand.Short())
	}
	return nid.ID{}, false, fmt.Errorf("%q matches %d members (%s): give more of the node ID", query, len(matches), strings.Join(names, ", "))
}

// memberAt is the member holding ip: the one whose certificate lists it,
// else the bridge behind the MAC the address was last seen with. A miss
// asks the DHT, so that a later try may find it.
func (n *Node) memberAt(ip netip.Addr) (nid.ID, bool) {
	for id, l := range n.links.Links() {
		for _, p := range l.Peer.Addresses {
			if p.Addr() == ip {
				return id, true
			}
		}
	}
	e, ok := n.knownNeighbor(ip, n.now)
	if !ok || e.mac == (l2.MAC{}) {
		return nid.ID{}, false
	}
	root, ok := n.learn.RootOf(e.mac)
	return root, ok && root != (nid.ID{})
}

// BridgeOf is the member behind which mac was last seen, for an address
// the operator names whose MAC the local kernel resolved.
func (n *Node) BridgeOf(mac l2.MAC) (nid.ID, bool) {
	root, ok := n.learn.RootOf(mac)
	return root, ok && root != (nid.ID{})
}
