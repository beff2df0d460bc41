package node

import (
	"net/netip"
	"time"

	"burrow/link"
	"burrow/nat"
	"burrow/nid"
	"burrow/overlay"
)

// Birthday probing opens a direct path between a node behind a NAT that
// maps every destination to a new random port (the hard side) and a node
// behind one that keeps a mapping per socket (the easy side), whose link
// otherwise stays relayed: each side's packets meet a filter that only
// lets in answers to what its own side sent.
//
// The hard side sends one handshake from each of SpareSockets sockets to
// the easy side's public address: its NAT makes as many mappings, at
// random ports. The easy side sends handshakes to random ports of the
// hard side's public address, probeBatch every probeGap, up to the punch
// budget per round. A guess that names one of the mappings passes the
// hard side's NAT — or, if it got there first, opened the easy side's
// NAT to the hard side's handshake from that port — and the handshake
// that completes moves the link onto that path. With 512 mappings among
// the 64,512 ports a NAT picks from, one guess in 126 hits, and 1,000
// guesses all miss with a probability of e^-7.9, 0.04 %.
//
// Which side is which each node tells from the Info both already have:
// a node whose STUN servers saw different mappings advertises them all,
// two ports at one public address (mapsEveryDestination).
const (
	// SpareSockets is how many sockets the hard side sends from; the
	// runtime opens them on first use.
	SpareSockets = 512
	// probeBatch guesses leave every probeGap, so a round stops soon after
	// its first hit instead of spending its whole budget.
	probeBatch = 100
	probeGap   = 50 * time.Millisecond
	// A round that found no path is tried again after birthdayRetry, then
	// ever less often; both sides count from their own first round, which
	// the relayed link's coming up started within a tick of each other's.
	birthdayRetry    = 30 * time.Second
	birthdayMaxRetry = 8 * time.Minute
	// lateAnswers is how long answers to a batch are waited for.
	lateAnswers = 10 * time.Second
)

// birthdayRole is a node's side of a birthday probing.
type birthdayRole uint8

const (
	noBirthday birthdayRole = iota
	hardSide
	easySide
)

// birthday is the probing toward one peer whose link is relayed.
type birthday struct {
	role    birthdayRole
	started time.Time // the first round
	round   time.Time // the current round
	next    time.Time // the next batch, or round
	sent    time.Time // the last batch
	rounds  int
	guessed map[uint16]bool // the easy side's guesses this round
	probes  uint64          // datagrams sent, every round
	// direct is how long after the first round the link went direct,
	// zero until it did.
	direct time.Duration
}

// PunchStatus tells how birthday probing toward a peer went.
type PunchStatus struct {
	Side   string `json:"side"` // "hard": sent from spare sockets; "easy": guessed ports
	Rounds int    `json:"rounds"`
	Probes uint64 `json:"probes"`
	// DirectAfter is how long after the first round the link went direct.
	DirectAfter float64 `json:"direct_after_ms,omitempty"`
}

// mapsEveryDestination reports whether in's NAT gives each destination a
// new mapping: its endpoints hold two ports at one public IPv4 address.
func mapsEveryDestination(in overlay.Info) bool {
	for i, a := range in.Endpoints {
		if !punchable(in, a) {
			continue
		}
		for _, b := range in.Endpoints[i+1:] {
			if punchable(in, b) && b.Addr() == a.Addr() && b.Port() != a.Port() {
				return true
			}
		}
	}
	return false
}

// punchable says ep is a public IPv4 endpoint of in other than its TURN
// relayed address: IPv6 has no NAT to punch, and a TURN server no ports
// to guess.
func punchable(in overlay.Info, ep netip.AddrPort) bool {
	return ep.Addr().Is4() && publicAddr(ep.Addr()) && ep != in.TURN
}

// birthdayRoleFor is this node's side toward peer, noBirthday when
// probing cannot help: neither or both sides map every destination anew,
// or the easy one has no public address to aim at.
func (n *Node) birthdayRoleFor(peer overlay.Info) (birthdayRole, netip.AddrPort) {
	if n.reach.cfg.PunchBudget <= 0 {
		return noBirthday, netip.AddrPort{}
	}
	// The first public endpoint, at the highest port the peer advertises
	// at its address: where a NAT that allocates in sequence goes on.
	var target netip.AddrPort
	for _, ep := range peer.Endpoints {
		if punchable(peer, ep) && (!target.IsValid() || ep.Addr() == target.Addr() && ep.Port() > target.Port()) {
			target = ep
		}
	}
	if !target.IsValid() {
		return noBirthday, target
	}
	self, other := n.reach.prober.Behaviour(), mapsEveryDestination(peer)
	switch {
	case self == nat.AddressDependent && !other:
		return hardSide, target
	case (self == nat.EndpointIndependent || self == nat.Translated) && other:
		return easySide, target
	}
	return noBirthday, target
}

