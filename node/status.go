package node

import (
	"slices"
	"sort"
	"strings"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// Status is the core's view of itself, for `burrow status`.
type Status struct {
	NodeID      string            `json:"node_id"`
	Links       []LinkStatus      `json:"links"`
	Dials       []DialStatus      `json:"dials"`
	LearnedMACs int               `json:"learned_macs"`
	Flows       int               `json:"flows"`
	Drops       map[string]uint64 `json:"drops"`
	Handshakes  HandshakeStatus   `json:"handshakes"`
	Floods      FloodStatus       `json:"floods"`
	Overlay     OverlayStatus     `json:"overlay"`
	Reach       ReachStatus       `json:"reach"`
	// Rendezvous is nil when the node uses no rendezvous server.
	Rendezvous *RendezvousStatus `json:"rendezvous,omitempty"`
	Relayed    uint64            `json:"relayed_for_others"`
	// RelayQueued counts the relayed datagrams that waited for their
	// pair's share of relay.max_rate.
	RelayQueued uint64         `json:"relay_queued"`
	RelayPairs  []RelayedPair  `json:"relayed_pairs,omitempty"`
	Services    ServicesStatus `json:"services"`
	Groups      GroupsStatus   `json:"groups"`
	// Settings are the network-wide settings in force here, when any are.
	Settings *SettingsStatus `json:"settings,omitempty"`
	// Revoked are the members the CA revoked that this node knows of.
	Revoked []RevokedNode `json:"revoked,omitempty"`
	// Firewall is nil when the node has none.
	Firewall *FirewallStatus `json:"firewall,omitempty"`
}

// FirewallStatus counts what the firewall decided.
type FirewallStatus struct {
	InboundRules  int    `json:"inbound_rules"`
	OutboundRules int    `json:"outbound_rules"`
	Opened        uint64 `json:"opened"`  // connections rules allowed
	Dropped       uint64 `json:"dropped"` // frames
	Connections   int    `json:"connections"`
}

// LinkStatus describes one link.
type LinkStatus struct {
	Peer     string  `json:"peer"`
	NodeID   string  `json:"node_id"`
	Port     uint32  `json:"port"`
	State    string  `json:"state"`
	Path     string  `json:"path"`
	Endpoint string  `json:"endpoint"`
	RTT      float64 `json:"rtt_ms"` // round trip of the last handshake
	// ProbeRTT is the smoothed round trip of the link's liveness probes,
	// and Suspect says the peer stopped answering them: traffic goes
	// around it until it answers or the link goes down.
	ProbeRTT      float64   `json:"probe_rtt_ms,omitempty"`
	Suspect       bool      `json:"suspect,omitempty"`
	Cipher        string    `json:"cipher,omitempty"`
	Since         time.Time `json:"since,omitzero"`
	LastHandshake time.Time `json:"last_handshake,omitzero"`
	RxBytes       uint64    `json:"rx_bytes"`
	TxBytes       uint64    `json:"tx_bytes"`
	RxPackets     uint64    `json:"rx_packets"`
	TxPackets     uint64    `json:"tx_packets"`
	// Punch is the birthday probing toward the peer, when there was any.
	Punch *PunchStatus `json:"punch,omitempty"`
	// CertNotAfter is when the peer's certificate expires: its handshakes
	// fail from then on, and with them the link.
	CertNotAfter time.Time `json:"cert_not_after,omitzero"`
}

// DialStatus describes a configured peer the node keeps a link to.
type DialStatus struct {
	Endpoint  string `json:"endpoint"`
	NodeID    string `json:"node_id,omitempty"`
	Connected bool   `json:"connected"`
	LastError string `json:"last_error,omitempty"`
}

// HandshakeStatus counts handshake outcomes.
type HandshakeStatus struct {
	Started     uint64 `json:"started"`
	Completed   uint64 `json:"completed"`
	Rejected    uint64 `json:"rejected"`
	Invalid     uint64 `json:"invalid"`
	RateLimited uint64 `json:"rate_limited"`
	// TooShort counts initiations shorter than any burrow node sends;
	// they get no answer.
	TooShort uint64 `json:"too_short"`
	// Cookies counts initiations answered with a cookie, past the rate
	// limits or because the answer would have been longer than the
	// initiation (AnswerTooLong of them); only those that come back with
	// it are taken on.
	Cookies       uint64 `json:"cookies"`
	AnswerTooLong uint64 `json:"answer_too_long"`
}

// FloodStatus counts Bounded Flood messages.
type FloodStatus struct {
	Started   uint64 `json:"started"`
	Received  uint64 `json:"received"`
	Forwarded uint64 `json:"forwarded"`
}

// Status reports the node's state.
func (n *Node) Status() Status {
	st := Status{
		NodeID:      n.self.String(),
		LearnedMACs: n.learn.Len(),
		Flows:       len(n.flows),
		Drops:       n.stats.Drops(),
		Revoked:     n.Revoked(),
	}
	if fw := n.cfg.Firewall; fw != nil {
		p := fw.Policy()
		st.Firewall = &FirewallStatus{InboundRules: len(p.Inbound), OutboundRules: len(p.Outbound),
			Opened: fw.Opened.Load(), Dropped: fw.Dropped.Load(), Connections: fw.Connections()}
	}
	for _, l := range n.links.Links() {
		ls := LinkStatus{
			Peer: l.Peer.Name, NodeID: l.Peer.ID.String(), Port: l.Port, State: "connecting",
			Path: n.pathOf(l), Endpoint: l.Endpoint().String(), RTT: l.RTT.Seconds() * 1000,
			RxBytes: l.Counters.RxBytes.Load(), TxBytes: l.Counters.TxBytes.Load(),
			RxPackets: l.Counters.RxPackets.Load(), TxPackets: l.Counters.TxPackets.Load(),
			ProbeRTT: l.Counters.ProbeRTT().Seconds() * 1000, Suspect: l.Suspect(),
			Punch: n.punchStatus(l.Peer.ID), CertNotAfter: l.Peer.NotAfter,
		}
		if l.Up() {
			ls.State, ls.Since = "up", l.Since
		}
		if s := l.Current(); s != nil {
			ls.Cipher, ls.LastHandshake = s.Cipher.String(), s.Created
		}
		st.Links = append(st.Links, ls)
	}
	sort.Slice(st.Links, func(i, j int) bool { return st.Links[i].Port < st.Links[j].Port })
	for _, d := range n.links.Dials() {
		ds := DialStatus{Endpoint: endpointList(d.Endpoints), LastError: d.LastError}
		if d.Peer != ([16]byte{}) {
			ds.NodeID = d.Peer.String()
			l := n.links.Links()[d.Peer]
			ds.Connected = l != nil && l.Up()
		}
		st.Dials = append(st.Dials, ds)
	}
	hs := n.links.Stats()
	st.Handshakes = HandshakeStatus{
		Started: hs.HandshakesStarted.Load(), Completed: hs.HandshakesCompleted.Load(),
		Rejected: hs.HandshakeRejected.Load(), Invalid: hs.HandshakeInvalid.Load(),
		RateLimited: hs.HandshakeRateLimited.Load(), TooShort: hs.HandshakeTooShort.Load(),
		Cookies: hs.CookiesSent.Load(), AnswerTooLong: hs.HandshakeAnswerTooLong.Load(),
	}
	st.Drops["handshake_malformed"] = hs.Malformed.Load()
	st.Drops["handshake_unknown_index"] = hs.HandshakeUnknownIndex.Load()
	st.Floods = FloodStatus{Started: n.stats.FloodsStarted.Load(), Received: n.stats.FloodsReceived.Load(), Forwarded: n.stats.FloodsForwarded.Load()}
	st.Overlay = n.Overlay()
	st.Reach = n.reachStatus()
	st.Rendezvous = n.rendezvousStatus()
	st.Relayed, st.RelayQueued = n.stats.Relayed.Load(), n.stats.RelayQueued.Load()
	st.RelayPairs = n.dp.relay.snapshot()
	st.Services = n.servicesStatus(n.now)
	st.Groups = n.groupsStatus()
	if cur := n.settings.current; cur.SetBy != "" {
		st.Settings = &cur
	}
	return st
}

// OverlayStatus is the node's place on the ring and why it keeps each link.
type OverlayStatus struct {
	Enabled      bool              `json:"enabled"`
	Joined       bool              `json:"joined"`
	Predecessor  string            `json:"predecessor,omitempty"`
	Successors   []string          `json:"successors"`
	SizeEstimate float64           `json:"size_estimate"`
	Links        []OverlayLink     `json:"links"`
	Sent         map[string]uint64 `json:"control_sent"`
	Forwarded    map[string]uint64 `json:"control_forwarded"`
	Received     map[string]uint64 `json:"control_received"`
	OnDemand     OnDemandStatus    `json:"on_demand"`
	Formation    FormationStatus   `json:"formation"`
}

// OverlayLink says why a link exists: the reasons of each end.
type OverlayLink struct {
	Peer   string   `json:"peer"`
	Local  []string `json:"local"`
	Remote []string `json:"remote"`
	// RemoteJoined: the peer says it has found its place on the ring, so
	// messages are routed through it.
	RemoteJoined bool `json:"remote_joined"`
}

// OnDemandStatus counts on-demand links.
type OnDemandStatus struct {
	Active int `json:"active"`
	Opened int `json:"opened"`
	Closed int `json:"closed"`
}

// ReasonNames spells out link reasons.
func ReasonNames(r overlay.Reason) []string {
	names := []string{}
	for _, x := range []struct {
		r    overlay.Reason
		name string
	}{{overlay.ReasonSuccessor, "successor"}, {overlay.ReasonLongDistance, "long-distance"}, {overlay.ReasonOnDemand, "on-demand"}, {overlay.ReasonBootstrap, "bootstrap"}, {overlay.ReasonStatic, "static"}, {overlay.ReasonBeacon, "beacon"}} {
		if r&x.r != 0 {
			names = append(names, x.name)
		}
	}
	return names
}

// Overlay reports the node's overlay state.
func (n *Node) Overlay() OverlayStatus {
	o := &n.ov
	st := OverlayStatus{
		Enabled: !o.cfg.Disabled, Joined: o.joined, SizeEstimate: o.ring.EstimateSize(),
		Sent: countsByType(&o.sent), Forwarded: countsByType(&o.forwarded), Received: countsByType(&o.received),
		OnDemand:  OnDemandStatus{Active: len(o.od.active), Opened: o.od.opened, Closed: o.od.closed},
		Formation: n.formationStatus(),
	}
	if p, ok := o.ring.Predecessor(); ok {
		st.Predecessor = p.ID.String()
	}
	for _, s := range o.ring.Successors(o.cfg.Params.Successors) {
		st.Successors = append(st.Successors, s.ID.String())
	}
	for id, ps := range o.peers {
		if n.upLink(id) != nil {
			st.Links = append(st.Links, OverlayLink{Peer: id.String(), Local: ReasonNames(ps.local), Remote: ReasonNames(ps.remote), RemoteJoined: ps.remoteJoined})
		}
	}
	sort.Slice(st.Links, func(i, j int) bool { return st.Links[i].Peer < st.Links[j].Peer })
	return st
}

func endpointList(eps []link.Endpoint) string {
	s := make([]string, len(eps))
	for i, e := range eps {
		s[i] = e.String()
	}
	return strings.Join(s, ",")
}

func countsByType(c *[16]uint64) map[string]uint64 {
	m := map[string]uint64{}
	for t := overlay.FindSuccessor; int(t) < len(c); t++ {
		if c[t] > 0 {
			m[t.String()] = c[t]
		}
	}
	return m
}

// LinkReasons returns, for each peer with an up link, the reasons of both
// ends, for experiments that classify links.
func (n *Node) LinkReasons() map[nid.ID][2]overlay.Reason {
	m := make(map[nid.ID][2]overlay.Reason)
	for id, ps := range n.ov.peers {
		if slices.Contains(n.adjacency, id) {
			m[id] = [2]overlay.Reason{ps.local, ps.remote}
		}
	}
	return m
}

// Joined reports whether the node has found its place on the ring: its
// link to its first successor is up.
func (n *Node) Joined() bool { return n.ov.joined }

// Predecessor is the node's predecessor on the ring, if it knows one.
func (n *Node) Predecessor() (nid.ID, bool) {
	p, ok := n.ov.ring.Predecessor()
	return p.ID, ok
}

// Formation says how far the node got onto the ring, and when.
func (n *Node) Formation() FormationStatus { return n.formationStatus() }

// Successor is the node's first successor on the ring, if it has one.
func (n *Node) Successor() (nid.ID, bool) {
	s := n.ov.ring.Successors(1)
	if len(s) == 0 {
		return nid.ID{}, false
	}
	return s[0].ID, true
}

// ControlMessages is how many control messages this node sent and
// forwarded, for the cost of joins and maintenance.
func (n *Node) ControlMessages() (sent, forwarded uint64) {
	for i := range n.ov.sent {
		sent += n.ov.sent[i]
		forwarded += n.ov.forwarded[i]
	}
	return sent, forwarded
}
