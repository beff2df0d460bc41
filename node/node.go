// Package node is burrow's core: what the EdgeVPN seed splits into a
// node's overlay controller, SDN controller and switch (section 3, Fig. 1),
// in one. It composes links (package link), the Bounded Flood switch
// (package flood), the Symphony overlay (package overlay) with its
// on-demand links, NAT traversal and relaying, and the services on the TAP
// (DHCP, DNS, ARP answers and Warrens subnets, kept in the DHT) into one
// state machine driven by events — a datagram, a frame from the TAP, a
// timer — and answers with actions through its Output. It does no I/O,
// starts no goroutines and reads no clock; the daemon (package runtime)
// and the simulator drive the same code.
//
// Per-frame work is split off into the Dataplane, which switches, encrypts
// and decrypts known traffic from an immutable snapshot the core publishes,
// and hands everything else (broadcasts, misses, handshakes) to the core.
package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"burrow/firewall"
	"burrow/flood"
	"burrow/l2"
	"burrow/link"
	"burrow/nat"
	"burrow/nid"
	"burrow/overlay"
	"burrow/wire"
)

// localPort is the switch port of the TAP; links get numbers from 1.
const localPort = uint32(flood.LocalPort)

// StaticPeer is a configured peer: the node keeps a link to it.
type StaticPeer struct {
	Endpoint netip.AddrPort
	Key      *[32]byte // optional: pin the peer's static key
}

// Config configures a Node.
type Config struct {
	// Name is the node's name from its certificate, for maps and logs.
	Name      string
	Handshake link.HandshakeConfig
	Verify    func(cert []byte, static [32]byte, now time.Time) (link.Peer, error)
	Timers    link.Timers
	// MAC is the local TAP's address, always known to live on this bridge.
	MAC   l2.MAC
	Peers []StaticPeer
	// MaxMACs bounds the learning table, MACAge expires its entries and
	// FlowIdle removes flows nobody used for that long.
	MaxMACs  int
	MACAge   time.Duration
	FlowIdle time.Duration
	MaxFlows int
	Log      *slog.Logger
	// Trace, when set, observes events the simulator measures.
	Trace    Trace
	Overlay  OverlayConfig
	Services ServicesConfig
	// RelayRate caps the bytes per second this node relays for other
	// members whose direct path failed; 0 relays nothing.
	RelayRate float64
	Reach     ReachConfig
	// Rendezvous is first contact through a rendezvous server.
	Rendezvous RendezvousConfig
	// Revocations are the CA's revocations: which members no one may link
	// to any more.
	Revocations RevocationConfig
	// Firewall, when set, decides which frames may enter and leave the
	// TAP; the runtime may change its policy at any time.
	Firewall *firewall.Firewall
}

// Trace receives observations for experiments; nil fields are skipped.
type Trace struct {
	// Delivered is called when a broadcast is written to the local TAP,
	// with the bridge that started it and the hops it took.
	Delivered func(root nid.ID, hops uint8, frame []byte)
}

// Output carries the core's actions out. Slices are valid only during the
// call.
type Output interface {
	// SendDatagram never gets a relayed endpoint: the core wraps those.
	SendDatagram(to link.Endpoint, datagram []byte)
	WriteFrame(frame []byte, off l2.Offload)
}

// Node is the core state machine. It is not safe for concurrent use; the
// Dataplane it returns is.
type Node struct {
	cfg       Config
	self      nid.ID
	out       Output
	log       *slog.Logger
	links     *link.Manager
	learn     *flood.Table
	flows     map[flowKey]*flow
	adjacency []nid.ID // peers with an up link, sorted clockwise from self
	targets   []flood.Target
	buf       []byte
	relayBuf  []byte
	snap      atomic.Pointer[snapshot]
	dirty     dirtyParts
	stats     Stats
	dp        *Dataplane
	ov        overlayState
	rev       revocationState
	reach     reachState
	rv        rendezvousState
	topo      topologyState
	svc       servicesState
	groups    groupsState
	settings  settingsState
	pings     pingState
	now       time.Time // time of the event being handled
	// recon is reconcile's working memory, kept for its capacity.
	recon *reconcileScratch
	// nextFirewallSweep is when the firewall next forgets idle connections.
	nextFirewallSweep time.Time
	// relayer sends the relayed datagrams the core releases, made the
	// first time some wait.
	relayer *Worker
}

