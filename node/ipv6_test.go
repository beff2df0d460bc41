package node

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// A node dials a peer's IPv6 endpoints only when it has IPv6 of its own.
func TestIPv6CandidatesOnlyFromADualStackNode(t *testing.T) {
	w := newTestNet(t, 1, 20)
	n := w.nodes[0].node
	public4 := netip.MustParseAddrPort("198.51.100.7:4000")
	private4 := netip.MustParseAddrPort("10.0.0.7:4000")
	global6 := netip.MustParseAddrPort("[2001:db8::7]:4000")
	peer := overlay.Info{ID: nid.ID{7}, Endpoints: []netip.AddrPort{private4, public4, global6}}

	direct := func(eps []link.Endpoint) (out []netip.AddrPort) {
		for _, ep := range eps {
			if ep.Via == link.UDP && !ep.IsRelay() {
				out = append(out, ep.Addr)
			}
		}
		return out
	}
	if got := direct(n.candidates(peer)); slices.Contains(got, global6) || !slices.Contains(got, public4) || !slices.Contains(got, private4) {
		t.Fatalf("an IPv4-only node's candidates for the peer: %v", got)
	}
	w.giveIPv6(w.nodes[0])
	got := n.candidates(peer)
	if !slices.Contains(direct(got), global6) {
		t.Fatalf("a dual-stack node's candidates for the peer lack its IPv6 address: %v", direct(got))
	}
}

// Two dual-stack nodes that linked over IPv4 move to IPv6 without the link
// going down; when IPv6 between them dies, the link comes back over IPv4.
// dualStackPairOnIPv6 links two dual-stack nodes over IPv4 and has a's
// link move to b's IPv6 address, without going down, and b's to a's.
func dualStackPairOnIPv6(t *testing.T, seed uint64) (w *testNet, a, b *testNode, l *link.Link) {
	t.Helper()
	w = newTestNet(t, 2, seed)
	a, b = w.nodes[0], w.nodes[1]
	w.giveIPv6(a)
	w.giveIPv6(b)
	w.connect(0, 1)
	w.advance(time.Second, 100*time.Millisecond)
	l = a.node.Links().Links()[b.node.Self()]
	if l == nil || !l.Up() || l.Endpoint() != link.UDPEndpoint(b.addr) {
		t.Fatalf("link a-b over IPv4: %+v", l)
	}
	since := l.Since
	l.AddCandidates([]link.Endpoint{link.UDPEndpoint(b.addr6)})
	w.advance(2*time.Second, 100*time.Millisecond)
	if l.Endpoint() != link.UDPEndpoint(b.addr6) || !l.Since.Equal(since) {
		t.Fatalf("a's link to b is on %v (up since %v, was %v), not on b's IPv6 address", l.Endpoint(), l.Since, since)
	}
	if lb := b.node.Links().Links()[a.node.Self()]; lb == nil || lb.Endpoint() != link.UDPEndpoint(a.addr6) {
		t.Fatalf("b's link to a is not on a's IPv6 address: %+v", lb)
	}
	return w, a, b, l
}

func TestDualStackLinkPrefersIPv6AndFallsBackToIPv4(t *testing.T) {
	w, a, b, l := dualStackPairOnIPv6(t, 21)
	since := l.Since
	// IPv6 dies both ways; traffic keeps flowing, so the dead path is
	// noticed in round trips, and the dial brings the link back on IPv4.
	w.blocked = map[[2]netip.AddrPort]bool{{a.addr6, b.addr6}: true, {b.addr6, a.addr6}: true}
	start := w.now
	for w.now.Sub(start) < 10*time.Second {
		a.fromTAP(ethFrame(b.mac, a.mac, "ping"))
		b.fromTAP(ethFrame(a.mac, b.mac, "pong"))
		w.advance(100*time.Millisecond, 100*time.Millisecond)
		if l := a.node.Links().Links()[b.node.Self()]; l != nil && l.Up() && l.Endpoint() == link.UDPEndpoint(b.addr) {
			break
		}
	}
	l = a.node.Links().Links()[b.node.Self()]
	if l == nil || !l.Up() || l.Endpoint() != link.UDPEndpoint(b.addr) {
		t.Fatalf("a's link to b did not fall back to IPv4 within %v: %+v", w.now.Sub(start), l)
	}
	if !l.Since.Equal(since) {
		t.Fatalf("the link went down to fall back (up again at %v, first up at %v)", l.Since, since)
	}
	t.Logf("back on IPv4 %v after IPv6 died", w.now.Sub(start))
	// Both ends send there: frames pass again.
	b.fromTAP(ethFrame(a.mac, b.mac, "after"))
	if a.countTAP("after") != 1 {
		t.Fatal("a frame from b was lost after the fallback")
	}
}

