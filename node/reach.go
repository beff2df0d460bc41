package node

import (
	"net/netip"
	"slices"
	"time"

	"burrow/link"
	"burrow/nat"
	"burrow/nid"
	"burrow/overlay"
	"burrow/ratelimit"
)

// ReachConfig says how the node gets through NATs and firewalls.
type ReachConfig struct {
	// Beacons are well-known members: first contacts, STUN servers and
	// relays. The node keeps a link to one of them, so a relayed path to it
	// always exists.
	Beacons []Beacon
	// ProbeEvery is how often the node asks the beacons how they see it.
	ProbeEvery time.Duration
	// PunchBudget is how many ports of a peer's public address a round of
	// birthday probing guesses when the peer's NAT maps every destination
	// to a new port (see birthday.go). 0 turns birthday probing off.
	PunchBudget int
}

// Beacon is one beacon's address, and whether it also takes WebSocket
// connections for networks that block UDP.
type Beacon struct {
	Addr      netip.AddrPort
	WebSocket bool
}

// StreamOpener is implemented by Outputs that can open a message-framed
// stream (WebSocket) to a beacon; the core asks for one when UDP to every
// beacon failed.
type StreamOpener interface {
	OpenStream(beacon int)
}

// DefaultProbeEvery is how often beacons are asked for our mapping.
const DefaultProbeEvery = 30 * time.Second

// streamHeadStart is how long the first beacon dial tries UDP alone before
// a WebSocket to a beacon is opened beside it, while no beacon has ever
// answered over UDP: where UDP works it wins this race, where it is
// blocked the WebSocket carries the link within a second instead of after
// the UDP attempts give up.
const streamHeadStart = 250 * time.Millisecond

type reachState struct {
	cfg       ReachConfig
	prober    *nat.Prober
	stunLimit *ratelimit.Limiter
	turn      netip.AddrPort // our relayed address on a TURN server
	// beacon management: one dial at a time, in turn, until a link is up.
	next       int
	dial       *link.Dial
	beacon     nid.ID // the beacon we are linked to
	failedUDP  int    // beacons that failed over UDP in a row
	streamWant bool
	// firstDial is when the first beacon dial started, and udpWorks says a
	// beacon answered over UDP since: until then the site's reachability
	// is unknown, and a WebSocket races the UDP dial.
	firstDial time.Time
	udpWorks  bool
	raced     bool
	stream    *link.Dial // a dial over a WebSocket, beside the UDP one
	// birthdays are the probings toward peers linked over a relay.
	birthdays map[nid.ID]*birthday
}

func (n *Node) initReach(now time.Time) {
	r := &n.reach
	r.cfg = n.cfg.Reach
	if r.cfg.ProbeEvery <= 0 {
		r.cfg.ProbeEvery = DefaultProbeEvery
	}
	var servers []netip.AddrPort
	for _, b := range r.cfg.Beacons {
		servers = append(servers, b.Addr)
		if second, ok := nat.SecondPort(b.Addr); ok {
			servers = append(servers, second)
		}
	}
	r.prober = nat.NewProber(servers, n.cfg.Overlay.Advertise, r.cfg.ProbeEvery, n.cfg.Handshake.Rand, now)
	r.stunLimit = NewSTUNLimiter()
	r.birthdays = make(map[nid.ID]*birthday)
}

// endpoints are this node's candidates: its own addresses, those the
// beacons see it at, and its TURN relayed address.
func (n *Node) endpoints() []netip.AddrPort {
	out := slices.Clone(n.ov.cfg.Advertise)
	for _, ep := range n.reach.prober.Reflexive() {
		if !slices.Contains(out, ep) {
			out = append(out, ep)
		}
	}
	if n.reach.turn.IsValid() {
		out = append(out, n.reach.turn)
	}
	return out[:min(len(out), overlay.MaxEndpoints)]
}

// hasIPv6 reports whether this node offers an IPv6 endpoint of its own:
// only then can it reach the peers' IPv6 endpoints.
func (n *Node) hasIPv6() bool {
	return slices.ContainsFunc(n.ov.cfg.Advertise, func(ep netip.AddrPort) bool { return ep.Addr().Is6() && !ep.Addr().Is4In6() })
}

