package node

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"sync/atomic"

	"burrow/firewall"
	"burrow/flood"
	"burrow/l2"
	"burrow/link"
	"burrow/nid"
)

// snapshot is what the data path reads: immutable once published, swapped
// atomically by the core. Flows are shared between snapshots so their
// last-use time survives republishing; the parts of a snapshot that did not
// change since the last one are shared too.
type snapshot struct {
	self nid.ID
	// The parts the links and the holdings make are shared by pointer
	// while they do not change: a snapshot is published for nearly every
	// MAC learned, and copying them by value made it 2.5 times as large.
	*linkView
	*holdingsView
	flows map[flowKey]route
	// macs is the learning table as the data path needs it to flood on its
	// own: where each known MAC was learned, and behind which bridge.
	macs macTable
	// serviceMACs are the addresses the node's own services answer as;
	// frames to them always go to the core.
	serviceMACs []l2.MAC
	// groups are the multicast groups some host reported, true where one
	// behind this node listens (groups.go).
	groups map[netip.Addr]bool
	// localDHCP keeps other members' DHCP from the TAP (LocalDHCP).
	localDHCP bool
}

// linkView is the part of a snapshot the links make.
type linkView struct {
	sessions map[uint32]rxSession // by the index peers address us with
	ports    map[uint32]*port     // by switch port; 0 is the TAP
	byPeer   map[nid.ID]*port     // up links by peer, for relaying
	// adjacency are the links Bounded Flood forwards over, sorted clockwise
	// from self, and peers their node IDs in the same order.
	adjacency []*port
	peers     []nid.ID
	// owners are the addresses linked peers' certificates fix, and
	// macOwners the TAP MACs their IDs give them (MACFor), by peer: a frame
	// from another member's bridge with one as its source is spoofed.
	owners    map[netip.Addr]nid.ID
	macOwners map[l2.MAC]nid.ID
	// notRouters are the linked peers whose certificate lacks RouterGroup.
	notRouters map[nid.ID]bool
}

// holdingsView is the part of a snapshot the lease and subnet holdings
// make: dhcpRange (nil: the node serves no DHCP) and subnetRanges are
// where addresses only a lease or a subnet claim gives; leaseHolders and
// subnetHolders who holds them, as the core last looked them up, and
// clientMACs the leased clients' MACs by holder (holdings.go).
type holdingsView struct {
	dhcpRange     func(netip.Addr) bool
	subnetRanges  []subnetRange
	leaseHolders  map[netip.Addr]holding
	subnetHolders map[netip.Prefix]holding
	clientMACs    map[l2.MAC]nid.ID
}

// MACFor derives a node's stable, locally administered TAP MAC from its ID,
// so that every member knows the MAC of every other (unless its TAP sets
// another).
func MACFor(id nid.ID) l2.MAC {
	return l2.MAC{0x02, id[0], id[1], id[2], id[3], id[4]}
}

type rxSession struct {
	session *link.Session
	port    *port
}

type port struct {
	link    *link.Link
	peer    nid.ID
	session *link.Session // current sending session
}

// suspect reports whether the link's peer stopped answering.
func (p *port) suspect(now int64) bool { return p.link.Counters.Suspect(now) }

// flowKey is an OpenFlow-style match: ingress port, source and destination MAC.
type flowKey struct {
	in       uint32
	src, dst l2.MAC
}

// flow is a learned path. out, root and origin never change: a flow
// whose path changes is replaced, so the data path never sees one
// half-updated.
type flow struct {
	out  uint32 // switch port, localPort, or routedPort
	root nid.ID // the bridge the destination sits behind
	// origin is the bridge the flow's frames come from: this node for the
	// TAP's, for a link's the bridge they name, or the peer that sends
	// them when they name none.
	origin   nid.ID
	lastUsed atomic.Int64  // unix nanoseconds, written by the data path
	bytes    atomic.Uint64 // frame bytes switched, for on-demand links
	counted  uint64        // bytes already accounted by the core
}