// An idle link whose IPv6 path dies moves to IPv4 before it would be
// declared dead, without going down: when IPv6 fails both ways (each end
// falls back), and when it fails one way (the end that hears nothing
// falls back, and the other, still hearing it, follows).
func TestIdleDualStackLinkFallsBackBeforeItIsDead(t *testing.T) {
	for _, c := range []struct {
		name    string
		blocked func(a, b *testNode) map[[2]netip.AddrPort]bool
	}{
		{"both ways", func(a, b *testNode) map[[2]netip.AddrPort]bool {
			return map[[2]netip.AddrPort]bool{{a.addr6, b.addr6}: true, {b.addr6, a.addr6}: true}
		}},
		{"one way", func(a, b *testNode) map[[2]netip.AddrPort]bool {
			return map[[2]netip.AddrPort]bool{{b.addr6, a.addr6}: true}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newTestNet(t, 2, 22)
			a, b := w.nodes[0], w.nodes[1]
			w.giveIPv6(a)
			w.giveIPv6(b)
			pub := w.keys[b.name]
			a.node.Links().AddDial([]link.Endpoint{link.UDPEndpoint(b.addr6), link.UDPEndpoint(b.addr)}, link.DialOptions{Key: &pub}, w.now)
			w.advance(time.Second, 100*time.Millisecond)
			l := a.node.Links().Links()[b.node.Self()]
			if l == nil || !l.Up() || l.Endpoint() != link.UDPEndpoint(b.addr6) {
				t.Fatalf("link a-b over IPv6: %+v", l)
			}
			since := l.Since
			w.blocked = c.blocked(a, b)
			start := w.now
			w.advance(link.DefaultTimers().DeadAfter-100*time.Millisecond, 100*time.Millisecond)
			for _, n := range []*testNode{a, b} {
				other := w.nodes[1-slices.Index(w.nodes, n)]
				l := n.node.Links().Links()[other.node.Self()]
				if l == nil || !l.Up() || l.Endpoint() != link.UDPEndpoint(other.addr) {
					t.Fatalf("%s's link is not on IPv4 %v after IPv6 died: %+v", n.name, w.now.Sub(start), l)
				}
			}
			if l := a.node.Links().Links()[b.node.Self()]; !l.Since.Equal(since) {
				t.Fatal("the link went down to fall back")
			}
		})
	}
}

// IPv6 that dies again right after the link came back to it, within the
// fallback's retry interval: the link falls back again rather than being
// declared dead, as soon as it turns suspect.
func TestDualStackLinkFallsBackAgainSoonAfter(t *testing.T) {
	w, a, b, l := dualStackPairOnIPv6(t, 23)
	since := l.Since
	dead := map[[2]netip.AddrPort]bool{{a.addr6, b.addr6}: true, {b.addr6, a.addr6}: true}
	// onPath passes traffic both ways in 10 ms steps until a's link to b
	// is on ep, for up to limit.
	onPath := func(ep link.Endpoint, limit time.Duration) bool {
		for start := w.now; w.now.Sub(start) < limit; {
			a.fromTAP(ethFrame(b.mac, a.mac, "ping"))
			b.fromTAP(ethFrame(a.mac, b.mac, "pong"))
			w.advance(10*time.Millisecond, 10*time.Millisecond)
			if l := a.node.Links().Links()[b.node.Self()]; l != nil && l.Up() && l.Endpoint() == ep {
				return true
			}
		}
		return false
	}
	w.blocked = dead
	if !onPath(link.UDPEndpoint(b.addr), 5*time.Second) {
		t.Fatal("no fallback to IPv4")
	}
	fellBack := w.now
	w.blocked = nil
	if !onPath(link.UDPEndpoint(b.addr6), 5*time.Second) {
		t.Fatal("not back on IPv6")
	}
	back := w.now
	w.blocked = dead
	if !onPath(link.UDPEndpoint(b.addr), 5*time.Second) {
		t.Fatal("no second fallback to IPv4")
	}
	t.Logf("back on IPv6 %v after the first fallback, on IPv4 again %v later", back.Sub(fellBack), w.now.Sub(back))
	if l := a.node.Links().Links()[b.node.Self()]; l == nil || !l.Since.Equal(since) {
		t.Fatalf("the link went down to fall back: %+v, first up at %v", l, since)
	}
}

