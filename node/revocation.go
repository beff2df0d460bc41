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
	// holds the revocation stores it again every third of it, so the
	// record lasts as long as one of them does.
	revocationTTL = dht.DefaultMaxTTL
	// revocationLookupEvery is how seldom a peer's revocation key is read
	// at most, however often links to it come and go, so that formation
	// and churn cost the DHT little.
	revocationLookupEvery = 10 * time.Minute
	// maxRevocationLookups bounds the peers remembered as read lately.
	maxRevocationLookups = 4096
)

type revocationState struct {
	raw   map[nid.ID][]byte
	nodes []RevokedNode // in the order learned
	// nextStore is when the node stores every revocation it holds in the
	// DHT again; zero until its services first do.
	nextStore time.Time
	// lookedUp are the peers whose revocation key was read lately, and
	// when; lookups holds them oldest first, to forget them in order.
	lookedUp map[nid.ID]time.Time
	lookups  []nid.ID
}

func (n *Node) initRevocations() {
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
// read from a file): it cuts the revoked member off and passes the
// revocation on to every neighbour. It reports whether the revocation was
// new here.
func (n *Node) Revoke(raw []byte, now time.Time) (RevokedNode, bool, error) {
	n.now = now
	return n.learnRevocation(raw, nil)
}

// Revoked lists the members this node knows to be revoked, in the order
// it learned of them.
func (n *Node) Revoked() []RevokedNode { return slices.Clone(n.rev.nodes) }

// learnRevocation verifies raw, which came over from (nil when handed
// here or read from the DHT), and when it is new keeps it, stores it in
// the DHT, cuts the member off and floods it on: every member passes each
// revocation on once, so it reaches every member connected to this one
// however the overlay looks.
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
	if n.svc.started {
		n.storeRevocation(raw, r.ID, n.now)
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

// storeRevocationsTick stores every revocation the node holds once its
// services run, and again every third of the lease, at a time of the
// node's own so that members do not all write at once.
func (n *Node) storeRevocationsTick(now time.Time) {
	if now.Before(n.rev.nextStore) {
		return
	}
	every := revocationTTL / 3
	n.rev.nextStore = now.Add(every - n.ov.jitter(every))
	for _, r := range n.rev.nodes {
		n.storeRevocation(n.rev.raw[r.ID], r.ID, now)
	}
}

// lookUpRevocation reads a new neighbour's revocation key: a member that
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