// mayUpgrade reports whether link l should learn the peer's candidates
// as they are heard of, to move to a better path: a relayed link, to
// punch a direct one, and where this node has IPv6, a link not yet on a
// direct IPv6 path.
func (n *Node) mayUpgrade(l *link.Link) bool {
	return l.Relayed() || (!l.OnBestPath() && n.hasIPv6())
}

// NewSTUNLimiter bounds the STUN requests a node answers: ten a second
// from one address, two thousand in all.
func NewSTUNLimiter() *ratelimit.Limiter { return ratelimit.New(10, 2000, 4096) }

// SetRelayedAddress records the node's TURN allocation (zero when lost).
func (n *Node) SetRelayedAddress(addr netip.AddrPort) { n.reach.turn = addr }

// handleSTUN answers binding requests (every member serves STUN) and
// takes binding responses to our own probes.
func (n *Node) handleSTUN(from link.Endpoint, b []byte, now time.Time) {
	m, err := nat.Parse(b)
	if err != nil || from.IsRelay() || from.Via != link.UDP {
		n.stats.drop(DropMalformed)
		return
	}
	if m.Request {
		if !n.reach.stunLimit.Allow(from.Addr.Addr(), now) {
			n.stats.drop(DropRateLimited)
			return
		}
		answer, err := nat.Answer(m, len(b), from.Addr)
		if err != nil {
			n.stats.drop(DropTooShort)
			return
		}
		n.out.SendDatagram(from, answer)
		return
	}
	if n.reach.prober.Answer(from.Addr, m) {
		n.log.Info("reflexive address", "addresses", n.reach.prober.Reflexive(), "nat", n.reach.prober.Behaviour())
	}
}

// askLinkedPeer makes a peer linked straight at a public address one of
// the STUN servers, as every member answers STUN: a node that others
// contacted first picked no one to ask, and a second server, besides the
// beacon, is what tells a NAT that maps every destination to a new port
// (birthday.go) from one that keeps a mapping per socket.
func (n *Node) askLinkedPeer(l *link.Link) {
	if ep := l.Endpoint(); ep.Via == link.UDP && !ep.IsRelay() && publicAddr(ep.Addr.Addr()) {
		n.reach.prober.AddServer(ep.Addr, maxSTUNServers, n.now)
	}
}

// reachTick sends due STUN probes and keeps a link to a beacon.
func (n *Node) reachTick(now time.Time) {
	r := &n.reach
	for _, req := range r.prober.Due(now) {
		n.out.SendDatagram(link.UDPEndpoint(req.To), req.Msg)
	}
	if len(r.cfg.Beacons) == 0 || (r.beacon != (nid.ID{}) && n.upLink(r.beacon) != nil) {
		return
	}
	if r.dial != nil {
		n.raceStream(now)
		return
	}
	r.beacon = nid.ID{}
	for _, id := range n.adjacency {
		if l := n.upLink(id); l != nil && n.isBeaconAddress(l.Endpoint()) {
			n.adoptBeacon(l, n.peer(id))
			return
		}
	}
	if r.failedUDP >= len(r.cfg.Beacons) {
		// UDP reached no beacon: ask for a stream to one that takes them.
		for i, b := range r.cfg.Beacons {
			if so, ok := n.out.(StreamOpener); ok && b.WebSocket && !r.streamWant {
				r.streamWant = true
				so.OpenStream(i)
				n.log.Info("no beacon answers over UDP; trying WebSocket", "beacon", b.Addr)
				break
			}
		}
		r.failedUDP = 0
	}
	b := r.cfg.Beacons[r.next%len(r.cfg.Beacons)]
	r.dial = n.links.AddDial([]link.Endpoint{link.UDPEndpoint(b.Addr)}, link.DialOptions{Attempts: 2}, now)
	if r.firstDial.IsZero() {
		r.firstDial = now
	}
}

// raceStream opens a WebSocket to a beacon beside the first UDP dial once
// UDP had its head start, while no beacon ever answered over UDP.
func (n *Node) raceStream(now time.Time) {
	r := &n.reach
	so, ok := n.out.(StreamOpener)
	if !ok || r.raced || r.udpWorks || r.streamWant || now.Sub(r.firstDial) < streamHeadStart {
		return
	}
	r.raced = true
	for i, b := range r.cfg.Beacons {
		if b.WebSocket {
			r.streamWant = true
			so.OpenStream(i)
			n.log.Info("no beacon has answered over UDP yet; trying WebSocket too", "beacon", b.Addr)
			return
		}
	}
}

