package node

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pion/stun/v4"

	"burrow/flood"
	"burrow/l2"
	"burrow/link"
	"burrow/nat"
	"burrow/nid"
	"burrow/overlay"
)

func TestTwoNodesBroadcastThenUnicastOnTheFastPath(t *testing.T) {
	w := newTestNet(t, 2, 1)
	a, b := w.nodes[0], w.nodes[1]
	w.connect(0, 1)
	w.advance(time.Second, 100*time.Millisecond)
	if len(a.node.Adjacency()) != 1 || len(b.node.Adjacency()) != 1 {
		t.Fatalf("link not up: %v %v", a.node.Adjacency(), b.node.Adjacency())
	}
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "who-has"))
	if got := b.countTAP("who-has"); got != 1 {
		t.Fatalf("b's TAP saw the broadcast %d times, want 1", got)
	}
	if got := a.countTAP("who-has"); got != 0 {
		t.Fatalf("the sender's own TAP saw its broadcast %d times", got)
	}
	b.fromTAP(ethFrame(a.mac, b.mac, "is-at"))
	if got := a.countTAP("is-at"); got != 1 {
		t.Fatalf("a got the unicast reply %d times, want 1", got)
	}
	// Both directions are now learned: further frames never reach the core.
	a.fromTAP(ethFrame(b.mac, a.mac, "data-1"))
	slowBefore := len(a.node.flows) + len(b.node.flows)
	for i := range 5 {
		a.node.Dataplane().FromTAP(a.worker, l2.VirtioNetHdr{}, ethFrame(b.mac, a.mac, fmt.Sprint("fast-", i)), w.now.UnixNano())
		if len(a.slow) != 0 {
			t.Fatalf("frame %d went to the slow path on a learned flow", i)
		}
		w.drain()
	}
	if got := b.countTAP("fast-4"); got != 1 {
		t.Fatalf("fast-path frame delivered %d times", got)
	}
	if len(a.node.flows)+len(b.node.flows) != slowBefore {
		t.Fatal("fast-path frames changed the flow tables")
	}
}