// routedPort is a flow's out when the port its destination was learned
// through is gone: frames travel greedily toward the destination's bridge.
const routedPort = uint32(flood.RoutedPort)

// route is a flow as one snapshot resolves it: its port, and the next hop
// toward the destination's bridge that takes over when that port's peer
// stops answering — CBL2's fast-failover group, precomputed.
type route struct {
	*flow
	via    *port // the link to root while floods cross it (and not the flow's way in), else the port of out: nil for the local TAP and routed flows
	backup hop
}

// hop is where a frame goes next: the port, whether it must carry its
// bridge's ID (routed: the port's peer is not that bridge and need not
// know the destination), and whether it may only go on clockwise
// (wire.InnerRoutedOnward).
type hop struct {
	port           *port
	routed, onward bool
}

// member is what the firewall knows of the member behind bridge id: the
// certificate of a peer with an up link; nothing of others.
func (s *snapshot) member(id nid.ID) firewall.Member {
	if p := s.byPeer[id]; p != nil {
		return firewall.Member{Name: p.link.Peer.Name, Groups: p.link.Peer.Groups}
	}
	return firewall.Member{}
}

// verdict is what binding frames to their sender says of one frame.
type verdict uint8

const (
	passes verdict = iota
	// spoofed: the source MAC or address is another member's.
	spoofed
	// unheld: the source address is one only a lease or claim gives, no
	// one holds it, and the sender is a linked member without RouterGroup.
	unheld
	// unjudged: the source address is one only a lease or claim gives,
	// not looked up yet. The frame waits in the core, which looks the
	// holder up (holdFrame).
	unjudged
)

// judge binds a frame from a host behind bridge origin to that bridge: it
// is spoofed when its source MAC is a linked peer's TAP MAC or a leased
// client's of another member, or its source address (IPv4, IPv6, or an
// ARP sender's), or the target of a neighbour advertisement, is fixed by
// another linked peer's certificate or held by another member's lease or
// subnet claim. A frame whose bridge is unknown is not judged. src is the
// address judged last, for the lookup of an unjudged one.
func (s *snapshot) judge(frame []byte, origin nid.ID) (v verdict, src netip.Addr) {
	if origin == (nid.ID{}) {
		return passes, src
	}
	if s.macBoundElsewhere(l2.MAC(frame[6:12]), origin) {
		return spoofed, src
	}
	src, ok := l2.SourceAddr(frame)
	if !ok {
		return passes, src
	}
	v = s.judgeAddr(src, origin)
	if target, ok := l2.AdvertisedAddr(frame); ok && v == passes && target != src {
		return s.judgeAddr(target, origin), target
	}
	return v, src
}

// judgeAddr is judge's verdict on one address the frame claims.
func (s *snapshot) judgeAddr(src netip.Addr, origin nid.ID) verdict {
	if src.IsUnspecified() {
		return passes
	}
	if owner, certified := s.owners[src]; certified {
		if owner != origin {
			return spoofed
		}
		return passes
	}
	h, held, known := s.holdingOf(src)
	switch {
	case !held:
		return passes
	case !known:
		return unjudged
	case h.holder == origin:
		return passes
	case h.holder != (nid.ID{}):
		return spoofed
	case s.notRouters[origin]:
		return unheld
	}
	return passes
}

// macBoundElsewhere reports whether mac is a linked peer's TAP MAC, or a
// leased client's, of a member other than origin.
func (s *snapshot) macBoundElsewhere(mac l2.MAC, origin nid.ID) bool {
	if owner, ok := s.macOwners[mac]; ok && owner != origin {
		return true
	}
	owner, ok := s.clientMACs[mac]
	return ok && owner != origin
}

