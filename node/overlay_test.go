package node

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"burrow/l2"
	"burrow/link"
	"burrow/nid"
	"burrow/overlay"
)

// newOverlayNet makes n self-organizing nodes that all know only node 0.
func newOverlayNet(t testing.TB, n int, seed uint64, params overlay.Params) *testNet {
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	var first netip.AddrPort
	for i := range n {
		cfg := OverlayConfig{Params: params}
		if i > 0 {
			cfg.Bootstrap = []netip.AddrPort{first}
		}
		node := w.add(fmt.Sprintf("n%d", i), seed*1000+uint64(i), cfg)
		if i == 0 {
			first = node.addr
		}
	}
	return w
}

// live returns the nodes that are not down, sorted by ID.
func (w *testNet) live() []*testNode {
	var out []*testNode
	for _, n := range w.nodes {
		if !w.down[n] {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.Self().Compare(out[j].node.Self()) < 0 })
	return out
}

// ringErrors lists nodes whose first successor is not the true next node.
func (w *testNet) ringErrors() []string {
	live := w.live()
	var errs []string
	for i, n := range live {
		want := live[(i+1)%len(live)].node.Self()
		succ := n.node.ov.ring.Successors(1)
		if len(succ) == 0 || succ[0].ID != want {
			got := "none"
			if len(succ) > 0 {
				got = succ[0].ID.Short()
			}
			errs = append(errs, fmt.Sprintf("%s: successor %s, want %s", n.name, got, want.Short()))
		} else if !slices.Contains(n.node.adjacency, want) {
			errs = append(errs, fmt.Sprintf("%s: no link to successor %s", n.name, want.Short()))
		}
		for _, dead := range w.nodes {
			if w.down[dead] && slices.Contains(n.node.adjacency, dead.node.Self()) {
				errs = append(errs, fmt.Sprintf("%s: still linked to dead %s", n.name, dead.name))
			}
		}
	}
	return errs
}

// newSettledOverlayNet is newOverlayNet once its ring is consistent and
// it has had 10 s more for its long-distance links.
func newSettledOverlayNet(t testing.TB, n int, seed uint64, params overlay.Params) *testNet {
	t.Helper()
	w := newOverlayNet(t, n, seed, params)
	w.settle(t, 60*time.Second)
	w.advance(10*time.Second, 250*time.Millisecond)
	return w
}

func (w *testNet) settle(t testing.TB, limit time.Duration) time.Duration {
	t.Helper()
	start := w.now
	for w.now.Sub(start) < limit {
		w.advance(time.Second, 250*time.Millisecond)
		if len(w.ringErrors()) == 0 {
			return w.now.Sub(start)
		}
	}
	t.Fatalf("ring not consistent after %v: %v", limit, w.ringErrors())
	return 0
}

// quiet runs the network until no link came up or went down for d.
func (w *testNet) quiet(t testing.TB, d, limit time.Duration) {
	t.Helper()
	links := func() string {
		var all []string
		for _, n := range w.live() {
			all = append(all, fmt.Sprint(n.node.Adjacency()))
		}
		return strings.Join(all, ";")
	}
	start, last, since := w.now, links(), w.now
	for w.now.Sub(since) < d {
		if w.now.Sub(start) > limit {
			t.Fatalf("links still changing after %v", limit)
		}
		w.advance(500*time.Millisecond, 250*time.Millisecond)
		if now := links(); now != last {
			last, since = now, w.now
		}
	}
}

// broadcastReachesAllOnce floods one frame from every live node and checks
// exactly-once delivery to every other live node.
func (w *testNet) broadcastReachesAllOnce(t testing.TB, tag string) {
	t.Helper()
	live := w.live()
	for i, src := range live {
		payload := fmt.Sprintf("%s-%d", tag, i)
		src.fromTAP(ethFrame(l2.Broadcast, src.mac, payload))
		for _, dst := range live {
			want := 1
			if dst == src {
				want = 0
			}
			if got := dst.countTAP(payload); got != want {
				t.Fatalf("broadcast %s from %s seen %d times at %s, want %d", payload, src.name, got, dst.name, want)
			}
		}
	}
}

func TestOverlayFormsFromOneBootstrap(t *testing.T) {
	w := newOverlayNet(t, 24, 1, overlay.Params{Successors: 2, LongDistance: 3})
	took := w.settle(t, 60*time.Second)
	t.Logf("ring of %d consistent after %v", len(w.nodes), took)
	w.advance(20*time.Second, 500*time.Millisecond) // long-distance links
	for _, n := range w.live() {
		links := len(n.node.Adjacency())
		if links < 2 {
			t.Errorf("%s has %d links", n.name, links)
		}
	}
	w.broadcastReachesAllOnce(t, "bf")
}

func TestOverlayRepairsAfterSilentFailures(t *testing.T) {
	w := newOverlayNet(t, 16, 2, overlay.Params{Successors: 2, LongDistance: 2})
	w.settle(t, 60*time.Second)
	live := w.live()
	// Kill two nodes that are not adjacent on the ring: s=2 survives that.
	w.down[live[3]] = true
	w.down[live[9]] = true
	took := w.settle(t, 60*time.Second)
	t.Logf("repaired after %v", took)
	w.broadcastReachesAllOnce(t, "after")
}