// ringWithChords links n nodes in NID order to their successor, plus chords.
func ringWithChords(t *testing.T, n int, chords [][2]int) *testNet {
	w := newTestNet(t, n, 7)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	// Sort node indexes by NID so "successor" is the ring successor.
	for i := range order {
		for j := i + 1; j < n; j++ {
			if w.nodes[order[j]].node.Self().Compare(w.nodes[order[i]].node.Self()) < 0 {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	for i := range n {
		w.connect(order[i], order[(i+1)%n])
	}
	for _, c := range chords {
		w.connect(order[c[0]], order[c[1]])
	}
	w.advance(2*time.Second, 100*time.Millisecond)
	return w
}

func TestRingWithChordsDeliversEveryBroadcastExactlyOnce(t *testing.T) {
	w := ringWithChords(t, 8, [][2]int{{0, 4}, {2, 6}})
	for i, src := range w.nodes {
		payload := fmt.Sprint("arp-from-", i)
		src.fromTAP(ethFrame(l2.Broadcast, src.mac, payload))
		for j, dst := range w.nodes {
			want := 1
			if i == j {
				want = 0
			}
			if got := dst.countTAP(payload); got != want {
				t.Errorf("broadcast from %d seen %d times at %d, want %d", i, got, j, want)
			}
		}
	}
	// Every pair can now exchange unicast both ways.
	for i, a := range w.nodes {
		for j, b := range w.nodes {
			if i == j {
				continue
			}
			payload := fmt.Sprint("uni-", i, "-", j)
			a.fromTAP(ethFrame(b.mac, a.mac, payload))
			if got := b.countTAP(payload); got != 1 {
				t.Errorf("unicast %d->%d delivered %d times", i, j, got)
			}
		}
	}
}

func TestDeadLinkFallsBackToFloodAndRecovers(t *testing.T) {
	w := ringWithChords(t, 8, [][2]int{{0, 4}, {2, 6}})
	// Learn everything.
	for _, n := range w.nodes {
		n.fromTAP(ethFrame(l2.Broadcast, n.mac, "hello"))
	}
	victim := w.nodes[3]
	w.down[victim] = true
	w.advance(8*time.Second, 250*time.Millisecond)
	for i, a := range w.nodes {
		if a == victim {
			continue
		}
		for j, b := range w.nodes {
			if a == b || b == victim {
				continue
			}
			payload := fmt.Sprint("after-", i, "-", j)
			a.fromTAP(ethFrame(b.mac, a.mac, payload))
			if got := b.countTAP(payload); got != 1 {
				t.Errorf("after the failure %d->%d delivered %d times", i, j, got)
			}
		}
	}
}

func TestGarbageOnlyMovesDropCounters(t *testing.T) {
	w := newTestNet(t, 2, 3)
	w.connect(0, 1)
	w.advance(time.Second, 100*time.Millisecond)
	a, b := w.nodes[0], w.nodes[1]
	var transport []byte
	a.node.Links().Send(a.node.Links().Links()[b.node.Self()], []byte{0}, w.now)
	transport = bytes.Clone(w.queue[len(w.queue)-1].b)
	w.drain()
	onTAP := len(b.tap) // the node's own multicast queries
	garbage := [][]byte{
		{}, {0xB4}, make([]byte, 40), transport, // replay
		append([]byte{0xB4, 0, 0, 0, 1, 2, 3, 4}, make([]byte, 40)...),
		{0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42},
	}
	for _, g := range garbage {
		b.node.Dataplane().FromNetwork(b.worker, link.UDPEndpoint(a.addr), g, w.now.UnixNano())
	}
	w.drain()
	if len(b.tap) != onTAP {
		t.Fatalf("garbage reached the TAP: %d frames", len(b.tap)-onTAP)
	}
	drops := b.node.Stats().Drops()
	var total uint64
	for _, v := range drops {
		total += v
	}
	if total < uint64(len(garbage)-1) || drops["replay"] != 1 {
		t.Fatalf("drops %v do not account for the garbage", drops)
	}
	if len(b.node.Adjacency()) != 1 {
		t.Fatal("garbage broke the link")
	}
}

// relayedPair is a network of a, b and m in which a and b cannot reach
// each other directly and link through m, which relays up to rate bytes a
// second.
func relayedPair(t *testing.T, rate float64) (w *testNet, a, b, m *testNode) {
	t.Helper()
	w = newTestNet(t, 3, 11)
	a, b, m = w.nodes[0], w.nodes[1], w.nodes[2]
	m.node.dp.relay = newRelayBudget(rate)
	w.blocked = map[[2]netip.AddrPort]bool{{a.addr, b.addr}: true, {b.addr, a.addr}: true}
	w.connect(0, 2)
	w.connect(1, 2)
	w.advance(time.Second, 100*time.Millisecond)
	pub := w.keys[b.name]
	a.node.Links().AddDial([]link.Endpoint{link.UDPEndpoint(b.addr), link.RelayEndpoint(m.node.Self(), b.node.Self())},
		link.DialOptions{Key: &pub}, w.now)
	w.advance(3*time.Second, 100*time.Millisecond)
	if l := a.node.Links().Links()[b.node.Self()]; l == nil || !l.Up() || l.Endpoint().Path() != "relay" {
		t.Fatalf("link a-b over the relay: %+v", l)
	}
	return w, a, b, m
}

func TestRelayedLinkCarriesTrafficAndUpgradesToDirect(t *testing.T) {
	w, a, b, m := relayedPair(t, 10<<20)
	// Frames flow a <-> b through m, whose switch never sees them.
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "hello"))
	b.fromTAP(ethFrame(a.mac, b.mac, "via-relay"))
	if a.countTAP("via-relay") != 1 || m.node.Stats().Relayed.Load() == 0 {
		t.Fatalf("relayed unicast delivered %d times; m relayed %d datagrams", a.countTAP("via-relay"), m.node.Stats().Relayed.Load())
	}
	if got := m.countTAP("via-relay"); got != 0 {
		t.Fatalf("the relay delivered the relayed frame to its own TAP %d times", got)
	}
	// The direct path opens: the link moves there without going down.
	w.blocked = nil
	downs := a.node.Stats().Drops()["no_route"]
	for i := range 30 {
		w.advance(500*time.Millisecond, 500*time.Millisecond)
		b.fromTAP(ethFrame(a.mac, b.mac, fmt.Sprint("keep-", i)))
		if a.countTAP(fmt.Sprint("keep-", i)) != 1 {
			t.Fatalf("frame %d lost while the path upgraded", i)
		}
	}
	if l := a.node.Links().Links()[b.node.Self()]; l.Endpoint().Path() != "direct" {
		t.Fatalf("link still on %v after the direct path opened", l.Endpoint())
	}
	if a.node.Stats().Drops()["no_route"] != downs {
		t.Fatal("frames were dropped during the upgrade")
	}
}

func TestRelayRefusedWithoutBudget(t *testing.T) {
	w := newTestNet(t, 3, 12)
	a, b, m := w.nodes[0], w.nodes[1], w.nodes[2]
	w.blocked = map[[2]netip.AddrPort]bool{{a.addr, b.addr}: true, {b.addr, a.addr}: true}
	w.connect(0, 2)
	w.connect(1, 2)
	w.advance(time.Second, 100*time.Millisecond)
	pub := w.keys[b.name]
	a.node.Links().AddDial([]link.Endpoint{link.RelayEndpoint(m.node.Self(), b.node.Self())}, link.DialOptions{Key: &pub}, w.now)
	w.advance(3*time.Second, 100*time.Millisecond)
	if l := a.node.Links().Links()[b.node.Self()]; l != nil && l.Up() {
		t.Fatal("a node that does not relay carried a link")
	}
	if m.node.Stats().Drops()["relay_limit"] == 0 {
		t.Fatal("refused relaying not counted")
	}
}

// nextHop is the neighbour n sends frames for mac to; nil for none.
func (w *testNet) nextHop(n *testNode, mac l2.MAC) *testNode {
	if n == nil {
		return nil
	}
	e, ok := n.node.learn.Lookup(mac)
	if !ok {
		return nil
	}
	l := n.node.links.LinkByPort(uint32(e.Port))
	for _, m := range w.nodes {
		if l != nil && m.node.Self() == l.Peer.ID {
			return m
		}
	}
	return nil
}

// A node that lost its entry for a unicast frame's destination floods the
// frame on (seed §3.2.4). Its flood must not teach the other nodes that the
// frame's source lives behind it: the source's neighbours would then send
// the answer back toward the flooding node, which sends it to them again.
func TestTransitFloodKeepsTheWayBackToTheSource(t *testing.T) {
	for i := range 8 {
		for j := range 8 {
			if i == j {
				continue
			}
			w := ringWithChords(t, 8, [][2]int{{0, 4}, {2, 6}})
			for _, n := range w.nodes {
				n.fromTAP(ethFrame(l2.Broadcast, n.mac, "hello"))
			}
			a, b := w.nodes[i], w.nodes[j]
			// m is the second node on a's path to b, so that a's frame
			// reaches it through another node.
			m := w.nextHop(w.nextHop(a, b.mac), b.mac)
			if m == nil || m == b {
				continue // b is at most two hops away: no such node
			}
			m.node.learn.Expire(w.now.Add(time.Hour)) // m forgets everyone
			a.fromTAP(ethFrame(b.mac, a.mac, "request"))
			b.fromTAP(ethFrame(a.mac, b.mac, "reply"))
			if got := b.countTAP("request"); got != 1 {
				t.Errorf("%d->%d through %s: request delivered %d times, want 1", i, j, m.name, got)
			}
			if got := a.countTAP("reply"); got != 1 {
				t.Errorf("%d->%d through %s: reply delivered %d times, want 1", i, j, m.name, got)
			}
		}
	}
}

// A frame that arrives from the very peer its destination was learned
// behind proves the entry wrong: it is forgotten and the frame flooded,
// rather than dropped with every frame after it.
func TestWrongEntryPointingBackIsRepaired(t *testing.T) {
	w := ringWithChords(t, 6, nil)
	for _, n := range w.nodes {
		n.fromTAP(ethFrame(l2.Broadcast, n.mac, "hello"))
	}
	a := w.nodes[0]
	for _, b := range w.nodes[1:] {
		m := w.nextHop(a, b.mac)
		if m == b {
			continue
		}
		back := m.node.links.Links()[a.node.Self()]
		m.node.learn.Learn(b.mac, flood.Port(back.Port), a.node.Self(), w.now)
		for i := range 2 {
			payload := fmt.Sprint("to-", b.name, "-", i)
			a.fromTAP(ethFrame(b.mac, a.mac, payload))
			if got := b.countTAP(payload); got != 1 {
				t.Errorf("frame %d to %s through %s delivered %d times, want 1", i, b.name, m.name, got)
			}
		}
	}
}

// TestSTUNServerNeverAnswersWithMoreThanItGot: a STUN request can come
// from a forged address, so a node serving STUN answers only requests at
// least as long as the answer. A standard 28-byte request from an IPv6
// address (whose answer is the longest) gets nothing and is counted;
// burrow's own padded request is answered, with no more bytes than it had.
func TestSTUNServerNeverAnswersWithMoreThanItGot(t *testing.T) {
	w := newTestNet(t, 1, 5)
	server := w.nodes[0]
	w.giveIPv6(server) // to answer over IPv6
	from := link.UDPEndpoint(netip.MustParseAddrPort("[2001:db8::66]:4000"))
	plain, err := stun.Build(stun.BindingRequest, stun.TransactionID, stun.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		request  []byte
		answered bool
	}{
		{"a standard request", plain.Raw, false},
		{"burrow's padded request", nat.BindingRequest(nat.TxID{7}), true},
	} {
		w.queue = nil
		before := server.node.Stats().Drops()["too_short"]
		server.node.Handle(Event{Kind: EventDatagram, From: from, Data: c.request}, w.now)
		server.worker.Tx.Flush()
		switch {
		case !c.answered && (len(w.queue) != 0 || server.node.Stats().Drops()["too_short"] != before+1):
			t.Errorf("%s of %d bytes: %d answers, too_short %d→%d; want none, counted", c.name, len(c.request), len(w.queue), before, server.node.Stats().Drops()["too_short"])
		case c.answered && (len(w.queue) != 1 || len(w.queue[0].b) > len(c.request)):
			t.Errorf("%s of %d bytes: %d answers, want one no longer than the request", c.name, len(c.request), len(w.queue))
		}
	}
}

// TestBroadcastGoesAroundAFailingLink: a's link to one peer stops carrying
// anything while the link is still up; once a's probes on it go
// unanswered (suspect), a broadcast from a gives that peer's share to the
// peer before it, and every node still gets it exactly once.
func TestBroadcastGoesAroundAFailingLink(t *testing.T) {
	w := newTestNet(t, 4, 17)
	for i := range 4 {
		for j := i + 1; j < 4; j++ {
			w.connect(i, j)
		}
	}
	w.advance(time.Second, 100*time.Millisecond)
	a := w.nodes[0]
	ids := []nid.ID{w.nodes[1].node.Self(), w.nodes[2].node.Self(), w.nodes[3].node.Self()}
	flood.SortClockwise(a.node.Self(), ids)
	var x *testNode // the second peer clockwise: its share can go to the first
	for _, n := range w.nodes {
		if n.node.Self() == ids[1] {
			x = n
		}
	}
	x.fromTAP(ethFrame(l2.Broadcast, x.mac, "here"))
	w.blocked = map[[2]netip.AddrPort]bool{{a.addr, x.addr}: true, {x.addr, a.addr}: true}
	l := a.node.Links().Links()[x.node.Self()]
	for range 100 {
		if l.Counters.Suspect(w.now.UnixNano()) {
			break
		}
		a.fromTAP(ethFrame(x.mac, a.mac, "data"))
		w.advance(50*time.Millisecond, 50*time.Millisecond)
	}
	if !l.Up() || !l.Counters.Suspect(w.now.UnixNano()) {
		t.Fatalf("a's link to x: up %v, suspect %v; the test needs it up and suspect", l.Up(), l.Counters.Suspect(w.now.UnixNano()))
	}
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "who-has"))
	for _, n := range w.nodes[1:] {
		if got := n.countTAP("who-has"); got != 1 {
			t.Errorf("%s got the broadcast %d times, want 1", n.name, got)
		}
	}
}

