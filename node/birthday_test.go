package node

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"burrow/link"
	"burrow/overlay"
)

func TestMapsEveryDestinationFromTheAdvertisedEndpoints(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, c := range []struct {
		eps  []netip.AddrPort
		turn netip.AddrPort
		want bool
	}{
		{[]netip.AddrPort{ap("10.0.0.2:51820"), ap("198.51.100.7:4000"), ap("198.51.100.7:4001")}, netip.AddrPort{}, true},
		{[]netip.AddrPort{ap("10.0.0.2:51820"), ap("198.51.100.7:4000")}, netip.AddrPort{}, false},
		{[]netip.AddrPort{ap("198.51.100.7:4000"), ap("198.51.100.8:4001")}, netip.AddrPort{}, false},        // two addresses: two NATs, or a multi-homed host
		{[]netip.AddrPort{ap("10.0.0.2:4000"), ap("10.0.0.2:4001")}, netip.AddrPort{}, false},                // private
		{[]netip.AddrPort{ap("[2001:db8::7]:4000"), ap("[2001:db8::7]:4001")}, netip.AddrPort{}, false},      // IPv6 has no NAT
		{[]netip.AddrPort{ap("198.51.100.7:4000"), ap("198.51.100.7:3478")}, ap("198.51.100.7:3478"), false}, // one is the TURN address
	} {
		if got := mapsEveryDestination(overlay.Info{Endpoints: c.eps, TURN: c.turn}); got != c.want {
			t.Errorf("%v (TURN %v): %v, want %v", c.eps, c.turn, got, c.want)
		}
	}
}

// birthdayNet is two public nodes, s1 (a beacon that relays) and s2 (a
// second STUN server), and nodes behind NATs of kinds. Every NATed node
// has a link to s1 and knows how both see it.
func birthdayNet(t testing.TB, seed uint64, kinds ...natKind) (w *testNet, s1 *testNode, natted []*testNode) {
	t.Helper()
	w = &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	s1 = w.add("s1", seed*100, OverlayConfig{Disabled: true})
	s2 := w.add("s2", seed*100+1, OverlayConfig{Disabled: true})
	s1.node.dp.relay = newRelayBudget(10 << 20)
	reach := ReachConfig{Beacons: []Beacon{{Addr: s1.addr}, {Addr: s2.addr}}, PunchBudget: 1000}
	for i, kind := range kinds {
		n := w.addWith(fmt.Sprint("n", i), seed*100+2+uint64(i), OverlayConfig{Disabled: true}, reach)
		w.behindNAT(n, netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)}), kind, seed*100+uint64(i))
		natted = append(natted, n)
	}
	w.advance(2*time.Second, 100*time.Millisecond)
	for _, n := range natted {
		if l := n.node.upLink(s1.node.Self()); l == nil {
			t.Fatalf("%s has no link to the beacon", n.name)
		}
	}
	return w, s1, natted
}

// relayThenTell links a and b through relay and hands each the other's
// Info, as the overlay's LinkUse would.
func relayThenTell(w *testNet, a, b, relay *testNode) *link.Link {
	pub := w.keys[b.name]
	a.node.Links().AddDial([]link.Endpoint{link.RelayEndpoint(relay.node.Self(), b.node.Self())}, link.DialOptions{Key: &pub}, w.now)
	w.advance(time.Second, 100*time.Millisecond)
	l := a.node.upLink(b.node.Self())
	if l == nil || l.Endpoint().Path() != "relay" {
		w.t.Fatalf("no relayed link %s-%s: %+v", a.name, b.name, l)
	}
	a.node.peer(b.node.Self()).info = b.node.selfInfo()
	b.node.peer(a.node.Self()).info = a.node.selfInfo()
	return l
}