// A link whose IPv6 path dies while its peer is too loaded to answer at
// once waits for the fallback handshake rather than going down: the
// answer, 700 ms late, past the 500 ms a silent peer is given, still
// moves the link to IPv4 without a gap. On a loaded machine the link went
// down first and was dialed again (TestIPv6Underlay, e2e).
func TestALinkWaitsForItsFallbackHandshake(t *testing.T) {
	w, a, b, l := dualStackPairOnIPv6(t, 24)
	since := l.Since
	w.blocked = map[[2]netip.AddrPort]bool{{a.addr6, b.addr6}: true, {b.addr6, a.addr6}: true}
	w.stalled = map[*testNode]bool{b: true}
	const stall = 700 * time.Millisecond
	for start := w.now; w.now.Sub(start) < 5*time.Second; {
		a.fromTAP(ethFrame(b.mac, a.mac, "ping"))
		w.advance(10*time.Millisecond, 10*time.Millisecond)
		l := a.node.Links().Links()[b.node.Self()]
		if l == nil || !l.Up() || !l.Since.Equal(since) {
			t.Fatalf("the link went down %v after IPv6 died: %+v", w.now.Sub(start), l)
		}
		if l.Endpoint() == link.UDPEndpoint(b.addr) {
			if w.now.Sub(start) < stall {
				t.Fatalf("on IPv4 %v after IPv6 died, while b's core was stalled", w.now.Sub(start))
			}
			t.Logf("on IPv4 %v after IPv6 died", w.now.Sub(start))
			return
		}
		if w.now.Sub(start) >= stall {
			w.stalled[b] = false
		}
	}
	t.Fatal("the link did not fall back to IPv4")
}

// A link whose peer went quiet on IPv6 while nothing was sent turns
// suspect only when traffic starts again, after the 500 ms a silent peer
// is given. Its fallback handshake is answered at once, before the peer's
// first message on IPv4: that answer is the peer's, so the link moves to
// IPv4 instead of going down at its next tick (TestIPv6Underlay, e2e, on
// an idle link).
func TestAFallbackAnsweredBeforeThePeersFirstMessageKeepsTheLinkUp(t *testing.T) {
	w, a, b, l := dualStackPairOnIPv6(t, 25)
	since := l.Since
	w.blocked = map[[2]netip.AddrPort]bool{{a.addr6, b.addr6}: true, {b.addr6, a.addr6}: true}
	w.transportBlocked = map[[2]netip.AddrPort]bool{{b.addr, a.addr}: true}
	a.fromTAP(ethFrame(b.mac, a.mac, "unanswered"))
	w.advance(700*time.Millisecond, 700*time.Millisecond)
	var onIPv4 time.Time
	for start := w.now; w.now.Sub(start) < 2*time.Second; {
		a.fromTAP(ethFrame(b.mac, a.mac, "ping"))
		w.advance(time.Millisecond, time.Millisecond)
		l := a.node.Links().Links()[b.node.Self()]
		if l == nil || !l.Up() || !l.Since.Equal(since) {
			t.Fatalf("the link went down %v after traffic started again: %+v", w.now.Sub(start), l)
		}
		switch {
		case onIPv4.IsZero() && l.Endpoint() == link.UDPEndpoint(b.addr):
			onIPv4 = w.now
			t.Logf("on IPv4 %v after traffic started again", w.now.Sub(start))
		case !onIPv4.IsZero() && w.now.Sub(onIPv4) >= 5*time.Millisecond:
			w.transportBlocked = nil
		}
		if !onIPv4.IsZero() && w.now.Sub(onIPv4) >= time.Second {
			return
		}
	}
	t.Fatal("the link did not fall back to IPv4")
}