func TestOverlayGracefulLeave(t *testing.T) {
	w := newOverlayNet(t, 12, 3, overlay.Params{Successors: 2, LongDistance: 2})
	w.settle(t, 60*time.Second)
	leaver := w.live()[5]
	leaver.node.Leave(w.now)
	w.drain()
	w.down[leaver] = true
	w.advance(500*time.Millisecond, 250*time.Millisecond)
	if errs := w.ringErrors(); len(errs) != 0 {
		t.Fatalf("ring not repaired right after a graceful leave: %v", errs)
	}
}

func TestIDsAreDistinct(t *testing.T) {
	w := newOverlayNet(t, 4, 4, overlay.Params{Successors: 2})
	seen := map[nid.ID]bool{}
	for _, n := range w.nodes {
		if seen[n.node.Self()] {
			t.Fatal("duplicate ID")
		}
		seen[n.node.Self()] = true
	}
}

func TestOnDemandLinkOpensForHeavyTrafficAndCloses(t *testing.T) {
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	var first netip.AddrPort
	for i := range 16 {
		cfg := OverlayConfig{Params: overlay.Params{Successors: 1, LongDistance: 0},
			OnDemand: OnDemandConfig{Enabled: true, Threshold: 50_000, Window: 2 * time.Second, Idle: 5 * time.Second}}
		if i > 0 {
			cfg.Bootstrap = []netip.AddrPort{first}
		}
		node := w.add(fmt.Sprintf("n%d", i), 900+uint64(i), cfg)
		if i == 0 {
			first = node.addr
		}
	}
	w.settle(t, 60*time.Second)
	ring := w.live()
	a, b := ring[0], ring[8] // half the ring apart: many hops with s=1, k=0
	if a.node.upLink(b.node.Self()) != nil {
		t.Fatal("a and b are adjacent before any traffic")
	}
	a.fromTAP(ethFrame(l2.Broadcast, a.mac, "arp"))
	b.fromTAP(ethFrame(a.mac, b.mac, "reply"))
	payload := string(make([]byte, 1000))
	// 100 frames of 1 kB per 100 ms: 1 MB/s, far above the threshold; b
	// acknowledges now and then, as TCP would.
	for range 50 {
		for range 100 {
			a.node.Dataplane().FromTAP(a.worker, l2.VirtioNetHdr{}, ethFrame(b.mac, a.mac, payload), w.now.UnixNano())
		}
		b.node.Dataplane().FromTAP(b.worker, l2.VirtioNetHdr{}, ethFrame(a.mac, b.mac, "ack"), w.now.UnixNano())
		w.drain()
		w.advance(100*time.Millisecond, 100*time.Millisecond)
	}
	if a.node.upLink(b.node.Self()) == nil {
		t.Fatalf("no on-demand link after 5 s of heavy traffic: a %+v b %+v", a.node.Overlay().OnDemand, b.node.Overlay().OnDemand)
	}
	// The flow moved: a frame now takes the direct link.
	before := b.countTAP("direct")
	a.fromTAP(ethFrame(b.mac, a.mac, "direct"))
	if b.countTAP("direct") != before+1 {
		t.Fatal("frame not delivered after moving to the on-demand link")
	}
	if e, _ := a.node.learn.Lookup(b.mac); a.node.links.LinkByPort(uint32(e.Port)) == nil || a.node.links.LinkByPort(uint32(e.Port)).Peer.ID != b.node.Self() {
		t.Fatal("b's MAC is not learned on the direct link")
	}
	// Quiet: the link goes after the idle time (plus the close grace).
	w.advance(15*time.Second, 250*time.Millisecond)
	if a.node.upLink(b.node.Self()) != nil {
		t.Fatalf("on-demand link still up after 15 s without traffic: %+v", a.node.Overlay())
	}
	if st := a.node.Overlay().OnDemand; st.Opened != 1 || st.Closed != 1 {
		t.Fatalf("on-demand counters %+v, want one opened and closed", st)
	}
}

func TestNodesKeepALinkToABeaconAndLearnTheirMapping(t *testing.T) {
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	beacon := w.add("beacon", 500, OverlayConfig{Params: overlay.Params{Successors: 2}})
	var nodes []*testNode
	for i := range 5 {
		n := w.addWith(fmt.Sprintf("n%d", i), 501+uint64(i), OverlayConfig{Params: overlay.Params{Successors: 2}},
			ReachConfig{Beacons: []Beacon{{Addr: beacon.addr}}})
		nodes = append(nodes, n)
	}
	w.settle(t, 30*time.Second)
	for _, n := range nodes {
		st := n.node.Status()
		if st.Reach.Beacon != beacon.node.Self().String() {
			t.Errorf("%s keeps no beacon link: %+v", n.name, st.Reach)
		}
		if st.Reach.NAT != "public" || st.Reach.STUNGot == 0 {
			t.Errorf("%s: STUN through the beacon: %+v", n.name, st.Reach)
		}
	}
	// The beacon link survives the overlay's reconciliation.
	w.advance(20*time.Second, time.Second)
	for _, n := range nodes {
		if n.node.upLink(beacon.node.Self()) == nil {
			t.Errorf("%s dropped its beacon link", n.name)
		}
	}
}