// A link to a peer's TURN relayed address crosses the TURN server even
// though this end sends plain UDP to it: status names it a TURN path.
func TestLinkToAPeersRelayedAddressIsATURNPath(t *testing.T) {
	w := newOverlayNet(t, 2, 13, overlay.Params{Successors: 1})
	a, b := w.nodes[1], w.nodes[0]
	b.node.SetRelayedAddress(b.addr)
	w.advance(5*time.Second, 100*time.Millisecond)
	var paths []string
	for _, ls := range a.node.Status().Links {
		paths = append(paths, ls.Path)
	}
	if !slices.Equal(paths, []string{"turn"}) {
		t.Fatalf("a's link paths %v, want [turn]", paths)
	}
	for _, ls := range b.node.Status().Links {
		if ls.Path != "direct" {
			t.Fatalf("b's link to a, whose address is its own, reads %q", ls.Path)
		}
	}
}

// A burst past a relayed pair's share waits at the relay and reaches the
// other end in order once the share allows, released by the relay's core
// when no more traffic comes: the data path wakes the core when datagrams
// begin to wait.
func TestARelayPacesABurstInsteadOfDroppingIt(t *testing.T) {
	w, a, b, m := relayedPair(t, 1<<20)
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "hello"))
	payload := strings.Repeat("x", 1000)
	for i := range 400 { // 400 KB at once, past the 256 KiB burst
		b.fromTAP(ethFrame(a.mac, b.mac, fmt.Sprintf("%s-%03d", payload, i)))
	}
	arrived := func() (seqs []int) {
		for _, f := range a.tap {
			var seq int
			if _, err := fmt.Sscanf(string(f[len(f)-3:]), "%03d", &seq); err == nil && strings.Contains(string(f), payload) {
				seqs = append(seqs, seq)
			}
		}
		return seqs
	}
	atOnce := len(arrived())
	queued := m.node.Stats().RelayQueued.Load()
	if queued == 0 {
		t.Fatalf("nothing waited at the relay; %d of 400 frames arrived at once", atOnce)
	}
	// The daemon sets the core's timer after each event the core handles:
	// with no more traffic, only an event can bring its release tick near.
	if m.handed[EventRelayWaiting] != 1 {
		t.Fatalf("the relay's core heard %d times that datagrams began to wait, want once", m.handed[EventRelayWaiting])
	}
	if next := m.node.NextDeadline(w.now); next.Sub(w.now) > relayReleaseEvery {
		t.Fatalf("with datagrams waiting the relay's core next ticks %v away", next.Sub(w.now))
	}
	w.advance(200*time.Millisecond, time.Millisecond)
	got := arrived()
	if uint64(len(got)) != uint64(atOnce)+queued || !slices.IsSorted(got) {
		t.Fatalf("%d frames arrived at once and %d waited; after 200 ms %d arrived, in order %v", atOnce, queued, len(got), slices.IsSorted(got))
	}
	t.Logf("%d frames at once, %d paced by the relay, %d dropped", atOnce, queued, 400-len(got))
}