// firewallSweepEvery is how often idle connections leave the firewall's
// table; until then they only take room, as they pass nothing.
const firewallSweepEvery = 10 * time.Second

// Defaults for zero Config fields.
const (
	DefaultMaxMACs  = 8192
	DefaultMACAge   = 5 * time.Minute
	DefaultFlowIdle = 60 * time.Second
	DefaultMaxFlows = 16384
)

// New creates a node. now is the start time, used to schedule the first dials.
func New(cfg Config, out Output, now time.Time) (*Node, error) {
	if cfg.Verify == nil || cfg.Handshake.Rand == nil {
		return nil, errors.New("node: Verify and Handshake.Rand are required")
	}
	if cfg.MaxMACs <= 0 {
		cfg.MaxMACs = DefaultMaxMACs
	}
	if cfg.MACAge <= 0 {
		cfg.MACAge = DefaultMACAge
	}
	if cfg.FlowIdle <= 0 {
		cfg.FlowIdle = DefaultFlowIdle
	}
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = DefaultMaxFlows
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n := &Node{
		cfg:   cfg,
		out:   out,
		log:   cfg.Log,
		learn: flood.NewTable(cfg.MaxMACs, cfg.MACAge),
		flows: make(map[flowKey]*flow),
		buf:   make([]byte, 0, 2048),
	}
	if cfg.Handshake.Boot == 0 {
		var b [8]byte
		if _, err := cfg.Handshake.Rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("node: random source: %w", err)
		}
		cfg.Handshake.Boot = binary.LittleEndian.Uint64(b[:]) | 1
		n.cfg.Handshake.Boot = cfg.Handshake.Boot
	}
	n.initRevocations(now)
	n.links = link.NewManager(link.Config{Handshake: cfg.Handshake, Verify: n.verifyPeer, Timers: cfg.Timers}, (*linkEvents)(n))
	n.self = n.links.Self()
	var gateKey [16]byte
	if _, err := cfg.Handshake.Rand.Read(gateKey[:]); err != nil {
		return nil, fmt.Errorf("node: random source: %w", err)
	}
	n.dp = &Dataplane{snap: &n.snap, stats: &n.stats, relay: newRelayBudget(cfg.RelayRate), gate: newSourceGate(gateKey), trace: cfg.Trace, fw: cfg.Firewall}
	n.initReach(now)
	n.initRendezvous()
	n.initOverlay(now)
	if err := n.initServices(now); err != nil {
		return nil, err
	}
	for _, p := range cfg.Peers {
		n.links.AddDial([]link.Endpoint{link.UDPEndpoint(p.Endpoint)}, link.DialOptions{Key: p.Key}, now)
		if p.Key != nil {
			n.peer(nid.FromPublicKey(*p.Key)).local |= overlay.ReasonStatic
		}
	}
	n.learn.Learn(cfg.MAC, flood.LocalPort, n.self, now)
	n.startServices(now)
	n.publish()
	return n, nil
}

// Self is this node's ID.
func (n *Node) Self() nid.ID { return n.self }

// Dataplane returns the concurrent fast path bound to this node.
func (n *Node) Dataplane() *Dataplane { return n.dp }

// Links exposes the link manager (for status and the overlay).
func (n *Node) Links() *link.Manager { return n.links }

// Stats are the node's counters.
func (n *Node) Stats() *Stats { return &n.stats }

