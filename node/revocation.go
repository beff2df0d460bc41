package node

import (
	"errors"
	"slices"
	"strings"
	"time"

	"burrow/dht"
	"burrow/link"
	"burrow/nid"
	"burrow/wire"
)

// RevocationConfig lets the core honour the CA's revocations without
// knowing certificates: the runtime verifies them.
type RevocationConfig struct {
	// Verify checks a revocation received from anyone (the encoding of
	// identity.Revocation) and tells which node it revokes. Nil: the node
	// honours no revocation and passes none on.
	Verify func(raw []byte) (RevokedNode, error)
	// Known are the revocations the node kept from before; each is
	// verified again.
	Known [][]byte
	// Learned is called once with each revocation the node learns after
	// New, so that it is kept.
	Learned func(raw []byte, r RevokedNode)
}

// RevokedNode is the member a revocation cuts off.
type RevokedNode struct {
	ID   nid.ID `json:"node_id"`
	Name string `json:"name,omitempty"`
}

// errRevoked is what a handshake with a revoked member fails with.
var errRevoked = errors.New("the peer's certificate was revoked by the CA")

const (
	// revocationKeyPrefix starts the DHT key a revocation is stored
	// under: revoked:<node ID>.
	revocationKeyPrefix = "revoked:"
	// revocationTTL is a stored revocation's lease. Every member that
	// holds the revocation stores it again once in every
	// storeRevocationsEvery, so the record lasts as long as one does.
	revocationTTL = dht.DefaultMaxTTL
	// storeRevocationsEvery is the longest a member waits between two
	// stores of the revocations it holds; it stores them at a time of its
	// own in the second half of the period.
	storeRevocationsEvery = revocationTTL / 3
	// revocationLookupEvery is how seldom a peer's revocation key is read
	// at most, however often links to it come and go, so that formation
	// and churn cost the DHT little.
	revocationLookupEvery = 10 * time.Minute
	// revocationLookupDelay is how long a link must last before its peer
	// is looked up. Formation and the overlay's repairs open many links
	// that close within seconds, and reading for each of them would
	// multiply the control messages of a cold start (docs/simulation.md).
	// A revoked node keeps its link to a member that missed the
	// revocation that much longer.
	revocationLookupDelay = 10 * time.Second
	// revocationLookupsAfter is how long a node is up before the peers it
	// links to are looked up at all. Every link of its first minute is
	// new and brought the peer's revocations (shareRevocations): the
	// lookup is for a member whose links outlived a flood it missed. A
	// join's lookups were most of its DHT traffic, and the DHT most of a
	// formation's messages (docs/simulation.md).
	revocationLookupsAfter = time.Minute
	// maxRevocationLookups bounds the peers remembered as read lately,
	// and those waiting to be read.
	maxRevocationLookups = 4096
)

type revocationState struct {
	raw   map[nid.ID][]byte
	nodes []RevokedNode // in the order learned
	// nextStore is when the node next stores every revocation it holds
	// in the DHT; zero until its services start.
	nextStore time.Time
	// lookedUp are the peers whose revocation key was read lately, and
	// when; lookups holds them oldest first, to forget them in order.
	lookedUp map[nid.ID]time.Time
	lookups  []nid.ID
	// toLookUp are the peers whose links came up lately, oldest first,
	// to be looked up once their links have lasted revocationLookupDelay.
	toLookUp []linkedPeer
	// lookUpsFrom is when the node starts looking up the peers it links
	// to: revocationLookupsAfter after it was made.
	lookUpsFrom time.Time
}

func (n *Node) initRevocations(now time.Time) {
	n.rev.lookUpsFrom = now.Add(revocationLookupsAfter)
	n.rev.raw = make(map[nid.ID][]byte)
	n.rev.lookedUp = make(map[nid.ID]time.Time)
	for _, raw := range n.cfg.Revocations.Known {
		if r, err := n.cfg.Revocations.Verify(raw); err == nil {
			n.addRevocation(raw, r)
		} else {
			n.log.Warn("ignoring a kept revocation", "err", err)
		}
	}
}

