package node

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// OverlayConfig configures self-organization. With Disabled the node keeps
// only its static peers.
type OverlayConfig struct {
	Disabled bool
	Params   overlay.Params
	// Bootstrap are addresses of members to find our place through.
	Bootstrap []netip.AddrPort
	// Advertise are the endpoints other nodes can reach us at.
	Advertise []netip.AddrPort
	// StabilizeEvery is how often a node checks its successor's view.
	StabilizeEvery time.Duration
	// HealEvery is how often a node contacts a remembered node it has no
	// link to, so that rings split by a partition merge again.
	HealEvery time.Duration
	OnDemand  OnDemandConfig
	// Remembered are nodes known from an earlier run; the node contacts a
	// few of them at start, so a restarted node finds its ring without a
	// bootstrap.
	Remembered []overlay.Info
}

// Defaults of OverlayConfig.
const (
	DefaultSuccessors     = 2
	DefaultLongDistance   = 4
	DefaultStabilizeEvery = 5 * time.Second
	DefaultHealEvery      = 60 * time.Second
	requestTimeout        = 5 * time.Second
	closeGrace            = 3 * time.Second
	// unheardGrace keeps a link whose peer has not yet said why it wants
	// it: a newcomer on a loaded machine can take seconds to send its
	// first LinkUse, and closing the link it joined by would leave it
	// with none.
	unheardGrace = 30 * time.Second
	// drainTime keeps a retired link open for what is still in flight on it.
	drainTime = time.Second
	// closingRetry spaces the repeats of a Closing the peer has not
	// answered, a few within drainTime.
	closingRetry = 250 * time.Millisecond
	// announceRetry spaces LinkUse repeats until the peer answers one, at
	// most maxAsks times: a peer with its overlay off never answers.
	announceRetry = time.Second
	maxAsks       = 5
	dialAttempts  = 3
	// acceptHold is how long a node that accepted a link request keeps the
	// asker's reasons while no link is up: longer than the asker's dial
	// takes to give up (dialAttempts tries, about 7 s). An asker that aims
	// its slot elsewhere meanwhile never says so; kept for good, its
	// reasons held a place within the inbound limit, and a heal probe
	// between the two minutes later came up as a long-distance link.
	acceptHold  = 10 * time.Second
	controlTTL  = 64
	rememberMax = 32
	deadMemory  = 30 * time.Second
	// rememberedContacts is how many remembered nodes a restart contacts.
	rememberedContacts = 3
	// askerMemory is how long a node that asked for its place is told of
	// newcomers next to it, and maxAskers bounds how many are.
	askerMemory = 10 * time.Second
	maxAskers   = 1024
	// lookupEvery spaces the lookups a node makes for its own place when
	// stabilization shows it misplaced.
	lookupEvery = time.Second
	// isolatedEvery is how often a node with no link and no contact in
	// progress looks for its ring again, instead of waiting for the next
	// heal.
	isolatedEvery = 5 * time.Second
	// reaimAfter is how long the size estimate must stay below half of
	// what a long-distance link was aimed for before the link is carried
	// over to it (and aimed anew if too short for it): a successor list
	// shortened for a moment by a failure must not touch them all. An
	// estimate above twice is taken at once.
	reaimAfter = 30 * time.Second
	// reaimShortAfter is how long a link answered short of its target
	// is kept before it is aimed again (see ldSlot.reaim): long enough for
	// the ring's long links to be up, so that the new request crosses
	// them. At 20,000 nodes started at once, the long-distance requests
	// had all but stopped by 11 s of virtual time.
	reaimShortAfter = 10 * time.Second
	// fastStabilize is the stabilization period while a node's
	// neighbourhood is changing.
	fastStabilize = 250 * time.Millisecond
	// LeaveDrain is how long a node keeps switching after Leave.
	LeaveDrain = 500 * time.Millisecond
)

// peerState is what the overlay knows about a node it is (or wants to be)
// linked to.
type peerState struct {
	info         overlay.Info
	relays       bool           // the peer relays for others
	local        overlay.Reason // why we want the link
	remote       overlay.Reason // why the peer wants it (its LinkUse)
	remoteJoined bool
	announced    overlay.Reason // last reasons we sent
	announcedJ   bool
	announcedAt  time.Time
	// heard: a LinkUse of the peer arrived on this link. Until then ours
	// ask for one, and are repeated, because the first datagrams on a new
	// session can reach the peer before it has installed the session.
	heard    bool
	asks     int // LinkUse sent without having heard the peer's
	dial     *link.Dial
	unwanted time.Time // when both sides stopped wanting the link
	closing  bool      // closed on purpose, not a failure
	// closingSaid is when this node last told the peer it closes the
	// link (zero when it has not); closingHeard, that the peer said so.
	closingSaid  time.Time
	closingHeard bool
	spoke        time.Time // when the peer last spoke for itself (its From is its Origin)
	accepted     time.Time // when this node accepted the peer's link request
	adjacent     bool      // in the flood adjacency (setAdjacency)
	retireAt     time.Time // when a retiring link is torn down
}