// An endpoint-independent NAT and a symmetric one: the symmetric side
// sends from its spare sockets, the other guesses ports, and the link
// moves from the relay to a direct path within the round's budget.
func TestBirthdayProbingTakesARelayedLinkDirect(t *testing.T) {
	w, s1, n := birthdayNet(t, 3, endpointIndependent, randomPorts)
	easy, hard := n[0], n[1]
	if got := hard.node.reach.prober.Behaviour().String(); got != "address-dependent" {
		t.Fatalf("the symmetric NAT's node sees its NAT as %s", got)
	}
	l := relayThenTell(w, easy, hard, s1)
	w.advance(3*time.Second, 10*time.Millisecond)
	if !l.Endpoint().IsDirect() {
		t.Fatalf("link still on %v after 3 s of birthday probing", l.Endpoint())
	}
	if ep := hard.node.upLink(easy.node.Self()).Endpoint(); ep.Via != link.Spare {
		t.Fatalf("the symmetric side's link is on %v, not one of its spare sockets", ep)
	}
	e, h := easy.node.punchStatus(hard.node.Self()), hard.node.punchStatus(easy.node.Self())
	if e == nil || h == nil || e.Side != "easy" || h.Side != "hard" {
		t.Fatalf("punch status %+v / %+v", e, h)
	}
	if e.Probes > 1000 || h.Probes != SpareSockets || e.DirectAfter <= 0 || e.DirectAfter > 3000 {
		t.Fatalf("easy side %+v, hard side %+v: want at most 1000 guesses, %d spare sockets, direct within 3 s", e, h, SpareSockets)
	}
	// Frames cross the new path.
	hard.fromTAP(ethFrame(easy.mac, hard.mac, "punched"))
	if easy.countTAP("punched") != 1 {
		t.Fatal("a frame over the punched path did not arrive")
	}
}

// A NAT that allocates ports in sequence: the first batch of guesses, just
// above the highest mapping the peer advertised, finds the spare sockets'
// mappings, every time (random guesses would in 55 % of the pairs).
func TestBirthdayProbingPredictsSequentialPorts(t *testing.T) {
	for seed := range uint64(20) {
		w, s1, n := birthdayNet(t, 10+seed, endpointIndependent, sequentialPorts)
		l := relayThenTell(w, n[0], n[1], s1)
		w.advance(time.Second, 10*time.Millisecond)
		if st := n[0].node.punchStatus(n[1].node.Self()); !l.Endpoint().IsDirect() || st.Probes != probeBatch {
			t.Fatalf("seed %d: link on %v after %+v: want direct after the first batch of %d guesses", seed, l.Endpoint(), st, probeBatch)
		}
	}
}

// Two symmetric NATs: no side can aim at a mapping, so neither probes.
func TestNoBirthdayProbingBetweenTwoSymmetricNATs(t *testing.T) {
	w, s1, n := birthdayNet(t, 4, randomPorts, randomPorts)
	relayThenTell(w, n[0], n[1], s1)
	w.advance(3*time.Second, 100*time.Millisecond)
	for _, x := range n {
		if st := x.node.reachStatus(); st.Punched != 0 {
			t.Fatalf("%s sent %d probes toward a symmetric NAT from behind one", x.name, st.Punched)
		}
	}
}

// BenchmarkBirthdayProbing runs birthday probing between an
// endpoint-independent NAT and a symmetric one, each iteration with other
// random ports, and reports the guesses the endpoint-independent side
// spent, the time to the direct path and the share of pairs that got one
// within the first round.
func BenchmarkBirthdayProbing(b *testing.B) {
	var guesses, direct int
	var after float64
	for i := range b.N {
		w, s1, n := birthdayNet(b, uint64(100+i), endpointIndependent, randomPorts)
		l := relayThenTell(w, n[0], n[1], s1)
		w.advance(3*time.Second, 10*time.Millisecond)
		st := n[0].node.punchStatus(n[1].node.Self())
		guesses += int(st.Probes)
		if l.Endpoint().IsDirect() {
			direct++
			after += st.DirectAfter
		}
	}
	b.ReportMetric(float64(guesses)/float64(b.N), "guesses/pair")
	b.ReportMetric(float64(direct)/float64(b.N), "direct/pair")
	if direct > 0 {
		b.ReportMetric(after/float64(direct), "ms-to-direct")
	}
}

// The peer's advertised port moves down between two batches of guesses,
// so the next guess in sequence was made already: the batch goes on with
// other ports rather than guessing that one again forever (a daemon's
// core hung so in an e2e run, its watchdog showed it in probe).
func TestGuessesGoOnWhenThePeersPortMoves(t *testing.T) {
	w, s1, n := birthdayNet(t, 5, endpointIndependent, randomPorts)
	easy, hard := n[0], n[1]
	l := relayThenTell(w, easy, hard, s1)
	target := netip.MustParseAddrPort("198.51.100.9:40000")
	b := &birthday{role: easySide, started: w.now}
	done := make(chan struct{})
	go func() {
		defer close(done)
		easy.node.probe(l, b, target, w.now)
		easy.node.probe(l, b, netip.AddrPortFrom(target.Addr(), target.Port()-1), w.now)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the second batch of guesses did not end")
	}
	if len(b.guessed) != 2*probeBatch {
		t.Fatalf("%d ports guessed after two batches, want %d", len(b.guessed), 2*probeBatch)
	}
}