// holdingOf finds a's holder: held says a is an address only a lease or
// a subnet claim gives, known that the core has looked it up.
func (s *snapshot) holdingOf(a netip.Addr) (h holding, held, known bool) {
	if s.dhcpRange != nil && s.dhcpRange(a) {
		h, known = s.leaseHolders[a]
		return h, true, known
	}
	for _, r := range s.subnetRanges {
		if r.prefix.Contains(a) {
			h, known = s.subnetHolders[netip.PrefixFrom(a, r.bits).Masked()]
			return h, true, known
		}
	}
	return h, false, false
}

// floodSource is the bridge a broadcast's source sits behind: its root,
// unless the root only passed on a frame it did not own.
func (s *snapshot) floodSource(m flood.FRB) nid.ID {
	if m.Kind == flood.Broadcast {
		return m.Root
	}
	v, _ := s.macs.lookup(l2.MAC(m.Frame[6:12]))
	return v.root
}

// macView is one learning-table entry as the data path sees it.
type macView struct {
	port uint32
	root nid.ID
	seen int64 // unix ns of the last learn the core published
}

// macRefresh is how old a published learn may get before a broadcast from
// the MAC goes to the core again, to keep its entry from expiring.
const macRefresh = DefaultMACAge / 4

// touch records use at now without dirtying the cache line every packet.
func (f *flow) touch(now int64) {
	if now-f.lastUsed.Load() > int64(1e8) {
		f.lastUsed.Store(now)
	}
}

// toward is the greedy next hop from self toward the bridge dest: the
// usable neighbour strictly closer to it than self the short way round
// the ring, in either direction — or, when none is or the frame already
// goes onward, the neighbour strictly closer clockwise. A frame thus gets
// strictly closer by one measure at every hop, switching at most once to
// the second, so it cannot loop; and clockwise, a ring of successor links
// always has a way on. avoid, and neighbours that stopped answering, are
// skipped; a nil port means no neighbour gets closer.
func (s *snapshot) toward(dest nid.ID, avoid *port, now int64, onward bool) hop {
	h := hop{onward: onward}
	if !onward {
		h.port = s.closest(dest, avoid, now, nid.ID.Gap)
	}
	if h.port == nil {
		h.port, h.onward = s.closest(dest, avoid, now, nid.ID.Distance), true
	}
	h.routed = h.port != nil && h.port.peer != dest
	return h
}

// adjacent is the port to id when floods cross it (setAdjacency): not a
// link that retires, is suspect, or is kept by neither end.
func (s *snapshot) adjacent(id nid.ID) *port {
	for _, p := range s.adjacency {
		if p.peer == id {
			return p
		}
	}
	return nil
}

// closest is the usable neighbour closer to dest than self by distance.
func (s *snapshot) closest(dest nid.ID, avoid *port, now int64, distance func(from, to nid.ID) nid.ID) *port {
	var best *port
	bestDist := distance(s.self, dest)
	for _, p := range s.adjacency {
		if p == avoid || (now != 0 && p.suspect(now)) {
			continue
		}
		if d := distance(p.peer, dest); d.Compare(bestDist) < 0 {
			best, bestDist = p, d
		}
	}
	return best
}

// dirty flags say which parts of the next snapshot must be rebuilt.
type dirtyParts uint8

const (
	dirtyLinks dirtyParts = 1 << iota
	dirtyFlows
	dirtyMACs
	dirtyGroups
	dirtyHoldings
	dirtyAll = dirtyLinks | dirtyFlows | dirtyMACs | dirtyGroups | dirtyHoldings
)

func (n *Node) publish() {
	prev := n.snap.Load()
	s := &snapshot{self: n.self, localDHCP: n.cfg.Services.LocalDHCP}
	if prev == nil {
		s.serviceMACs = n.serviceMACs()
	} else {
		s.serviceMACs = prev.serviceMACs
	}
	if prev == nil || n.dirty&dirtyLinks != 0 {
		n.publishLinks(s)
	} else {
		s.linkView = prev.linkView
	}
	if prev == nil || n.dirty&dirtyHoldings != 0 {
		n.publishHoldings(s)
	} else {
		s.holdingsView = prev.holdingsView
	}
	if prev == nil || n.dirty&(dirtyLinks|dirtyFlows) != 0 {
		n.publishFlows(s)
	} else {
		s.flows = prev.flows
	}
	if prev == nil || n.dirty&dirtyMACs != 0 {
		s.macs = n.publishMACs(prev)
	} else {
		s.macs = prev.macs
	}
	if prev == nil || n.dirty&dirtyGroups != 0 {
		n.publishGroups(s)
	} else {
		s.groups = prev.groups
	}
	n.snap.Store(s)
	n.dirty = 0
}

