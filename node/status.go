package node

import (
	"sort"
	"time"
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
}

// LinkStatus describes one link.
type LinkStatus struct {
	Peer          string    `json:"peer"`
	NodeID        string    `json:"node_id"`
	Port          uint32    `json:"port"`
	State         string    `json:"state"`
	Path          string    `json:"path"`
	Endpoint      string    `json:"endpoint"`
	Cipher        string    `json:"cipher,omitempty"`
	Since         time.Time `json:"since,omitzero"`
	LastHandshake time.Time `json:"last_handshake,omitzero"`
	RxBytes       uint64    `json:"rx_bytes"`
	TxBytes       uint64    `json:"tx_bytes"`
	RxPackets     uint64    `json:"rx_packets"`
	TxPackets     uint64    `json:"tx_packets"`
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
	}
	for _, l := range n.links.Links() {
		ls := LinkStatus{
			Peer: l.Peer.Name, NodeID: l.Peer.ID.String(), Port: l.Port, State: "connecting", Path: "direct",
			Endpoint: l.Endpoint().String(),
			RxBytes:  l.Counters.RxBytes.Load(), TxBytes: l.Counters.TxBytes.Load(),
			RxPackets: l.Counters.RxPackets.Load(), TxPackets: l.Counters.TxPackets.Load(),
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
		ds := DialStatus{Endpoint: d.Endpoint.String(), LastError: d.LastError}
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
		RateLimited: hs.HandshakeRateLimited.Load(),
	}
	st.Drops["handshake_malformed"] = hs.Malformed.Load()
	st.Drops["handshake_unknown_index"] = hs.HandshakeUnknownIndex.Load()
	st.Floods = FloodStatus{Started: n.stats.FloodsStarted.Load(), Received: n.stats.FloodsReceived.Load(), Forwarded: n.stats.FloodsForwarded.Load()}
	return st
}