// Handle processes an event the data path could not finish itself.
func (n *Node) Handle(ev Event, now time.Time) {
	n.now = now
	switch ev.Kind {
	case EventDatagram:
		n.handleDatagram(ev.From, ev.Data, now)
	case EventConfirmed:
		n.links.Confirmed(ev.Session, now)
	case EventFromLink:
		n.handleFromLink(ev.Port, ev.Data, now)
	case EventFromTAP:
		n.switchFrame(localPort, ev.Data, ev.Offload, n.self, false, now)
	case EventFloodSeen:
		n.learnFromFlood(ev.Port, ev.Data, now)
	case EventSuspect:
		if l := n.links.LinkByPort(ev.Port); l != nil {
			n.links.Suspect(l, now)
		}
	case EventUncertified:
		n.openOnDemandLink(ev.Origin, now)
	case EventUnjudged:
		n.holdFrame(heldFrame{frame: ev.Data, off: ev.Offload, origin: ev.Origin}, ev.Addr, now)
	case EventRelayWaiting:
		n.releaseRelayed(now) // and the next deadline, relayReleaseEvery away, keeps releasing
	}
	n.publishIfDirty()
}

func (n *Node) handleDatagram(from link.Endpoint, b []byte, now time.Time) {
	if nat.IsSTUN(b) {
		n.handleSTUN(from, b, now)
		return
	}
	if !wire.IsBurrow(b) {
		n.stats.drop(DropNotBurrow)
		return
	}
	n.links.HandleHandshake(from, b, now)
}

// Tick runs the timers due at now.
func (n *Node) Tick(now time.Time) {
	n.now = now
	n.links.Tick(now)
	n.reachTick(now)
	n.birthdayTick(now)
	n.rendezvousTick(now)
	n.overlayTick(now)
	n.topologyTick(now)
	n.servicesTick(now)
	n.pingTick(now)
	n.releaseRelayed(now)
	n.learn.Learn(n.cfg.MAC, flood.LocalPort, n.self, now)
	n.learn.Expire(now)
	if n.cfg.Firewall != nil && !now.Before(n.nextFirewallSweep) {
		n.cfg.Firewall.Sweep(now.UnixNano())
		n.nextFirewallSweep = now.Add(firewallSweepEvery)
	}
	idle := now.Add(-n.cfg.FlowIdle).UnixNano()
	for k, f := range n.flows {
		if f.lastUsed.Load() < idle {
			delete(n.flows, k)
			n.dirty |= dirtyFlows
		}
	}
	n.publishIfDirty()
}

// NextDeadline is when Tick should run next.
func (n *Node) NextDeadline(now time.Time) time.Time {
	next := n.links.NextDeadline(now)
	if housekeeping := now.Add(time.Second); housekeeping.Before(next) {
		next = housekeeping
	}
	if n.dp.relay.hasWaiting() {
		next = now.Add(relayReleaseEvery)
	}
	if !n.ov.cfg.Disabled && n.ov.stabilize.Before(next) {
		next = n.ov.stabilize
	}
	if !n.ov.cfg.Disabled {
		for _, t := range []time.Time{n.longDistanceDeadline(now), n.peersDeadline(now)} {
			if !t.IsZero() && t.Before(next) {
				next = t
			}
		}
	}
	for _, t := range []time.Time{n.servicesDeadline(now), n.reachDeadline(), n.pingDeadline(), n.birthdayDeadline(now)} {
		if !t.IsZero() && t.Before(next) {
			next = t
		}
	}
	if next.Before(now) {
		return now
	}
	return next
}

// linkEvents adapts the Node to link.Events without exporting the methods.
type linkEvents Node

func (e *linkEvents) SendDatagram(to link.Endpoint, b []byte) { (*Node)(e).sendDatagram(to, b) }

// sendDatagram sends a datagram the core made, wrapping it for a relay
// when its endpoint is relayed.
func (n *Node) sendDatagram(to link.Endpoint, b []byte) {
	if !to.IsRelay() {
		n.out.SendDatagram(to, b)
		return
	}
	relay := n.upLink(to.Relay)
	if relay == nil {
		n.stats.drop(DropNoRoute)
		return
	}
	n.relayBuf = append(n.relayBuf[:0], byte(wire.InnerRelayTo))
	n.relayBuf = append(n.relayBuf, to.Peer[:]...)
	n.relayBuf = append(n.relayBuf, b...)
	n.links.Send(relay, n.relayBuf, n.now)
}