// reachDeadline is when reachTick must run to start the WebSocket race.
func (n *Node) reachDeadline() time.Time {
	r := &n.reach
	if r.raced || r.udpWorks || r.dial == nil || r.firstDial.IsZero() {
		return time.Time{}
	}
	return r.firstDial.Add(streamHeadStart)
}

// StreamUp tells the core a stream to beacon i is open: it links over it.
func (n *Node) StreamUp(beacon int, stream uint32, now time.Time) {
	n.now = now
	r := &n.reach
	r.streamWant = false
	if r.stream != nil {
		n.links.RemoveDial(r.stream)
	}
	r.stream = n.links.AddDial([]link.Endpoint{{Via: link.Stream, Stream: stream}}, link.DialOptions{Attempts: 3}, now)
	n.publishIfDirty()
}

// StreamDown tells the core a stream closed; links over it will time out
// and the beacon dial starts over.
func (n *Node) StreamDown(stream uint32, now time.Time) {
	n.now = now
	n.reach.streamWant = false
}

// beaconLinkUp marks a link to the beacon we dialed; it reports whether l
// is that link. A beacon that remembers us may link first, before our dial
// learned who answers at its address, so the address counts too.
func (n *Node) beaconLinkUp(l *link.Link, ps *peerState) bool {
	r := &n.reach
	answers := func(d *link.Dial) bool {
		return d != nil && (d.Peer == l.Peer.ID || d.Peer == nid.ID{} && slices.Contains(d.Endpoints, l.Endpoint()))
	}
	if !answers(r.dial) && !answers(r.stream) {
		return false
	}
	n.adoptBeacon(l, ps)
	return true
}

// adoptBeacon makes l the node's beacon link and ends any beacon dial.
func (n *Node) adoptBeacon(l *link.Link, ps *peerState) {
	r := &n.reach
	for _, d := range []*link.Dial{r.dial, r.stream} {
		if d != nil {
			n.links.RemoveDial(d)
		}
	}
	r.dial, r.stream, r.beacon, r.failedUDP = nil, nil, l.Peer.ID, 0
	ps.local |= overlay.ReasonBeacon
	if ep := l.Endpoint(); ep.Via == link.UDP && !ep.IsRelay() {
		r.udpWorks = true
		return
	}
	// Over a WebSocket: keep trying the beacon's UDP address, and move
	// there when UDP gets through.
	for _, b := range r.cfg.Beacons {
		l.AddCandidates([]link.Endpoint{link.UDPEndpoint(b.Addr)})
	}
}

// isBeaconAddress reports whether ep is a configured beacon's UDP address.
func (n *Node) isBeaconAddress(ep link.Endpoint) bool {
	return slices.ContainsFunc(n.reach.cfg.Beacons, func(b Beacon) bool { return link.UDPEndpoint(b.Addr) == ep })
}

// beaconDialFailed moves on to the next beacon.
func (n *Node) beaconDialFailed(d *link.Dial) bool {
	r := &n.reach
	if r.stream == d {
		r.stream = nil
		return true
	}
	if r.dial != d {
		return false
	}
	r.dial = nil
	r.next++
	if d.Endpoints[0].Via == link.UDP {
		r.failedUDP++
	}
	return true
}

// ReachStatus describes how the node is reached.
type ReachStatus struct {
	NAT       string   `json:"nat"`
	Reflexive []string `json:"reflexive,omitempty"`
	Relayed   string   `json:"turn_relayed,omitempty"`
	Beacon    string   `json:"beacon,omitempty"`
	STUNSent  uint64   `json:"stun_sent"`
	STUNGot   uint64   `json:"stun_answered"`
	Punched   uint64   `json:"punch_probes"`
}

func (n *Node) reachStatus() ReachStatus {
	r := &n.reach
	st := ReachStatus{NAT: r.prober.Behaviour().String(), STUNSent: r.prober.Sent, STUNGot: r.prober.Answered, Punched: n.stats.PunchProbes.Load()}
	for _, ep := range r.prober.Reflexive() {
		st.Reflexive = append(st.Reflexive, ep.String())
	}
	if r.turn.IsValid() {
		st.Relayed = r.turn.String()
	}
	if r.beacon != (nid.ID{}) {
		st.Beacon = r.beacon.String()
	}
	return st
}