// macTable is the learning table as the data path sees it, split by MAC
// into shards of about macsPerShard entries each, every shard a slice
// sorted by MAC: publishing a change copies the list of shards and the
// shards it touches, not the whole table. Each node of a large network
// learns a MAC from every host that broadcasts, and a snapshot is
// published for nearly every one: with a few large shards, or one map
// per shard, the copies and the maps' spare room made the tables the
// largest part of a node.
type macTable struct {
	shards [][]macEntry // a power of two of them, minMACShards at least
	bits   uint8        // log2(len(shards))
}

type macEntry struct {
	key  uint64 // macKey
	view macView
}

const (
	macsPerShard = 8
	minMACShards = 8
)

// macShardBits is the number of shards, as a power of two, for a table of
// n entries.
func macShardBits(n int) uint8 {
	return uint8(max(bits.Len(uint(n/macsPerShard)), bits.TrailingZeros(minMACShards)))
}

func macKey(mac l2.MAC) uint64 {
	return uint64(mac[0])<<40 | uint64(mac[1])<<32 | uint64(binary.BigEndian.Uint32(mac[2:6]))
}

// shard mixes the bytes of a MAC that tell NICs and burrow's own derived
// MACs apart (not the vendor prefix) into a shard index.
func (t *macTable) shard(key uint64) int {
	return int(uint32(key) * 0x9e3779b1 >> (32 - t.bits))
}

func compareKey(e macEntry, key uint64) int { return cmp.Compare(e.key, key) }

func (t *macTable) lookup(mac l2.MAC) (macView, bool) {
	key := macKey(mac)
	sh := t.shards[t.shard(key)]
	if i, ok := slices.BinarySearchFunc(sh, key, compareKey); ok {
		return sh[i].view, true
	}
	return macView{}, false
}

// publishMACs is the learning table as the data path sees it: the
// previous snapshot's, with copies of the shards holding the entries
// that changed since, or a new one when the table did not keep track,
// there is none, or the table outgrew its shards (or shrank far below
// them).
func (n *Node) publishMACs(prev *snapshot) macTable {
	defer n.learn.ClearChanges()
	changed, kept := n.learn.Changes()
	want := macShardBits(n.learn.Len())
	if prev != nil && kept && want <= prev.macs.bits && want+2 > prev.macs.bits {
		macs := macTable{shards: slices.Clone(prev.macs.shards), bits: prev.macs.bits}
		var few [16]int
		copied := few[:0]
		for _, mac := range changed {
			key := macKey(mac)
			i := macs.shard(key)
			sh := macs.shards[i]
			if !slices.Contains(copied, i) {
				copied = append(copied, i)
				sh = append(make([]macEntry, 0, len(sh)+1), sh...)
			}
			at, found := slices.BinarySearchFunc(sh, key, compareKey)
			e, learned := n.learn.Lookup(mac)
			switch {
			case learned && found:
				sh[at].view = viewOf(e)
			case learned:
				sh = slices.Insert(sh, at, macEntry{key, viewOf(e)})
			case found:
				sh = slices.Delete(sh, at, at+1)
			}
			macs.shards[i] = sh
		}
		return macs
	}
	// A new table: every entry in one array, in shard order, each shard
	// a slice of it capped at its end (a change copies it first).
	macs := macTable{shards: make([][]macEntry, 1<<want), bits: want}
	all := make([]macEntry, 0, n.learn.Len())
	n.learn.Each(func(mac l2.MAC, e flood.Entry) { all = append(all, macEntry{macKey(mac), viewOf(e)}) })
	slices.SortFunc(all, func(a, b macEntry) int {
		return cmp.Or(cmp.Compare(macs.shard(a.key), macs.shard(b.key)), cmp.Compare(a.key, b.key))
	})
	for i := range macs.shards {
		end := 0
		for end < len(all) && macs.shard(all[end].key) == i {
			end++
		}
		macs.shards[i], all = all[:end:end], all[end:]
	}
	return macs
}