// ldSlot is one long-distance link: its harmonic draw and, once a node
// answered, that node.
type ldSlot struct {
	draw     overlay.LongDistanceDraw
	size     float64 // size estimate the target was computed for
	aimedOn  int     // successors that estimate rested on
	peer     nid.ID
	request  uint64
	asked    time.Time
	retry    time.Time
	refusals int // in a row, to back off
	// offSince is when the size estimate went off by more than a factor
	// two from size; zero while it is not.
	offSince time.Time
	// reaim is when a link made short of its target is aimed again; zero
	// for a link made where it was aimed. While a ring forms, few nodes
	// have long links yet, and a request routed over successor links ran
	// out of its controlTTL hops and was dropped, to be asked again 5 s
	// later: at 20,000 nodes started at once, requests were passed on 31
	// times each and the overlay did not settle in 20 minutes. The node
	// where the hops run out answers instead; the link it gives is
	// shorter than drawn, and is aimed again reaimShortAfter later, when
	// the ring's long links carry the request.
	reaim time.Time
}

// contact is a node we dial by address to find our place on the ring:
// a configured bootstrap or a remembered node, for healing partitions.
type contact struct {
	dial      *link.Dial
	asked     bool
	bootstrap bool
}

type pendingRequest struct {
	slot     *ldSlot
	target   nid.ID // where a long-distance request was aimed
	onDemand nid.ID
	expires  time.Time
}

type overlayState struct {
	cfg        OverlayConfig
	ring       *overlay.Ring
	peers      map[nid.ID]*peerState
	ld         []*ldSlot
	contacts   []*contact
	requests   map[uint64]pendingRequest
	remembered []overlay.Info
	// dead remembers nodes found dead, so that stale successor lists from
	// others do not bring them back before the news has spread.
	dead      map[nid.ID]time.Time
	rng       *rand.Rand
	joined    bool
	stabilize time.Time
	// stabilized is when the node last asked its successor.
	stabilized time.Time
	// stabilizeGap is the current stabilization period: short while the
	// neighbourhood changes, doubling up to StabilizeEvery while it does
	// not, so a forming ring settles in round trips and a settled one costs
	// no more than before.
	stabilizeGap    time.Duration
	lastSuccessor   nid.ID
	lastPredecessor nid.ID
	// askers are the nodes that recently asked this one for their place.
	askers []asker
	// lookedUp is when the node last asked the ring for its place.
	lookedUp time.Time
	// lonely is since when the node has had no link up and no contact in
	// progress; zero while it has one.
	lonely  time.Time
	heal    time.Time
	scratch []nid.ID
	od      onDemandState
	// Stats counts control messages by type: sent, received, forwarded.
	sent, received, forwarded [16]uint64
	formation                 formation
}

func (n *Node) initOverlay(now time.Time) {
	c := &n.cfg.Overlay
	if c.Params.Successors <= 0 {
		c.Params.Successors = DefaultSuccessors
	}
	if c.Params.LongDistance < 0 {
		c.Params.LongDistance = 0
	}
	if c.StabilizeEvery <= 0 {
		c.StabilizeEvery = DefaultStabilizeEvery
	}
	if c.HealEvery <= 0 {
		c.HealEvery = DefaultHealEvery
	}
	var seed [32]byte
	if _, err := n.cfg.Handshake.Rand.Read(seed[:]); err != nil {
		panic("node: random source failed: " + err.Error())
	}
	o := &n.ov
	o.cfg = *c
	o.ring = overlay.NewRing(n.self, max(2*c.Params.Successors, 8))
	o.peers = make(map[nid.ID]*peerState)
	o.requests = make(map[uint64]pendingRequest)
	o.dead = make(map[nid.ID]time.Time)
	o.rng = rand.New(rand.NewChaCha8(seed))
	o.formation.started = now
	o.stabilizeGap = min(fastStabilize, c.StabilizeEvery)
	o.stabilize = now.Add(o.jitter(o.stabilizeGap))
	o.heal = now.Add(c.HealEvery + o.jitter(c.HealEvery))
	for _, b := range c.Bootstrap {
		n.addContact(b, nid.ID{}, true, now)
	}
	for _, r := range c.Remembered {
		n.remember(r)
	}
	for i := len(o.remembered) - 1; i >= max(0, len(o.remembered)-rememberedContacts); i-- {
		if r := o.remembered[i]; len(c.Bootstrap) == 0 || i == len(o.remembered)-1 {
			n.addContact(r.Endpoints[0], r.ID, false, now)
		}
	}
	o.od.init(c.OnDemand)
}