func TestTopologyCrawlMapsTheWholeOverlay(t *testing.T) {
	w := newOverlayNet(t, 12, 8, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	w.quiet(t, 10*time.Second, 2*time.Minute)
	watcher := w.nodes[3].node
	watcher.CrawlTopology(w.now)
	w.advance(8*time.Second, 500*time.Millisecond)
	v := watcher.Topology()
	seen := 0
	for _, nd := range v.Nodes {
		if nd.Seen {
			seen++
		}
	}
	if seen != len(w.nodes) {
		t.Fatalf("crawl saw %d of %d nodes", seen, len(w.nodes))
	}
	links := 0
	for _, n := range w.nodes {
		links += len(n.node.Adjacency())
	}
	if len(v.Links) != links {
		t.Fatalf("crawl reports %d link ends, the nodes have %d", len(v.Links), links)
	}
}

// A beacon that remembers a node links to it first after a restart; the
// node must take that link as its beacon link rather than dial on in vain.
func TestABeaconThatLinksFirstIsTheNodesBeacon(t *testing.T) {
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	beacon := w.add("beacon", 600, OverlayConfig{Params: overlay.Params{Successors: 2}})
	n := w.addWith("n", 601, OverlayConfig{Params: overlay.Params{Successors: 2}}, ReachConfig{Beacons: []Beacon{{Addr: beacon.addr}}})
	w.connect(0, 1)
	w.advance(10*time.Second, 250*time.Millisecond)
	if st := n.node.Status(); st.Reach.Beacon != beacon.node.Self().String() {
		t.Fatalf("the node does not take the beacon's link as its beacon link: %+v", st.Reach)
	}
}

// Both ends retire a link, one a little later; the earlier one then finds
// it needs the link after all and dials again while the later one is still
// draining. The later one must keep the fresh link, not tear it down under
// a peer that believes it up (which then times it out and buries a live
// successor for deadMemory).
func TestALinkRedialedWhileDrainingSurvives(t *testing.T) {
	w := newOverlayNet(t, 3, 31, overlay.Params{Successors: 1})
	w.settle(t, 30*time.Second)
	live := w.live()
	a, b := live[0], live[1] // b is a's successor: a redials it at once
	la, lb := a.node.upLink(b.node.Self()), b.node.upLink(a.node.Self())
	a.node.retire(la, a.node.peer(b.node.Self()), w.now)
	b.node.retire(lb, b.node.peer(a.node.Self()), w.now.Add(300*time.Millisecond))
	w.advance(10*time.Second, 50*time.Millisecond)
	if errs := w.ringErrors(); len(errs) > 0 {
		t.Fatalf("ring broken after the redial: %v", errs)
	}
	if a.node.upLink(b.node.Self()) == nil || b.node.upLink(a.node.Self()) == nil {
		t.Fatalf("one-sided link: a→b %v, b→a %v", a.node.upLink(b.node.Self()) != nil, b.node.upLink(a.node.Self()) != nil)
	}
}

// The first LinkUse on a new link can be lost: the peer's data path may
// see it before its control plane installed the session. A node that has
// not heard the peer's LinkUse asks again until it does; a stale "not
// joined" would otherwise keep messages from being routed through the peer
// for good.
func TestALostLinkUseIsAskedForAgain(t *testing.T) {
	w := newOverlayNet(t, 3, 32, overlay.Params{Successors: 1})
	w.settle(t, 30*time.Second)
	live := w.live()
	a, b := live[0], live[1]
	ps := a.node.peer(b.node.Self())
	if !ps.remoteJoined || !ps.heard {
		t.Fatal("a has not heard its successor's LinkUse after settling")
	}
	ps.remoteJoined, ps.heard = false, false
	w.advance(2*time.Second, 100*time.Millisecond)
	if ps := a.node.peer(b.node.Self()); !ps.remoteJoined || !ps.heard {
		t.Fatal("a did not ask its successor again for the LinkUse it missed")
	}
}

// A peer with its overlay off never answers a LinkUse; the asking stops.
func TestAskingForALinkUseStopsWhenThePeerNeverAnswers(t *testing.T) {
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	a := w.add("a", 700, OverlayConfig{Params: overlay.Params{Successors: 1}})
	w.add("b", 701, OverlayConfig{Disabled: true})
	w.connect(0, 1)
	w.advance(30*time.Second, 250*time.Millisecond)
	if sent := a.node.ov.sent[overlay.LinkUse]; sent == 0 || sent > maxAsks {
		t.Fatalf("a sent %d LinkUse to a peer that never answers, want 1..%d", sent, maxAsks)
	}
}

// A node whose core is held up (a newcomer on a loaded machine) can take
// seconds to say why it wants a link. Its peer must not close the link
// for want of that word — it may be the only link the newcomer has — but
// closes it once the word comes and says the link is not needed.
func TestALinkIsNotClosedBeforeThePeerSaysWhyItWantsIt(t *testing.T) {
	w := newOverlayNet(t, 6, 33, overlay.Params{Successors: 1})
	w.settle(t, 30*time.Second)
	live := w.live()
	c := live[0]
	x := live[3] // not a ring neighbour of c: neither end wants their link
	pub := w.keys[c.name]
	dial := x.node.Links().AddDial([]link.Endpoint{link.UDPEndpoint(c.addr)}, link.DialOptions{Key: &pub}, w.now)
	w.advance(time.Second, 50*time.Millisecond)
	if c.node.upLink(x.node.Self()) == nil {
		t.Fatal("the link did not come up")
	}
	x.node.Links().RemoveDial(dial) // nothing redials it once closed
	// x's first LinkUse is lost, and its core stalls before it repeats it.
	ps := c.node.peer(x.node.Self())
	ps.heard, ps.remote = false, 0
	w.stalled = map[*testNode]bool{x: true}
	w.advance(5*time.Second, 50*time.Millisecond)
	if c.node.upLink(x.node.Self()) == nil {
		t.Fatalf("%s closed its link to %s before hearing why %s wants it", c.name, x.name, x.name)
	}
	w.stalled = nil
	w.advance(20*time.Second, 50*time.Millisecond)
	if c.node.upLink(x.node.Self()) != nil {
		pc, px := c.node.peer(x.node.Self()), x.node.peer(c.node.Self())
		t.Errorf("%s kept a link %s said it does not need: %s local %v remote %v heard %v; %s local %v remote %v heard %v",
			c.name, x.name, c.name, pc.local, pc.remote, pc.heard, x.name, px.local, px.remote, px.heard)
	}
}

// The word that a link closes can be lost (under a bulk flow the peer's
// socket drops datagrams); the peer must still stop using the link before
// this end tears it down, not send into it until its probes go unanswered.
func TestALostClosingIsSaidAgain(t *testing.T) {
	w := newOverlayNet(t, 6, 34, overlay.Params{Successors: 1})
	w.settle(t, 30*time.Second)
	live := w.live()
	c, x := live[0], live[3] // not ring neighbours: neither wants their link
	pub := w.keys[c.name]
	dial := x.node.Links().AddDial([]link.Endpoint{link.UDPEndpoint(c.addr)}, link.DialOptions{Key: &pub}, w.now)
	w.advance(time.Second, 50*time.Millisecond)
	lx := x.node.upLink(c.node.Self())
	if lx == nil || c.node.upLink(x.node.Self()) == nil {
		t.Fatal("the link did not come up")
	}
	x.node.Links().RemoveDial(dial)
	xToC := [2]netip.AddrPort{x.addr, c.addr}
	w.transportBlocked = map[[2]netip.AddrPort]bool{xToC: true}
	x.node.closeLink(lx, x.node.peer(c.node.Self()), w.now)
	w.drain()
	if c.node.peer(x.node.Self()).closing {
		t.Fatal("the Closing was not lost")
	}
	w.transportBlocked = nil
	w.advance(closingRetry+50*time.Millisecond, 10*time.Millisecond)
	if !c.node.peer(x.node.Self()).closing {
		t.Fatalf("%s still uses the link %s said it closes, %v later", c.name, x.name, closingRetry+50*time.Millisecond)
	}
	w.advance(drainTime, 10*time.Millisecond)
	if c.node.upLink(x.node.Self()) != nil || x.node.upLink(c.node.Self()) != nil {
		t.Fatalf("the link is still up a drain after it closed: at %s %v, at %s %v",
			c.name, c.node.upLink(x.node.Self()) != nil, x.name, x.node.upLink(c.node.Self()) != nil)
	}
}

// A node with no room for another long-distance link passes the request on
// to its successor, which answers the asker; a request passed once is
// refused rather than passed again.
func TestFullNodePassesLongDistanceRequestOn(t *testing.T) {
	w := newOverlayNet(t, 12, 5, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	w.quiet(t, 5*time.Second, 2*time.Minute)
	live := w.live()
	asker := live[0]
	var full, next *testNode
	for i := 2; i < len(live)-2; i++ {
		if full == nil || live[i].node.inboundLongDistance() > full.node.inboundLongDistance() {
			full, next = live[i], live[i+1]
		}
	}
	inbound := full.node.inboundLongDistance()
	if inbound == 0 {
		t.Fatal("no node in the middle of the ring has an inbound long-distance link")
	}
	full.node.ov.cfg.Params.MaxInbound = inbound
	next.node.ov.cfg.Params.MaxInbound = next.node.inboundLongDistance() + 1
	request := func(id uint64, passed bool) {
		asker.node.originate(&overlay.Message{Type: overlay.LinkRequest, Dest: full.node.Self(), Exact: true, Origin: asker.node.Self(),
			Via: asker.node.via(), ID: id, Reasons: overlay.ReasonLongDistance, Passed: passed, From: asker.node.selfInfo()}, w.now)
		w.drain()
	}
	passedBefore := full.node.ov.forwarded[overlay.LinkRequest]
	request(101, false)
	if got := full.node.ov.forwarded[overlay.LinkRequest] - passedBefore; got != 1 {
		t.Fatalf("the full node passed the request on %d times, want once", got)
	}
	ps := next.node.ov.peers[asker.node.Self()]
	if ps == nil || ps.remote&overlay.ReasonLongDistance == 0 {
		t.Fatalf("the full node's successor did not take the long-distance link: %+v", ps)
	}
	passedBefore = full.node.ov.forwarded[overlay.LinkRequest]
	refusedBefore := full.node.ov.sent[overlay.LinkReply]
	request(102, true)
	if got := full.node.ov.forwarded[overlay.LinkRequest] - passedBefore; got != 0 {
		t.Fatalf("a request passed once was passed again (%d times)", got)
	}
	if full.node.ov.sent[overlay.LinkReply] == refusedBefore {
		t.Fatal("the full node did not answer a passed request")
	}
}

// A long-distance link aimed for a network less than half the size the
// node now estimates is carried over to the estimate at once; one aimed
// for a network more than twice as large only after reaimAfter, since a
// failure can shrink the estimate for a moment, unless the view gained
// successors since, so that the aim rested on a guess from a few close
// ones. Carried over, a link is kept where a draw at the estimate could
// have made it (Resize) and aimed anew where not: a target closer than
// one node in the network now is.
func TestLongDistanceLinksFollowTheSizeEstimate(t *testing.T) {
	w := newOverlayNet(t, 12, 5, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	w.quiet(t, 5*time.Second, 2*time.Minute)
	type aimed struct {
		n    *testNode
		s    *ldSlot
		peer nid.ID
	}
	var slots []aimed
	for _, n := range w.live() {
		for _, s := range n.node.ov.ld {
			if s.peer != (nid.ID{}) && len(slots) < 4 {
				slots = append(slots, aimed{n, s, s.peer})
				break
			}
		}
	}
	if len(slots) < 4 {
		t.Fatal("fewer than four nodes have a long-distance link")
	}
	grown, tooShort, longEnough, firstGuess := slots[0], slots[1], slots[2], slots[3]
	size := func(a aimed) float64 { return a.n.node.ov.ring.EstimateSize() }
	known := func(a aimed) int { return a.n.node.ov.ring.KnownSuccessors() }
	grown.s.size = size(grown) / 3
	target := grown.s.draw.Fraction(grown.s.size)
	tooShort.s.size, tooShort.s.aimedOn, tooShort.s.draw.U = 3*size(tooShort), known(tooShort), 0
	longEnough.s.size, longEnough.s.aimedOn, longEnough.s.draw.U = 3*size(longEnough), known(longEnough), 0.99
	firstGuess.s.size, firstGuess.s.aimedOn = 3*size(firstGuess), known(firstGuess)-1
	for _, a := range slots {
		a.n.node.tickLongDistance(w.now)
	}
	for _, a := range []aimed{grown, firstGuess} {
		if a.s.size != size(a) {
			t.Errorf("a link aimed for %v, the estimate %v, was not carried over at once", a.s.size, size(a))
		}
	}
	if grown.s.peer == grown.peer && math.Abs(grown.s.draw.Fraction(grown.s.size)-target) > 1e-9*target {
		t.Errorf("a link kept when carried over moved its target from %v to %v", target, grown.s.draw.Fraction(grown.s.size))
	}
	for _, a := range []aimed{tooShort, longEnough} {
		if a.s.peer != a.peer || a.s.size != 3*size(a) {
			t.Error("a link aimed for three times the estimate from as many successors was carried over at once")
		}
		a.n.node.tickLongDistance(w.now.Add(reaimAfter))
		if a.s.size != size(a) {
			t.Errorf("a link aimed for three times the estimate was not carried over after %v", reaimAfter)
		}
	}
	if tooShort.s.peer == tooShort.peer {
		t.Error("a link closer than one node at the estimate now was kept")
	}
	if longEnough.s.peer != longEnough.peer {
		t.Error("a link a draw at the estimate now could have made was aimed anew")
	}
}

// A long-distance target up to the node's last successor would be answered
// by a successor, which is no shortcut: the node redraws it without
// asking across the ring.
func TestTargetsTheSuccessorsHoldAreNotAskedFor(t *testing.T) {
	w := newOverlayNet(t, 12, 5, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	n := w.live()[0].node
	succ := n.ov.ring.Successors(2)
	if len(succ) != 2 {
		t.Fatalf("%d successors, want 2", len(succ))
	}
	one := nid.FromFraction(1e-9)
	for _, c := range []struct {
		target nid.ID
		want   bool
	}{
		{succ[0].ID, true},
		{succ[1].ID, true},
		{n.Self().Add(one), true},
		{succ[1].ID.Add(one), false},
		{n.Self(), false},
	} {
		if got := n.successorsHold(c.target); got != c.want {
			t.Errorf("successorsHold(%v) = %v, want %v", c.target.Short(), got, c.want)
		}
	}
}

// A node killed and started again within deadMemory is held dead by the
// nodes that buried it, which ignore it in the lists of others: on a ring
// of two successors, the node two places before it skipped it and linked
// past it (in a daemon run, across the ring to a flow's far end). When the
// successor it stabilizes with lists the node as linked again, it dials
// the node, and the link coming up proves it alive.
func TestARestartedNodeIsTakenBackBeforeItsBurialLapses(t *testing.T) {
	w, live, at := newRestartNet(t)
	buryAndRestart(t, w, live[(at+3)%len(live)], live[(at+5)%len(live)])
	expectTakenBack(t, w, live[(at+3)%len(live)], live[(at+5)%len(live)], 2)
}

// The same for a node's first successor, which after its restart is the
// predecessor the node's new successor names, not one of that one's
// successors: the link it makes as it joins proves it alive.
func TestARestartedSuccessorIsTakenBackBeforeItsBurialLapses(t *testing.T) {
	w, live, at := newRestartNet(t)
	buryAndRestart(t, w, live[(at+4)%len(live)], live[(at+5)%len(live)])
	expectTakenBack(t, w, live[(at+4)%len(live)], live[(at+5)%len(live)], 1)
}

// newRestartNet is a ring of 10 nodes in order, with the index in it of
// the node everyone bootstrapped from, which has no one to rejoin through.
func newRestartNet(t *testing.T) (*testNet, []*testNode, int) {
	w := newOverlayNet(t, 10, 52, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	live := w.live()
	return w, live, slices.IndexFunc(live, func(n *testNode) bool { return n == w.nodes[0] })
}

// buryAndRestart kills victim, waits until before buried it, and starts it
// again.
func buryAndRestart(t *testing.T, w *testNet, before, victim *testNode) {
	t.Helper()
	w.down[victim] = true
	w.advance(10*time.Second, 250*time.Millisecond)
	if _, dead := before.node.ov.dead[victim.node.Self()]; !dead {
		t.Fatalf("%s did not bury %s", before.name, victim.name)
	}
	w.restart(victim)
}

// expectTakenBack fails unless before holds victim as its successor at
// place (1 for the first) within half of deadMemory.
func expectTakenBack(t *testing.T, w *testNet, before, victim *testNode, place int) {
	t.Helper()
	since := w.now
	for w.now.Sub(since) < deadMemory/2 {
		w.advance(250*time.Millisecond, 250*time.Millisecond)
		if succ := before.node.ov.ring.Successors(place); len(succ) == place && succ[place-1].ID == victim.node.Self() {
			t.Logf("%s took %s back after %v", before.name, victim.name, w.now.Sub(since))
			return
		}
	}
	t.Fatalf("%v later, %s's successors are %v, want %s at place %d", deadMemory/2, before.name, before.node.ov.ring.Successors(place), victim.name, place)
}

// A node whose successor names as its predecessor a node it buried, one
// between the two, dials that node to see. In a soak of 256 daemons, a
// node killed and started again 5 s later took for its predecessor a node
// before the true one, linked to it, and so never told the true one of
// itself; that one held it dead and passed it by until the burial lapsed,
// 33 s in which the ring was not whole. Here the victim forgets its
// predecessor and takes the linked node before it instead.
func TestANodeTakesBackTheRestartedSuccessorItsSuccessorNames(t *testing.T) {
	w := newSettledOverlayNet(t, 12, 52, overlay.Params{Successors: 2})
	live := w.live()
	before, victim := live[3], live[4]
	for _, pair := range [][2]*testNode{{before, victim}, {victim, before}} {
		if l := pair[0].node.upLink(pair[1].node.Self()); l != nil {
			pair[0].node.links.Down(l, "test")
		}
	}
	before.node.buried(victim.node.Self(), w.now)
	victim.node.ov.ring.Forget(before.node.Self())
	victim.node.consider(live[2].node.selfInfo(), w.now)
	expectTakenBack(t, w, before, victim, 1)
}

// The dial that takes a buried node back ends with the link it made: a
// dial left standing dials again as soon as the link is gone. In a soak of
// 256 daemons, the link from a node to one it had buried, listed but not
// wanted (beyond its own successors), was closed as not needed and dialed
// again within milliseconds, every 4 s, for minutes.
func TestABuriedNodeTakenBackIsNotDialedAgainOnceItsLinkCloses(t *testing.T) {
	w := newSettledOverlayNet(t, 12, 52, overlay.Params{Successors: 2})
	live := w.live()
	before, listed := live[0], live[4] // listed by before's successor, not wanted by before
	id := listed.node.Self()
	if before.node.upLink(id) != nil {
		t.Fatalf("%s already has a link to %s", before.name, listed.name)
	}
	before.node.buried(id, w.now)
	ups, wasUp := 0, false
	for range 120 {
		w.advance(250*time.Millisecond, 250*time.Millisecond)
		up := before.node.upLink(id) != nil
		if up && !wasUp {
			ups++
		}
		wasUp = up
	}
	if ups != 1 {
		t.Fatalf("the link from %s to %s came up %d times in 30 s, want once", before.name, listed.name, ups)
	}
	for _, d := range before.node.links.Dials() {
		if d.Peer == id {
			t.Fatalf("%s still dials %s after its link closed", before.name, listed.name)
		}
	}
}

// The overlay's timed work — a long-distance request to retry, a drained
// link to tear down — is part of NextDeadline. A driver ticks at the
// deadline, and with keepalives in rounds an idle node is ticked about
// once a second: work due in between waited for that tick, which slowed
// joins, and drained links lingered and sent keepalives to peers that had
// torn theirs down.
func TestTheOverlaysTimedWorkIsADeadline(t *testing.T) {
	w := newSettledOverlayNet(t, 12, 3, overlay.Params{Successors: 2, LongDistance: 2})
	live := w.live()
	a, b := live[0], live[1]
	const soon = 20 * time.Millisecond
	if len(a.node.ov.ld) == 0 || a.node.ov.formation.settled.IsZero() {
		t.Fatal("no long-distance slot, or the node has not settled")
	}
	s := a.node.ov.ld[0]
	s.peer, s.request, s.retry = nid.ID{}, 0, w.now.Add(soon)
	if next := a.node.NextDeadline(w.now); next.After(s.retry) {
		t.Errorf("a long-distance request is due in %v, but the next deadline is in %v", soon, next.Sub(w.now))
	}
	s.retry = w.now.Add(time.Hour)
	ps := a.node.peer(b.node.Self())
	a.node.retire(a.node.upLink(b.node.Self()), ps, w.now.Add(soon-drainTime))
	if next := a.node.NextDeadline(w.now); next.After(ps.retireAt) {
		t.Errorf("a drained link is due to close in %v, but the next deadline is in %v", soon, next.Sub(w.now))
	}
}

// A slot refused over and over asks again within a second and a half
// (a second, and up to half of it again to spread the asks), however
// often it was refused: nodes at their inbound limit refused some slots
// up to 13 times in a row in a cold start of 5,000 nodes.
func TestARefusedSlotAsksAgainWithinASecond(t *testing.T) {
	w := newOverlayNet(t, 6, 7, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	n := w.live()[0].node
	s := n.ov.ld[0]
	for refusal := range 12 {
		id := uint64(1000 + refusal)
		n.ov.requests[id] = pendingRequest{slot: s, expires: w.now.Add(requestTimeout)}
		n.handleLinkReply(&overlay.Message{Type: overlay.LinkReply, ID: id, Origin: nid.ID{1}, Accepted: false}, w.now)
		if wait := s.retry.Sub(w.now); wait > 1500*time.Millisecond {
			t.Fatalf("after refusal %d the slot waits %v", refusal+1, wait)
		}
	}
	if s.refusals != 12 {
		t.Fatalf("%d refusals counted, want 12", s.refusals)
	}
}

// A message for one node goes to it the short way round: an answer to a
// node just behind the one answering went the rest of the way round the
// ring, node by node while the ring had no long links.
func TestAnAnswerGoesTheShortWayRound(t *testing.T) {
	w := newOverlayNet(t, 16, 13, overlay.Params{Successors: 1})
	w.settle(t, 60*time.Second)
	live := w.live()
	from, to := live[8].node, live[5].node
	if from.upLink(to.Self()) != nil {
		t.Fatal("the answering node has a link to the asker")
	}
	passedOn := func() (sum uint64) {
		for _, c := range live {
			sum += c.node.ov.forwarded[overlay.Pong]
		}
		return sum
	}
	before, receivedBefore := passedOn(), to.ov.received[overlay.Pong]
	from.originate(&overlay.Message{Type: overlay.Pong, Dest: to.Self(), Origin: from.Self(), Exact: true, ID: 99}, w.now)
	w.advance(time.Second, 10*time.Millisecond)
	if to.ov.received[overlay.Pong] != receivedBefore+1 {
		t.Fatal("the answer did not arrive")
	}
	if hops := passedOn() - before; hops != 3 {
		t.Fatalf("the answer crossed %d links to a node 3 back on a ring of 16, want 3", hops)
	}
}

// A long-distance request whose hops run out is answered by the node it
// reached, not dropped: while a ring forms, requests routed over
// successor links ran out of hops and were asked again 5 s later, over
// and over.
func TestLongDistanceRequestOutOfHopsIsAnsweredWhereItEnds(t *testing.T) {
	w := newOverlayNet(t, 14, 12, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	live := w.live()
	end := live[3]
	target := live[9].node.Self().Add(nid.FromFraction(-1e-9))
	if end.node.upLink(target) != nil || overlay.NextHop(end.node.Self(), end.node.routingCandidates(&overlay.Message{}), target) == end.node.Self() {
		t.Fatal("the request would not be passed on from the node it reaches")
	}
	ask := func(exact bool) (answered, passedOn uint64) {
		repliesBefore, forwardedBefore := end.node.ov.sent[overlay.LinkReply], end.node.ov.forwarded[overlay.LinkRequest]
		end.node.route(&overlay.Message{Type: overlay.LinkRequest, Dest: target, Exact: exact, TTL: 1, Origin: live[0].node.Self(),
			ID: 7, Reasons: overlay.ReasonLongDistance, From: live[0].node.selfInfo()}, nil, w.now)
		return end.node.ov.sent[overlay.LinkReply] - repliesBefore, end.node.ov.forwarded[overlay.LinkRequest] - forwardedBefore
	}
	if answered, passedOn := ask(false); answered != 1 || passedOn != 0 {
		t.Fatalf("a request out of hops got %d answers and was passed on %d times, want 1 answer", answered, passedOn)
	}
	// A request for one node (on demand) is for that node only.
	if answered, _ := ask(true); answered != 0 {
		t.Fatalf("an exact request out of hops was answered %d times by another node", answered)
	}
}

// A link answered far short of its target, as where a request ran out of
// hops, is to be aimed again later; one answered by the target's
// neighbourhood, or in a ring too small for a request to run out of hops,
// is not.
func TestWhichAnswersAreFarShortOfTheTarget(t *testing.T) {
	self := nid.FromFraction(0.1)
	target := nid.FromFraction(0.6)
	for _, c := range []struct {
		by    float64
		size  float64
		short bool
	}{
		{0.1 + 64.0/20000, 20000, true}, // 64 nodes on, of 10,000 to go
		{0.6 - 1.0/20000, 20000, false}, // the target's predecessor
		{0.4, 20000, false},             // less than halfway to go
		{0.6 + 1.0/20000, 20000, false}, // after the target (passed on)
		{0.15, 100, false},              // far short, but fewer nodes than a request's hops
	} {
		if got := answeredShort(self, nid.FromFraction(c.by), target, c.size); got != c.short {
			t.Errorf("answered at %.5f of the ring for a target at 0.6, %v nodes: short %v, want %v", c.by, c.size, got, c.short)
		}
	}
}

// A slot whose link was answered far short asks again once its time to
// aim again comes, and keeps its link until then.
func TestAShortLinkIsAskedForAgainWhenDue(t *testing.T) {
	w := newOverlayNet(t, 15, 12, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	var x *testNode
	var slot *ldSlot
	for _, c := range w.live() {
		for _, s := range c.node.ov.ld {
			if s.peer != (nid.ID{}) {
				x, slot = c, s
			}
		}
	}
	if slot == nil {
		t.Fatal("no node has a long-distance link")
	}
	slot.reaim = w.now.Add(10 * time.Second)
	asked, peer := x.node.ov.sent[overlay.LinkRequest], slot.peer
	w.advance(9*time.Second, 100*time.Millisecond)
	if x.node.ov.sent[overlay.LinkRequest] != asked {
		t.Fatal("the slot asked again before its time")
	}
	if slot.peer != peer || x.node.upLink(peer) == nil {
		t.Fatal("the slot lost its link before its time to aim again")
	}
	w.advance(2*time.Second, 100*time.Millisecond)
	if x.node.ov.sent[overlay.LinkRequest] == asked {
		t.Fatal("the slot did not ask again when its time came")
	}
	if !slot.reaim.IsZero() && slot.peer != (nid.ID{}) && w.now.After(slot.reaim) {
		t.Fatal("the slot's time to aim again stayed in the past")
	}
}

// A node that accepted a long-distance request whose asker then never
// linked (it aimed the slot elsewhere meanwhile, and says nothing) drops
// the asker's reasons after acceptHold: kept, they held a place within
// the inbound limit for good, and a heal probe between the two came up
// as a long-distance link minutes later, in a ring long settled.
func TestAnAcceptedRequestNobodyFollowsLapses(t *testing.T) {
	w := newSettledOverlayNet(t, 10, 3, overlay.Params{Successors: 1, LongDistance: 1})
	live := w.live()
	asker := live[0]
	var acceptor *testNode
	for _, c := range live[1:] {
		if asker.node.links.Links()[c.node.Self()] == nil {
			acceptor = c
			break
		}
	}
	if acceptor == nil {
		t.Fatal("the asker has a link with every node")
	}
	inbound := acceptor.node.inboundLongDistance()
	// An ID the asker has no request under: it takes no notice of the
	// answer, as when its slot was aimed elsewhere after asking.
	acceptor.node.route(&overlay.Message{Type: overlay.LinkRequest, Dest: acceptor.node.Self(), Exact: true, TTL: 1, Origin: asker.node.Self(),
		ID: 77, Reasons: overlay.ReasonLongDistance, From: asker.node.selfInfo()}, nil, w.now)
	if got := acceptor.node.inboundLongDistance(); got != inbound+1 {
		t.Fatalf("the accepted request counts %d inbound long-distance links, want %d", got, inbound+1)
	}
	w.advance(acceptHold-time.Second, 100*time.Millisecond)
	if acceptor.node.ov.peers[asker.node.Self()] == nil {
		t.Fatal("the accepted request lapsed before acceptHold")
	}
	w.advance(2*time.Second, 100*time.Millisecond)
	if ps := acceptor.node.ov.peers[asker.node.Self()]; ps != nil {
		t.Fatalf("the asker's reasons are kept %v after the request, with no link: %+v", acceptHold+time.Second, ps)
	}
	if got := acceptor.node.inboundLongDistance(); got != inbound {
		t.Fatalf("%d inbound long-distance links after the request lapsed, want %d", got, inbound)
	}
}

// A request accepted over a link already up counts only once the asker
// says it takes the link: a request a node's successor answers is no
// shortcut, and the asker draws another target without a word.
func TestARequestOverALinkUpCountsOnceTheAskerTakesIt(t *testing.T) {
	w := newSettledOverlayNet(t, 10, 3, overlay.Params{Successors: 1, LongDistance: 1})
	asker := w.live()[0]
	succ := w.nodes[slices.IndexFunc(w.nodes, func(c *testNode) bool { return c.node.Self() == asker.node.ov.ring.Successors(1)[0].ID })]
	inbound := succ.node.inboundLongDistance()
	asker.node.originate(&overlay.Message{Type: overlay.LinkRequest, Dest: succ.node.Self(), Exact: true, Origin: asker.node.Self(),
		Via: asker.node.via(), ID: 78, Reasons: overlay.ReasonLongDistance, From: asker.node.selfInfo()}, w.now)
	w.drain()
	if got := succ.node.inboundLongDistance(); got != inbound {
		t.Fatalf("the successor counts %d inbound long-distance links after a request over its link, want %d", got, inbound)
	}
	if ps := succ.node.ov.peers[asker.node.Self()]; ps == nil || ps.remote&overlay.ReasonSuccessor == 0 {
		t.Fatalf("the successor lost what the asker said of their link: %+v", ps)
	}
}

// A heal probe — a short link to a remembered node, to merge rings a
// partition split — carries no flood once both ends have said they keep
// it for nothing: floods, and the MACs they teach, stay on the overlay's
// links rather than on a link closed seconds later.
func TestAHealProbeStaysOutOfTheFloodAdjacency(t *testing.T) {
	w := newSettledOverlayNet(t, 12, 4, overlay.Params{Successors: 2, LongDistance: 1})
	live := w.live()
	prober := live[0]
	var probed *testNode
	for _, c := range live[1:] {
		if prober.node.links.Links()[c.node.Self()] == nil {
			probed = c
			break
		}
	}
	if probed == nil {
		t.Fatal("the prober has a link with every node")
	}
	prober.node.addContact(probed.addr, probed.node.Self(), false, w.now)
	for end := w.now.Add(5 * time.Second); prober.node.upLink(probed.node.Self()) == nil; {
		if !w.now.Before(end) {
			t.Fatal("the heal probe's link did not come up")
		}
		w.advance(10*time.Millisecond, 10*time.Millisecond)
	}
	w.advance(500*time.Millisecond, 10*time.Millisecond)
	if prober.node.upLink(probed.node.Self()) == nil || probed.node.upLink(prober.node.Self()) == nil {
		t.Fatal("the heal probe's link closed within half a second")
	}
	if slices.Contains(prober.node.adjacency, probed.node.Self()) || slices.Contains(probed.node.adjacency, prober.node.Self()) {
		t.Fatal("the heal probe's link is in the flood adjacency")
	}
	w.broadcastReachesAllOnce(t, "with a heal probe up")
}
