package node

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"burrow/nid"
	"burrow/overlay"
)

// cardServer stands in for the XMPP server: one card per member, read
// whole, and cards sent to a member by its name; it delivers between
// events, as the runtime's client does.
type cardServer struct {
	w       *testNet
	cards   map[string]overlay.Card
	pending []func()
	fetches map[string]int
	sent    map[string]int // cards each node sent to others
}

func newCardServer(w *testNet) *cardServer {
	return &cardServer{w: w, cards: map[string]overlay.Card{}, fetches: map[string]int{}, sent: map[string]int{}}
}

func (s *cardServer) deliver() bool {
	if len(s.pending) == 0 {
		return false
	}
	f := s.pending[0]
	s.pending = s.pending[1:]
	f()
	return true
}

func (s *cardServer) node(name string) *testNode {
	for _, n := range s.w.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func (n *testNode) PublishCard(c overlay.Card) { n.w.cards.cards[n.name] = c }

func (n *testNode) FetchCards() {
	s := n.w.cards
	s.fetches[n.name]++
	var list []RendezvousMember
	for name, c := range s.cards {
		list = append(list, RendezvousMember{Address: name, Card: c})
	}
	s.pending = append(s.pending, func() { n.node.RendezvousCards(list, n.w.now) })
}

func (n *testNode) SendCard(to string, c overlay.Card) {
	s := n.w.cards
	s.sent[n.name]++
	if dst := s.node(to); dst != nil {
		s.pending = append(s.pending, func() { dst.node.RendezvousCard(n.name, c, n.w.now) })
	}
}

// TestRendezvousJoinsCostAFewCards: nodes that know no one but the
// rendezvous server join one after the other into one ring; each reads
// the list once and sends cards to a few members, however many there are.
func TestRendezvousJoinsCostAFewCards(t *testing.T) {
	w := newTestNet(t, 0, 7)
	w.cards = newCardServer(w)
	w.rendezvous = RendezvousConfig{Enabled: true}
	const size = 16
	for i := range size {
		n := w.add(fmt.Sprintf("n%d", i), uint64(700+i), OverlayConfig{StabilizeEvery: time.Second})
		n.node.RendezvousUp(true, w.now)
		w.drain()
		w.advance(2*time.Second, 250*time.Millisecond)
	}
	w.settle(t, 60*time.Second)
	for _, n := range w.nodes[1:] {
		if f := w.cards.fetches[n.name]; f != 1 {
			t.Errorf("%s read the list %d times, want once", n.name, f)
		}
		// Offers to its contacts, repeated only when its endpoints
		// changed (never here), and answers to those it was offered.
		if sent, most := w.cards.sent[n.name], DefaultRendezvousContacts*maxOffers+DefaultRendezvousContacts; sent > most {
			t.Errorf("%s sent %d cards for its join, more than %d", n.name, sent, most)
		}
	}
	if len(w.cards.cards) != size {
		t.Errorf("%d cards published, want one per node (%d)", len(w.cards.cards), size)
	}
	for _, n := range w.nodes {
		if st := n.node.Status().Rendezvous; st == nil || !st.Connected {
			t.Errorf("%s: status shows no rendezvous: %+v", n.name, st)
		}
	}
}

// TestRendezvousOffersDialAtMostAFewAtOnce: anyone with an account on the
// server can send offers; a node dials at most maxAnswerDials of them at a
// time and answers only those.
func TestRendezvousOffersDialAtMostAFewAtOnce(t *testing.T) {
	w := newTestNet(t, 0, 8)
	w.cards = newCardServer(w)
	w.rendezvous = RendezvousConfig{Enabled: true}
	n := w.add("n0", 800, OverlayConfig{})
	n.node.RendezvousUp(true, w.now)
	w.drain()
	for i := range 3 * maxAnswerDials {
		offer := overlay.Card{Kind: overlay.CardOffer, Info: overlay.Info{ID: nid.ID{byte(i + 1)}, Endpoints: []netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 4000)}}}
		n.node.RendezvousCard(fmt.Sprintf("stranger%d", i), offer, w.now)
	}
	if got := len(n.node.rv.answering); got != maxAnswerDials {
		t.Errorf("%d dials toward offering nodes, want %d", got, maxAnswerDials)
	}
	if got := w.cards.sent["n0"]; got != maxAnswerDials {
		t.Errorf("%d answers sent, want %d", got, maxAnswerDials)
	}
	if got := n.node.Stats().Drops()["rate_limited"]; got != 2*maxAnswerDials {
		t.Errorf("%d offers counted as rate_limited drops, want %d", got, 2*maxAnswerDials)
	}
	w.advance(time.Minute, time.Second)
	if got := len(n.node.rv.answering); got != 0 {
		t.Errorf("%d dials toward offering nodes left after they failed", got)
	}
}

// TestRendezvousJoinsPastCardsOfMembersThatAreGone: cards of members that
// are gone stay on the list; a joiner that picked them tries others next.
func TestRendezvousJoinsPastCardsOfMembersThatAreGone(t *testing.T) {
	w := newTestNet(t, 0, 9)
	w.cards = newCardServer(w)
	w.rendezvous = RendezvousConfig{Enabled: true}
	for i := range 2 {
		n := w.add(fmt.Sprintf("n%d", i), uint64(900+i), OverlayConfig{StabilizeEvery: time.Second})
		n.node.RendezvousUp(true, w.now)
		w.advance(2*time.Second, 250*time.Millisecond)
	}
	for i := range 12 {
		gone := overlay.Info{ID: nid.ID{0xee, byte(i)}, Endpoints: []netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(200 + i)}), 4000)}}
		w.cards.cards[fmt.Sprintf("gone%d", i)] = overlay.Card{Kind: overlay.CardPublished, Info: gone}
	}
	joiner := w.add("joiner", 999, OverlayConfig{StabilizeEvery: time.Second})
	joiner.node.RendezvousUp(true, w.now)
	took := w.settle(t, 5*time.Minute)
	t.Logf("joined after %v and %d reads of the list", took, w.cards.fetches["joiner"])
}
