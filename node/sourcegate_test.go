package node

import (
	"net/netip"
	"testing"
	"time"

	"burrow/link"
	"burrow/nat"
)

func TestSourceGateAllowsABurstThenItsRate(t *testing.T) {
	g := newSourceGate([16]byte{1, 2, 3})
	spray := link.UDPEndpoint(netip.MustParseAddrPort("192.0.2.7:4000"))
	other := link.UDPEndpoint(netip.MustParseAddrPort("192.0.2.8:4000"))
	for g.slotOf(other) == g.slotOf(spray) {
		other.Addr = netip.AddrPortFrom(other.Addr.Addr().Next(), 4000)
	}
	// Streams have no address: each is a source of its own.
	stream := link.Endpoint{Via: link.Stream, Stream: 1}
	otherStream := link.Endpoint{Via: link.Stream, Stream: 2}
	for g.slotOf(otherStream) == g.slotOf(stream) || g.slotOf(otherStream) == g.slotOf(spray) {
		if otherStream.Stream++; otherStream.Stream > 100 {
			t.Fatal("streams 1 to 100 share one slot")
		}
	}
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).UnixNano()
	passed := func(from link.Endpoint, tries int) (n int) {
		for range tries {
			if g.allow(from, now) {
				n++
			}
		}
		return n
	}
	if n := passed(spray, 10*gateBurst); n != gateBurst {
		t.Fatalf("%d of a burst passed at once, want %d", n, gateBurst)
	}
	if !g.allow(other, now) {
		t.Fatal("another address was refused with the sprayer")
	}
	if n := passed(stream, 10*gateBurst); n != gateBurst {
		t.Fatalf("%d of a stream's burst passed at once, want %d", n, gateBurst)
	}
	if !g.allow(otherStream, now) {
		t.Fatal("another stream was refused with the spraying one")
	}
	now += int64(time.Second)
	if n, want := passed(spray, 10*gateBurst), int(int64(time.Second)/gateInterval); n != want {
		t.Fatalf("%d passed a second later, want %d", n, want)
	}
	now += 10 * int64(time.Second)
	if n := passed(spray, 10*gateBurst); n != gateBurst {
		t.Fatalf("after a quiet while %d passed, want the whole burst of %d", n, gateBurst)
	}
}

// TestASprayFromOneAddressStopsInTheDataPath: STUN requests sprayed at a
// node from one address reach its core only up to the gate's burst, the
// rest are counted and dropped before any copy, and another address's
// request and the node's link still get through.
func TestASprayFromOneAddressStopsInTheDataPath(t *testing.T) {
	w := newTestNet(t, 2, 5)
	w.connect(0, 1)
	w.advance(time.Second, 100*time.Millisecond)
	a, b := w.nodes[0], w.nodes[1]
	sprayer := netip.MustParseAddrPort("198.51.100.9:4000")
	for b.node.dp.gate.slotOf(link.UDPEndpoint(sprayer)) == b.node.dp.gate.slotOf(link.UDPEndpoint(a.addr)) {
		sprayer = netip.AddrPortFrom(sprayer.Addr().Next(), sprayer.Port())
	}
	handed := b.handed[EventDatagram]
	limited := b.node.Stats().Drops()["rate_limited"]
	const spray = 5000
	for i := range spray {
		req := nat.BindingRequest(nat.TxID{byte(i), byte(i >> 8)})
		b.node.Dataplane().FromNetwork(b.worker, link.UDPEndpoint(sprayer), req, w.now.UnixNano())
	}
	if got := b.handed[EventDatagram] - handed; got != gateBurst {
		t.Fatalf("%d of %d sprayed datagrams reached the core, want the gate's burst of %d", got, spray, gateBurst)
	}
	if got := b.node.Stats().Drops()["rate_limited"] - limited; got != spray-gateBurst {
		t.Fatalf("rate_limited grew by %d, want the %d the gate refused", got, spray-gateBurst)
	}
	handed = b.handed[EventDatagram]
	b.node.Dataplane().FromNetwork(b.worker, link.UDPEndpoint(a.addr), nat.BindingRequest(nat.TxID{9}), w.now.UnixNano())
	if b.handed[EventDatagram] != handed+1 {
		t.Fatal("another address's STUN request did not reach the core")
	}
	w.drain()
	w.advance(2*time.Second, 100*time.Millisecond)
	if len(b.node.Adjacency()) != 1 {
		t.Fatal("the spray broke the link")
	}
}