// verifyPeer is the handshake's check of a peer: its certificate, then
// that it was not revoked.
func (n *Node) verifyPeer(cert []byte, static [32]byte, now time.Time) (link.Peer, error) {
	p, err := n.cfg.Verify(cert, static, now)
	if err != nil {
		return p, err
	}
	if _, revoked := n.rev.raw[p.ID]; revoked {
		return link.Peer{}, errRevoked
	}
	return p, nil
}

// Revoke honours a revocation handed to this node (by its operator, or
// read from a file): it cuts the revoked member off, passes the
// revocation on to every neighbour and stores it in the DHT at once (the
// members it reaches store it later, each at a time of its own). It
// reports whether the revocation was new here.
func (n *Node) Revoke(raw []byte, now time.Time) (RevokedNode, bool, error) {
	n.now = now
	r, fresh, err := n.learnRevocation(raw, nil)
	if fresh {
		n.whenStarted(now, func(now time.Time) { n.storeRevocation(n.rev.raw[r.ID], r.ID, now) })
	}
	return r, fresh, err
}

// Revoked lists the members this node knows to be revoked, in the order
// it learned of them.
func (n *Node) Revoked() []RevokedNode { return slices.Clone(n.rev.nodes) }

// learnRevocation verifies raw, which came over from (nil when handed
// here or read from the DHT), and when it is new keeps it, cuts the
// member off and floods it on: every member passes each revocation on
// once, so it reaches every member connected to this one however the
// overlay looks.
func (n *Node) learnRevocation(raw []byte, from *link.Link) (RevokedNode, bool, error) {
	if n.cfg.Revocations.Verify == nil {
		return RevokedNode{}, false, errors.New("this node does not honour revocations")
	}
	r, err := n.cfg.Revocations.Verify(raw)
	if err != nil {
		return RevokedNode{}, false, err
	}
	if _, known := n.rev.raw[r.ID]; known {
		return r, false, nil
	}
	raw = slices.Clone(raw)
	n.addRevocation(raw, r)
	if n.cfg.Revocations.Learned != nil {
		n.cfg.Revocations.Learned(raw, r)
	}
	n.log.Warn("member revoked by the CA: cutting it off", "peer", r.Name, "nid", r.ID.Short())
	if l := n.links.Links()[r.ID]; l != nil {
		n.links.Down(l, "revoked by the CA")
	}
	for _, d := range slices.Clone(n.links.Dials()) {
		if d.Peer == r.ID {
			n.links.RemoveDial(d)
		}
	}
	for _, l := range n.links.Links() {
		if l != from && l.Up() {
			n.sendRevocation(l, raw)
		}
	}
	return r, true, nil
}

// addRevocation keeps a revocation and voids the member's DHT records.
func (n *Node) addRevocation(raw []byte, r RevokedNode) {
	n.rev.raw[r.ID] = raw
	n.rev.nodes = append(n.rev.nodes, r)
	if n.svc.kv != nil {
		n.svc.kv.DropOwner(r.ID)
	}
}

func (n *Node) sendRevocation(l *link.Link, raw []byte) {
	n.buf = append(append(n.buf[:0], byte(wire.InnerRevocation)), raw...)
	if n.links.Send(l, n.buf, n.now) {
		n.stats.RevocationsSent.Add(1)
	}
}

// shareRevocations tells a new neighbour every revocation this node
// holds: a member that was away when one spread learns it from its first
// link back, and passes it on.
func (n *Node) shareRevocations(l *link.Link) {
	for _, r := range n.rev.nodes {
		n.sendRevocation(l, n.rev.raw[r.ID])
	}
}

// handleRevocation takes a revocation a neighbour passed on.
func (n *Node) handleRevocation(from *link.Link, raw []byte) {
	if _, _, err := n.learnRevocation(raw, from); err != nil {
		n.stats.drop(DropMalformed)
		n.log.Debug("refused a revocation", "from", from.Peer.Name, "err", err)
	}
}

func revocationKey(id nid.ID) string { return revocationKeyPrefix + id.String() }

// revocationRecords is the DHT's rule for revocation keys: revoked:<ID>
// holds the CA's revocation of that very node and nothing else, whoever
// writes it, since the statement is the CA's and not the writer's.
type revocationRecords Node

func (*revocationRecords) Covers(key string) bool { return strings.HasPrefix(key, revocationKeyPrefix) }