func (e *linkEvents) SessionsChanged() { e.dirty |= dirtyLinks }

func (e *linkEvents) SessionInstalled() {
	e.dirty |= dirtyLinks
	(*Node)(e).publish()
}

// LinkHealth: a link turned suspect or answered again; floods go around a
// suspect peer.
func (e *linkEvents) LinkHealth(*link.Link) { (*Node)(e).setAdjacency() }

func (e *linkEvents) DialFailed(d *link.Dial) {
	n := (*Node)(e)
	n.log.Debug("giving up dial", "endpoints", d.Endpoints, "peer", d.Peer.Short(), "err", d.LastError)
	if n.beaconDialFailed(d) || n.rendezvousDialFailed(d) {
		return
	}
	n.overlayDialFailed(d, n.now)
}

func (e *linkEvents) LinkUp(l *link.Link) {
	n := (*Node)(e)
	n.log.Info("link up", "peer", l.Peer.Name, "nid", l.Peer.ID.Short(), "endpoint", l.Endpoint(), "cipher", l.Current().Cipher)
	n.setAdjacency()
	n.rendezvousLinkUp(l)
	n.askLinkedPeer(l)
	n.shareRevocations(l)
	n.advertiseLeaves(l, l.Since)
	n.overlayLinkUp(l, l.Since)
	n.lookUpLater(l.Peer.ID, n.now)
}

func (e *linkEvents) LinkDown(l *link.Link, reason string) {
	n := (*Node)(e)
	n.log.Info("link down", "peer", l.Peer.Name, "nid", l.Peer.ID.Short(), "reason", reason)
	n.setAdjacency()
	n.reroutePort(l.Port)
	n.overlayLinkDown(l, n.now)
}

// reroutePort stops using a port that is gone: flows that came in through
// it go, and what was learned through it is reached by routing toward its
// bridge until traffic teaches a port again — no flood, no wait.
func (n *Node) reroutePort(port uint32) {
	if n.learn.Reroute(flood.Port(port)) > 0 {
		n.dirty |= dirtyMACs
	}
	for k, f := range n.flows {
		switch {
		case k.in == port:
			delete(n.flows, k)
		case f.out == port && f.root == (nid.ID{}):
			delete(n.flows, k) // nowhere known to route it: the next frame floods
		case f.out == port:
			n.flows[k] = f.movedTo(routedPort, f.root)
		}
	}
	n.dirty |= dirtyFlows
}

// setAdjacency recomputes the peers Bounded Flood forwards to: those with
// an up link that is neither retiring nor suspect, and that is part of
// the overlay (see floodsOver).
func (n *Node) setAdjacency() {
	n.adjacency = n.adjacency[:0]
	for id, l := range n.links.Links() {
		floods := l.Up() && !l.Suspect()
		if ps := n.ov.peers[id]; ps != nil {
			floods = floods && floodsOver(ps)
			ps.adjacent = floods
		}
		if floods {
			n.adjacency = append(n.adjacency, id)
		}
	}
	flood.SortClockwise(n.self, n.adjacency)
	n.dirty |= dirtyLinks
}

// adjacentLink is the link to id when floods cross it (setAdjacency): not
// one that retires, is suspect, or is kept by neither end.
func (n *Node) adjacentLink(id nid.ID) *link.Link {
	if slices.Contains(n.adjacency, id) {
		return n.links.Links()[id]
	}
	return nil
}

// Adjacency returns the peers with an up link, sorted clockwise from self.
func (n *Node) Adjacency() []nid.ID { return slices.Clone(n.adjacency) }

func (n *Node) publishIfDirty() {
	if n.dirty != 0 {
		n.publish()
	}
}

func (n *Node) String() string { return fmt.Sprintf("node %s", n.self.Short()) }
