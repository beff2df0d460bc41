package node

import (
	"net/netip"
	"slices"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// RendezvousConfig turns on first contact through a rendezvous server (an
// XMPP server the runtime talks to), for networks without a beacon. The
// server holds one card per member in a bounded list; a node that has no
// link reads the list once, offers its card to a few members, and both
// sides dial each other's candidates at once, which punches the NATs
// between them. From the first link on, the overlay's own join runs; the
// server is not needed while links are up.
type RendezvousConfig struct {
	Enabled bool
	// Contacts is how many members a node without a link offers its card
	// to; 0 means DefaultRendezvousContacts.
	Contacts int
}

// Rendezvous is implemented by Outputs that reach a rendezvous server.
// Addresses are the server's names of members (XMPP JIDs); the core only
// hands them back.
type Rendezvous interface {
	// PublishCard puts this node's card on the server in place of the
	// last one.
	PublishCard(card overlay.Card)
	// FetchCards reads the members' cards; the answer comes back as
	// RendezvousCards.
	FetchCards()
	// SendCard sends a card to one member.
	SendCard(to string, card overlay.Card)
}

// RendezvousMember is a member's card as the server holds it, with the
// address the member takes cards at.
type RendezvousMember struct {
	Address string
	Card    overlay.Card
}

const (
	// DefaultRendezvousContacts is how many members a joiner contacts: a
	// few, so one that is gone or unreachable does not stall the join.
	DefaultRendezvousContacts = 3
	// maxSTUNServers bounds the members asked for our public address.
	maxSTUNServers = 4
	// maxOffers bounds the offers to one member in one join: the first,
	// and again when our endpoints changed (the public one learned).
	maxOffers = 3
	// maxUnanswered bounds the members remembered as not answering.
	maxUnanswered = 64
	// maxAnswerDials bounds the dials toward offering joiners at a time:
	// anyone with an account on the server can send offers.
	maxAnswerDials = 8
	// rendezvousDialAttempts spans the time until a late answer or a
	// new offer arrives.
	rendezvousDialAttempts = 5
	// fetchFirst and fetchMax space the reads of a node that stays
	// without a link.
	fetchFirst = 5 * time.Second
	fetchMax   = 2 * time.Minute
)

type rendezvousState struct {
	cfg RendezvousConfig
	on  bool
	up  bool // connected to the server
	// published are the endpoints of the card last published; nil when
	// a card is due.
	published []netip.AddrPort
	fetching  bool
	fetchGap  time.Duration
	nextFetch time.Time
	picked    []*rendezvousPick
	// unanswered are members picked before that no link came of: cards
	// of members that are gone stay on the list until newer ones push
	// them out, so the next picks try the others first.
	unanswered []nid.ID
	answering  []*link.Dial
	stats      RendezvousStatus
}

// rendezvousPick is a member a joiner offered its card to.
type rendezvousPick struct {
	address string
	id      nid.ID
	contact *contact
	offered []netip.AddrPort // our endpoints in the last offer
	offers  int
}

func (n *Node) initRendezvous() {
	r := &n.rv
	r.cfg = n.cfg.Rendezvous
	_, can := n.out.(Rendezvous)
	r.on = r.cfg.Enabled && can && !n.cfg.Overlay.Disabled
	if r.cfg.Contacts <= 0 {
		r.cfg.Contacts = DefaultRendezvousContacts
	}
	r.fetchGap = fetchFirst
}

// RendezvousUp tells the core whether the runtime is connected to the
// rendezvous server. Links never depend on it; only first contact does.
func (n *Node) RendezvousUp(up bool, now time.Time) {
	n.now = now
	r := &n.rv
	r.up, r.fetching, r.published = up, false, nil
	if up {
		r.nextFetch = now
		n.rendezvousTick(now)
	}
	n.publishIfDirty()
}

// card is this node's card of the given kind.
func (n *Node) card(kind overlay.CardKind) overlay.Card {
	return overlay.Card{Kind: kind, Info: overlay.Info{ID: n.self, Endpoints: n.endpoints(), TURN: n.reach.turn}}
}

// rendezvousTick publishes the card when the endpoints changed, offers it
// again to picked members that have not linked yet, and reads the cards
// while the node has no link.
func (n *Node) rendezvousTick(now time.Time) {
	r := &n.rv
	if !r.on || !r.up {
		return
	}
	rv := n.out.(Rendezvous)
	eps := n.endpoints()
	if len(eps) > 0 && !slices.Equal(eps, r.published) {
		r.published = eps
		rv.PublishCard(n.card(overlay.CardPublished))
		r.stats.Published++
	}
	if n.ov.joined {
		r.picked = nil
	}
	r.picked = slices.DeleteFunc(r.picked, func(p *rendezvousPick) bool {
		gone := !slices.Contains(n.ov.contacts, p.contact) && n.upLink(p.id) == nil
		if gone && !slices.Contains(r.unanswered, p.id) {
			r.unanswered = append(r.unanswered, p.id)
			if len(r.unanswered) > maxUnanswered {
				r.unanswered = r.unanswered[1:]
			}
		}
		return gone
	})
	for _, p := range r.picked {
		if n.upLink(p.id) == nil && p.offers < maxOffers && !slices.Equal(p.offered, eps) {
			n.offer(p, eps)
		}
	}
	if len(n.adjacency) > 0 {
		r.fetchGap, r.unanswered = fetchFirst, nil
		return
	}
	if r.fetching || len(r.picked) > 0 || now.Before(r.nextFetch) {
		return
	}
	r.fetching = true
	r.nextFetch = now.Add(r.fetchGap)
	r.fetchGap = min(2*r.fetchGap, fetchMax)
	r.stats.Fetches++
	rv.FetchCards()
}

func (n *Node) offer(p *rendezvousPick, eps []netip.AddrPort) {
	p.offered, p.offers = eps, p.offers+1
	n.out.(Rendezvous).SendCard(p.address, n.card(overlay.CardOffer))
	n.rv.stats.OffersSent++
}

// RendezvousCards takes the members' cards the server holds: a node still
// without a link picks a few, asks the public ones how they see it, dials
// them all and offers them its card.
func (n *Node) RendezvousCards(members []RendezvousMember, now time.Time) {
	n.now = now
	r := &n.rv
	r.fetching = false
	r.stats.Listed = len(members)
	if !r.on || len(n.adjacency) > 0 {
		return
	}
	members = slices.DeleteFunc(slices.Clone(members), func(m RendezvousMember) bool {
		return m.Card.Kind != overlay.CardPublished || m.Card.Info.ID == n.self || n.revoked(m.Card.Info.ID) ||
			slices.ContainsFunc(r.picked, func(p *rendezvousPick) bool { return p.id == m.Card.Info.ID })
	})
	n.ov.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	// Members with only public endpoints first: they answer whatever
	// the joiner's NAT, and tell it its public address. Members that
	// did not answer before go last.
	slices.SortStableFunc(members, func(a, b RendezvousMember) int {
		ua, ub := slices.Contains(r.unanswered, a.Card.Info.ID), slices.Contains(r.unanswered, b.Card.Info.ID)
		if ua != ub {
			return boolOrder(ua, ub)
		}
		return boolOrder(!public(a.Card.Info), !public(b.Card.Info))
	})
	for _, m := range members[:min(len(members), r.cfg.Contacts-len(r.picked))] {
		n.askForAddress(m.Card.Info, now)
		p := &rendezvousPick{address: m.Address, id: m.Card.Info.ID}
		p.contact = n.rendezvousContact(m.Card.Info, now)
		r.picked = append(r.picked, p)
		n.offer(p, n.endpoints())
	}
	n.publishIfDirty()
}

// RendezvousCard takes a card a member sent this node: a joiner's offer,
// dialed at once and answered with our card, or the answer to our offer.
func (n *Node) RendezvousCard(from string, card overlay.Card, now time.Time) {
	n.now = now
	r := &n.rv
	if !r.on || card.Info.ID == n.self || n.revoked(card.Info.ID) {
		return
	}
	switch card.Kind {
	case overlay.CardOffer:
		r.stats.OffersGot++
		if n.links.Links()[card.Info.ID] == nil {
			if len(r.answering) >= maxAnswerDials {
				n.stats.drop(DropRateLimited)
				return
			}
			d := n.links.AddDial(n.candidates(card.Info), link.DialOptions{Peer: card.Info.ID, Attempts: dialAttempts}, now)
			r.answering = append(r.answering, d)
		}
		n.out.(Rendezvous).SendCard(from, n.card(overlay.CardAnswer))
		r.stats.Answered++
	case overlay.CardAnswer:
		i := slices.IndexFunc(r.picked, func(p *rendezvousPick) bool { return p.id == card.Info.ID })
		if i < 0 || n.upLink(card.Info.ID) != nil {
			return
		}
		p := r.picked[i]
		if slices.Contains(n.ov.contacts, p.contact) {
			n.links.RemoveDial(p.contact.dial)
			n.ov.contacts = slices.DeleteFunc(n.ov.contacts, func(c *contact) bool { return c == p.contact })
		}
		n.askForAddress(card.Info, now)
		p.contact = n.rendezvousContact(card.Info, now)
	}
	n.publishIfDirty()
}

// rendezvousContact dials a member found through the server as a contact
// to find our place through.
func (n *Node) rendezvousContact(in overlay.Info, now time.Time) *contact {
	d := n.links.AddDial(n.candidates(in), link.DialOptions{Peer: in.ID, Attempts: rendezvousDialAttempts}, now)
	c := &contact{dial: d, bootstrap: true}
	n.ov.contacts = append(n.ov.contacts, c)
	return c
}

// askForAddress makes a member with a public address one of the STUN
// servers that tell this node how it is seen: without a beacon, members
// answer STUN.
func (n *Node) askForAddress(in overlay.Info, now time.Time) {
	for _, ep := range in.Endpoints {
		if public(in) {
			n.reach.prober.AddServer(ep, maxSTUNServers, now)
		}
	}
}

// rendezvousLinkUp retires the dials toward a joiner once linked.
func (n *Node) rendezvousLinkUp(l *link.Link) {
	n.rv.answering = slices.DeleteFunc(n.rv.answering, func(d *link.Dial) bool {
		if d.Peer == l.Peer.ID {
			n.links.RemoveDial(d)
			return true
		}
		return false
	})
}

// rendezvousDialFailed reports whether d was a dial toward a joiner.
func (n *Node) rendezvousDialFailed(d *link.Dial) bool {
	i := slices.Index(n.rv.answering, d)
	if i >= 0 {
		n.rv.answering = slices.Delete(n.rv.answering, i, i+1)
	}
	return i >= 0
}

// revoked reports whether the CA revoked id: no use dialing it.
func (n *Node) revoked(id nid.ID) bool {
	_, ok := n.rev.raw[id]
	return ok
}

// public reports whether every endpoint of a node is a public address.
func public(in overlay.Info) bool {
	return len(in.Endpoints) > 0 && !slices.ContainsFunc(in.Endpoints, func(ep netip.AddrPort) bool { return !publicAddr(ep.Addr()) })
}

func publicAddr(a netip.Addr) bool { return a.IsGlobalUnicast() && !a.IsPrivate() }

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// RendezvousStatus counts what went through the rendezvous server.
type RendezvousStatus struct {
	Connected bool `json:"connected"`
	// Listed is how many cards the last read returned.
	Listed     int    `json:"listed"`
	Published  uint64 `json:"published"`
	Fetches    uint64 `json:"fetches"`
	OffersSent uint64 `json:"offers_sent"`
	OffersGot  uint64 `json:"offers_received"`
	Answered   uint64 `json:"answered"`
	// Picked are the members this node is joining through.
	Picked []string `json:"picked,omitempty"`
}

func (n *Node) rendezvousStatus() *RendezvousStatus {
	r := &n.rv
	if !r.on {
		return nil
	}
	st := r.stats
	st.Connected = r.up
	for _, p := range r.picked {
		st.Picked = append(st.Picked, p.address)
	}
	return &st
}