// The data path's copy of the learning table follows it through growth
// past many shard counts, single learns, moves, forgets and a shrink to a
// handful: after every publish each MAC is where the table says, or
// absent where the table has none.
func TestTheDataPathSeesTheLearningTable(t *testing.T) {
	w := newTestNet(t, 1, 9)
	n := w.nodes[0].node
	macOf := func(i int) l2.MAC { return l2.MAC{2, 0x5e, byte(i >> 16), byte(i >> 8), byte(i), 7} }
	const most = 3000
	check := func(step string) {
		t.Helper()
		n.dirty |= dirtyMACs
		n.publish()
		s := n.snap.Load()
		for i := range most {
			e, inTable := n.learn.Lookup(macOf(i))
			v, inSnap := s.macs.lookup(macOf(i))
			if inTable != inSnap || (inTable && v != viewOf(e)) {
				t.Fatalf("%s: MAC %d: table %v %+v, data path %v %+v", step, i, inTable, e, inSnap, v)
			}
		}
		if want := macShardBits(n.learn.Len()); s.macs.bits < want || s.macs.bits > want+1 {
			t.Fatalf("%s: %d entries in 2^%d shards, want 2^%d", step, n.learn.Len(), s.macs.bits, want)
		}
	}
	root := nid.ID{9}
	for i := range most {
		n.learn.Learn(macOf(i), flood.Port(1+i%3), root, w.now)
		if i < 40 || i%97 == 0 {
			check(fmt.Sprint("learning ", i))
		}
	}
	check("all learned")
	for i := 0; i < most; i += 5 {
		n.learn.Learn(macOf(i), 9, nid.ID{10}, w.now.Add(time.Second))
	}
	check("a fifth moved")
	for i := 10; i < most; i++ {
		n.learn.Forget(macOf(i))
		if i%251 == 0 {
			check(fmt.Sprint("forgetting ", i))
		}
	}
	check("ten left")
}