// jitter is a random duration in [0, d/2), to keep nodes out of step.
func (o *overlayState) jitter(d time.Duration) time.Duration {
	return time.Duration(o.rng.Int64N(int64(d)/2 + 1))
}

// overlayLinkUp runs when a link comes up.
func (n *Node) overlayLinkUp(l *link.Link, now time.Time) {
	o := &n.ov
	ps := n.peer(l.Peer.ID)
	ps.keep()
	if o.formation.firstLink.IsZero() {
		o.formation.firstLink = now
	}
	ps.info.Endpoints = mergeEndpoints(l.Endpoint(), ps.info.Endpoints)
	l.AddCandidates(n.candidates(ps.info))
	if ps.dial != nil {
		n.links.RemoveDial(ps.dial)
		ps.dial = nil
	}
	if o.cfg.Disabled {
		return
	}
	for _, c := range o.contacts {
		if c.dial.Peer == l.Peer.ID && !c.asked {
			ps.local |= overlay.ReasonBootstrap
			c.asked = true
			n.findSuccessor(l, now)
		}
	}
	if n.beaconLinkUp(l, ps) && !o.joined {
		n.findSuccessor(l, now)
	}
	delete(o.dead, l.Peer.ID)
	o.ring.Consider(ps.info)
	n.remember(ps.info)
	n.announce(l, ps, true)
	n.reconcile(now)
}

// overlayLinkDown runs when a link went down.
func (n *Node) overlayLinkDown(l *link.Link, now time.Time) {
	o := &n.ov
	ps := o.peers[l.Peer.ID]
	if ps == nil {
		return
	}
	delete(o.peers, l.Peer.ID)
	// A peer that spoke for itself since the link last carried anything is
	// alive — restarted, and talking to us by other ways — even if the
	// link died. One that stopped answering probes within the second may
	// just be held up: it leaves the view but is not buried, so the next
	// word of it links to it again at once. A relayed link dies with its
	// relay as well as with its peer: the peer is dialed again at once,
	// through another relay, and buried only if that fails.
	switch {
	case ps.closing || ps.spoke.After(l.Counters.LastRx()) || l.Endpoint().IsRelay():
	case l.Unanswered():
		o.ring.Forget(l.Peer.ID)
	default:
		n.buried(l.Peer.ID, now)
	}
	for _, s := range o.ld {
		if s.peer == l.Peer.ID {
			s.peer, s.retry = nid.ID{}, now
		}
	}
	o.od.linkDown(l.Peer.ID)
	if !o.cfg.Disabled {
		n.reconcile(now)
	}
}

// overlayDialFailed: a node we wanted could not be reached.
func (n *Node) overlayDialFailed(d *link.Dial, now time.Time) {
	o := &n.ov
	for i, c := range o.contacts {
		if c.dial == d {
			o.contacts = slices.Delete(o.contacts, i, i+1)
			break
		}
	}
	for id, ps := range o.peers {
		if ps.dial == d {
			ps.dial = nil
			if n.upLink(id) == nil {
				n.buried(id, now)
				delete(o.peers, id)
				for _, s := range o.ld {
					if s.peer == id {
						s.peer, s.retry = nid.ID{}, now
					}
				}
			}
		}
	}
	if !o.cfg.Disabled {
		n.reconcile(now)
	}
}

// overlayTick runs the overlay's timers.
func (n *Node) overlayTick(now time.Time) {
	o := &n.ov
	if o.cfg.Disabled {
		return
	}
	for id, until := range o.dead {
		if !now.Before(until) {
			delete(o.dead, id)
		}
	}
	for id, r := range o.requests {
		if !now.Before(r.expires) {
			delete(o.requests, id)
			if r.slot != nil {
				r.slot.request, r.slot.retry = 0, now
			}
		}
	}
	if !now.Before(o.stabilize) {
		o.stabilize = now.Add(o.stabilizeGap + o.jitter(o.stabilizeGap/2))
		o.stabilized = now
		n.notifyPredecessor(now)
		if succ := o.ring.Successors(1); len(succ) > 0 {
			if l := n.upLink(succ[0].ID); l != nil {
				n.count(&o.sent, overlay.Stabilize)
				n.sendDirect(l, &overlay.Message{Type: overlay.Stabilize, TTL: 1, Dest: succ[0].ID, Origin: n.self, Via: succ[0].ID, ID: o.rng.Uint64(), Exact: true, From: n.selfInfo()})
			}
		}
	}
	if !now.Before(o.heal) || n.isolated(now) {
		o.heal = now.Add(o.cfg.HealEvery + o.jitter(o.cfg.HealEvery))
		n.heal(now)
	}
	n.tickLongDistance(now)
	n.tickOnDemand(now)
	n.reconcile(now)
}