// viewOf is a learning-table entry as the data path sees it.
func viewOf(e flood.Entry) macView {
	return macView{port: uint32(e.Port), root: e.Root, seen: e.LastSeen.UnixNano()}
}

func (n *Node) publishLinks(s *snapshot) {
	s.linkView = &linkView{}
	s.sessions = make(map[uint32]rxSession)
	s.ports = make(map[uint32]*port)
	s.byPeer = make(map[nid.ID]*port)
	s.owners, s.macOwners = make(map[netip.Addr]nid.ID), make(map[l2.MAC]nid.ID)
	s.notRouters = make(map[nid.ID]bool)
	for _, l := range n.links.Links() {
		p := &port{link: l, peer: l.Peer.ID, session: l.Current()}
		s.ports[l.Port] = p
		if l.Up() {
			s.byPeer[l.Peer.ID] = p
			s.macOwners[MACFor(l.Peer.ID)] = l.Peer.ID
			for _, a := range l.Peer.Addresses {
				s.owners[a.Addr()] = l.Peer.ID
			}
			if !slices.Contains(l.Peer.Groups, RouterGroup) {
				s.notRouters[l.Peer.ID] = true
			}
		}
		for _, sess := range l.Sessions() {
			s.sessions[sess.LocalIndex] = rxSession{sess, p}
		}
	}
	for _, id := range n.adjacency {
		if p := s.byPeer[id]; p != nil {
			s.adjacency = append(s.adjacency, p)
			s.peers = append(s.peers, id)
		}
	}
}

// publishFlows resolves every flow against the snapshot's ports, with its
// backup: the best next hop toward its bridge other than its own port,
// computed once per bridge. A flow goes over the link to its bridge
// whenever floods cross it, whatever port its MAC was learned on: each end of
// a flow learns the other's MAC where its frames come in, so two ends
// whose frames crossed another bridge while their own link came up kept
// teaching each other that bridge's port, and left their link unused.
// Not when that bridge sent the flow's frames itself: they would go back
// where they came from.
func (n *Node) publishFlows(s *snapshot) {
	s.flows = make(map[flowKey]route, len(n.flows))
	type choice struct {
		direct       *port
		best, second hop
	}
	byRoot := make(map[nid.ID]choice)
	for k, f := range n.flows {
		r := route{flow: f, via: s.ports[f.out]}
		if f.out != localPort && f.root != (nid.ID{}) {
			c, ok := byRoot[f.root]
			if !ok {
				c.direct = s.adjacent(f.root)
				if c.best = s.toward(f.root, nil, 0, false); c.best.port != nil {
					c.second = s.toward(f.root, c.best.port, 0, false)
				}
				byRoot[f.root] = c
			}
			if c.direct != nil && c.direct.link.Port != k.in {
				r.via = c.direct
			}
			r.backup = c.best
			if r.backup.port == r.via {
				r.backup = c.second
			}
		}
		s.flows[k] = r
	}
}

// serviceMACs are the hardware addresses the node's services answer as.
func (n *Node) serviceMACs() []l2.MAC {
	var macs []l2.MAC
	if c := n.cfg.Services.DNS; c != nil {
		macs = append(macs, c.ServerMAC)
	}
	if c := n.cfg.Services.DHCP; c != nil {
		macs = append(macs, c.ServerMAC)
	}
	return macs
}