// birthdayTick starts and paces the probing toward every peer whose link
// is up on a relayed, TURN or WebSocket path, and notes when it went
// direct.
func (n *Node) birthdayTick(now time.Time) {
	r := &n.reach
	for _, id := range n.adjacency {
		l, ps := n.upLink(id), n.ov.peers[id]
		b := r.birthdays[id]
		if l == nil || ps == nil {
			continue
		}
		if l.Endpoint().IsDirect() {
			// A link that came up relayed and went direct later: its
			// peer was no STUN server candidate at LinkUp.
			n.askLinkedPeer(l)
			if b != nil && b.direct == 0 {
				b.direct = now.Sub(b.started)
				n.log.Info("birthday probing found a direct path", "peer", l.Peer.Name, "endpoint", l.Endpoint(),
					"after", b.direct.Round(time.Millisecond), "probes", b.probes, "rounds", b.rounds)
			}
			continue
		}
		if b != nil && now.Before(b.next) {
			continue
		}
		role, target := n.birthdayRoleFor(ps.info)
		if role == noBirthday {
			delete(r.birthdays, id)
			continue
		}
		if b == nil {
			b = &birthday{started: now}
			r.birthdays[id] = b
		}
		b.role = role
		n.probe(l, b, target, now)
	}
	for id := range r.birthdays {
		if n.upLink(id) == nil {
			delete(r.birthdays, id)
		}
	}
}

// probe sends the next datagrams of a birthday round toward target.
func (n *Node) probe(l *link.Link, b *birthday, target netip.AddrPort, now time.Time) {
	if b.guessed == nil {
		b.round, b.rounds = now, b.rounds+1
	}
	var eps []link.Endpoint
	if b.role == hardSide {
		for s := range uint16(SpareSockets) {
			eps = append(eps, link.SpareEndpoint(s, target))
		}
	} else {
		if b.guessed == nil {
			b.guessed = make(map[uint16]bool)
		}
		budget := n.reach.cfg.PunchBudget
		for len(eps) < probeBatch && len(b.guessed) < budget {
			// Port prediction first: a NAT that allocates ports in
			// sequence made the spare sockets' mappings just above the
			// highest one the peer advertised. Against a random NAT
			// these guesses are as good as any. A port guessed already
			// (the peer's advertised port moved between batches) is
			// drawn at random instead: guessing it again made no
			// progress, and the core looped here for good.
			port := int(target.Port()) + len(b.guessed) + 1
			if len(b.guessed) >= SpareSockets || port > 65535 || b.guessed[uint16(port)] {
				port = 1024 + n.ov.rng.IntN(65536-1024)
			}
			if !b.guessed[uint16(port)] {
				b.guessed[uint16(port)] = true
				eps = append(eps, link.UDPEndpoint(netip.AddrPortFrom(target.Addr(), uint16(port))))
			}
		}
	}
	if err := n.links.Punch(l, eps, now); err != nil {
		n.log.Debug("birthday probing", "peer", l.Peer.Name, "err", err)
	}
	b.probes, b.sent = b.probes+uint64(len(eps)), now
	n.stats.PunchProbes.Add(uint64(len(eps)))
	if b.role == easySide && len(b.guessed) < n.reach.cfg.PunchBudget {
		b.next = now.Add(probeGap)
		return
	}
	n.log.Debug("birthday round sent", "peer", l.Peer.Name, "side", b.status().Side, "round", b.rounds, "probes", b.probes)
	b.guessed = nil
	b.next = b.round.Add(min(birthdayRetry<<min(b.rounds-1, 8), birthdayMaxRetry))
}

// birthdayDeadline is when the next batch or round of probing is due;
// while answers to a batch may still come, every probeGap, so that the
// time to a direct path is known to that.
func (n *Node) birthdayDeadline(now time.Time) time.Time {
	var next time.Time
	for _, b := range n.reach.birthdays {
		if b.direct != 0 {
			continue
		}
		due := b.next
		if soon := now.Add(probeGap); now.Before(b.sent.Add(lateAnswers)) && soon.Before(due) {
			due = soon
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

func (b *birthday) status() *PunchStatus {
	st := &PunchStatus{Side: "easy", Rounds: b.rounds, Probes: b.probes, DirectAfter: b.direct.Seconds() * 1000}
	if b.role == hardSide {
		st.Side = "hard"
	}
	return st
}

// punchStatus is the probing toward peer, nil if there was none.
func (n *Node) punchStatus(peer nid.ID) *PunchStatus {
	if b := n.reach.birthdays[peer]; b != nil {
		return b.status()
	}
	return nil
}