func (v *revocationRecords) Valid(key string, value []byte) bool {
	if v.cfg.Revocations.Verify == nil {
		return false
	}
	r, err := v.cfg.Revocations.Verify(value)
	return err == nil && key == revocationKey(r.ID)
}

// storeRevocation writes a revocation under its node's key, where a
// member that missed its flood looks when that node links to it.
func (n *Node) storeRevocation(raw []byte, id nid.ID, now time.Time) {
	n.svc.kv.Put(revocationKey(id), raw, revocationTTL, now, func(res dht.Result) {
		if res.Status != dht.OK {
			n.log.Debug("storing a revocation in the DHT failed", "nid", id.Short(), "status", res.Status)
		}
	})
}

// storeRevocationsTick stores every revocation the node holds, each
// storeRevocationsEvery at a time of the node's own, the first within half
// of it once its services run. The writes of all members together are
// spread over the period: had each member stored a revocation as its
// flood reached it, the key's primary would take a write from every
// member within a fraction of a second, and answer most of them "busy".
func (n *Node) storeRevocationsTick(now time.Time) {
	rs := &n.rev
	switch {
	case rs.nextStore.IsZero():
		rs.nextStore = now.Add(n.ov.jitter(storeRevocationsEvery))
		return
	case now.Before(rs.nextStore):
		return
	}
	rs.nextStore = now.Add(storeRevocationsEvery - n.ov.jitter(storeRevocationsEvery))
	for _, r := range rs.nodes {
		n.storeRevocation(rs.raw[r.ID], r.ID, now)
	}
}

// lookUpRevocation reads a neighbour's revocation key: a member that
// missed a revocation's flood (it was away, or its copy was lost, and no
// new neighbour told it since) learns it when the revoked node links to
// it, and cuts it off as if a neighbour had passed it on.
func (n *Node) lookUpRevocation(peer nid.ID, now time.Time) {
	rs := &n.rev
	if _, known := rs.raw[peer]; known || n.cfg.Revocations.Verify == nil || !n.svc.started {
		return
	}
	for len(rs.lookups) > 0 && (len(rs.lookups) == maxRevocationLookups || now.Sub(rs.lookedUp[rs.lookups[0]]) >= revocationLookupEvery) {
		delete(rs.lookedUp, rs.lookups[0])
		rs.lookups = rs.lookups[1:]
	}
	if _, recent := rs.lookedUp[peer]; recent {
		return
	}
	rs.lookedUp[peer] = now
	rs.lookups = append(rs.lookups, peer)
	n.svc.kv.Get(revocationKey(peer), now, func(res dht.Result) {
		if res.Status != dht.OK {
			return
		}
		if _, _, err := n.learnRevocation(res.Value, nil); err != nil {
			n.log.Warn("refused a revocation read from the DHT", "nid", peer.Short(), "err", err)
		}
	})
}

type linkedPeer struct {
	id nid.ID
	at time.Time
}

// lookUpLater has a new neighbour looked up once its link has lasted
// revocationLookupDelay, unless the node is in its first minute.
func (n *Node) lookUpLater(peer nid.ID, now time.Time) {
	if now.Before(n.rev.lookUpsFrom) {
		return
	}
	if len(n.rev.toLookUp) < maxRevocationLookups {
		n.rev.toLookUp = append(n.rev.toLookUp, linkedPeer{peer, now})
	}
}

// lookUpsDue looks up the neighbours whose links have lasted
// revocationLookupDelay and are still up. It runs once the services have
// started: neighbours linked before wait until then, as a read made
// before the node has its place on the ring goes nowhere useful.
func (n *Node) lookUpsDue(now time.Time) {
	rs := &n.rev
	for len(rs.toLookUp) > 0 && now.Sub(rs.toLookUp[0].at) >= revocationLookupDelay {
		peer := rs.toLookUp[0].id
		rs.toLookUp = rs.toLookUp[1:]
		if l := n.links.Links()[peer]; l != nil && l.Up() {
			n.lookUpRevocation(peer, now)
		}
	}
}

// nextLookUp is when lookUpsDue next has work; zero when none waits.
func (n *Node) nextLookUp() time.Time {
	if len(n.rev.toLookUp) == 0 {
		return time.Time{}
	}
	return n.rev.toLookUp[0].at.Add(revocationLookupDelay)
}
