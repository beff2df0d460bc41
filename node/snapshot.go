package node

import (
	"sync/atomic"

	"burrow/l2"
	"burrow/link"
	"burrow/nid"
)

// snapshot is what the data path reads: immutable once published, swapped
// atomically by the core. Flows are shared between snapshots so their
// last-use time survives republishing.
type snapshot struct {
	sessions map[uint32]rxSession // by the index peers address us with
	ports    map[uint32]*port     // by switch port; 0 is the TAP
	byPeer   map[nid.ID]*port     // up links by peer, for relaying
	flows    map[flowKey]*flow
}

type rxSession struct {
	session *link.Session
	port    *port
}

type port struct {
	link    *link.Link
	session *link.Session // current sending session
}

// flowKey is an OpenFlow-style match: ingress port, source and destination MAC.
type flowKey struct {
	in       uint32
	src, dst l2.MAC
}

type flow struct {
	out      uint32
	lastUsed atomic.Int64  // unix nanoseconds, written by the data path
	bytes    atomic.Uint64 // frame bytes switched, for on-demand links
	counted  uint64        // bytes already accounted by the core
}

// touch records use at now without dirtying the cache line every packet.
func (f *flow) touch(now int64) {
	if now-f.lastUsed.Load() > int64(1e8) {
		f.lastUsed.Store(now)
	}
}

func (n *Node) publish() {
	s := &snapshot{
		sessions: make(map[uint32]rxSession),
		ports:    make(map[uint32]*port),
		byPeer:   make(map[nid.ID]*port),
		flows:    make(map[flowKey]*flow, len(n.flows)),
	}
	for _, l := range n.links.Links() {
		p := &port{link: l, session: l.Current()}
		s.ports[l.Port] = p
		if l.Up() {
			s.byPeer[l.Peer.ID] = p
		}
		for _, sess := range l.Sessions() {
			s.sessions[sess.LocalIndex] = rxSession{sess, p}
		}
	}
	for k, f := range n.flows {
		s.flows[k] = f
	}
	n.snap.Store(s)
	n.dirty = false
}
