package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"burrow/flood"
	"burrow/l2"
	"burrow/link"
)

// ringOfSuccessors links n nodes, in node-ID order, each to its next s
// nodes: the overlay the seed measures churn on (no long-distance links).
// Every node broadcasts once so that all paths are learned. It returns the
// nodes in ring order.
func ringOfSuccessors(t *testing.T, n, s int) (*testNet, []*testNode) {
	w := newTestNet(t, n, 11)
	ring := slices.Clone(w.nodes)
	slices.SortFunc(ring, func(a, b *testNode) int { return a.node.Self().Compare(b.node.Self()) })
	index := map[*testNode]int{}
	for i, n := range w.nodes {
		index[n] = i
	}
	for i := range ring {
		for k := 1; k <= s; k++ {
			w.connect(index[ring[i]], index[ring[(i+k)%n]])
		}
	}
	w.advance(2*time.Second, 100*time.Millisecond)
	for _, node := range ring {
		node.fromTAP(ethFrame(l2.Broadcast, node.mac, "hello"))
	}
	return w, ring
}

// stream sends a frame from a to b every 5 ms for d, ticking every node
// as it goes, and returns which frames b got.
func stream(w *testNet, a, b *testNode, d time.Duration, tag string) []bool {
	got, _ := conversation(w, a, b, d, tag, false)
	return got
}

// conversation is stream with, when answered, an answer from b to a after
// each frame, as a TCP flow has its acknowledgements; it returns which
// frames and which answers arrived.
func conversation(w *testNet, a, b *testNode, d time.Duration, tag string, answered bool) (got, answers []bool) {
	for i := 0; time.Duration(i)*5*time.Millisecond < d; i++ {
		payload := fmt.Sprintf("%s-%d", tag, i)
		a.node.Dataplane().FromTAP(a.worker, l2.VirtioNetHdr{}, ethFrame(b.mac, a.mac, payload), w.now.UnixNano())
		if answered {
			b.node.Dataplane().FromTAP(b.worker, l2.VirtioNetHdr{}, ethFrame(a.mac, b.mac, "ack-"+payload), w.now.UnixNano())
		}
		w.advance(5*time.Millisecond, 5*time.Millisecond)
		got = append(got, b.countTAP(payload) == 1)
		if answered {
			answers = append(answers, a.countTAP("ack-"+payload) == 1)
		}
	}
	return got, answers
}

// floods sums the floods every node started.
func floods(w *testNet) uint64 {
	var sum uint64
	for _, n := range w.nodes {
		sum += n.node.Stats().FloodsStarted.Load()
	}
	return sum
}

func lost(got []bool) int {
	n := 0
	for _, ok := range got {
		if !ok {
			n++
		}
	}
	return n
}

// acrossABridge is a ring of 8 with two successors and a pair a, b whose
// unicast path crosses the bridge m.
func acrossABridge(t *testing.T) (w *testNet, a, b, m *testNode) {
	w, ring := ringOfSuccessors(t, 8, 2)
	a, b = ring[0], ring[4]
	m = w.nextHop(a, b.mac)
	if m == nil || m == b {
		t.Fatalf("a reaches b over %v; want a bridge in between", m)
	}
	return w, a, b, m
}

func TestUnicastSwitchesToItsBackupWhenABridgeDies(t *testing.T) {
	w, a, b, m := acrossABridge(t)
	if got := stream(w, a, b, 100*time.Millisecond, "before"); lost(got) != 0 {
		t.Fatalf("%d frames lost before any failure", lost(got))
	}
	floods := a.node.Stats().FloodsStarted.Load()
	w.down[m] = true
	got := stream(w, a, b, 2*time.Second, "after")
	// CBL2's protection switching: frames lost times their interval.
	t.Logf("%d frames lost: %v without delivery", lost(got), time.Duration(lost(got))*5*time.Millisecond)
	if switched := time.Duration(lost(got)) * 5 * time.Millisecond; switched > 50*time.Millisecond {
		t.Errorf("%d frames (%v) lost when %s died; want at most 50 ms", lost(got), switched, m.name)
	}
	if lost(got[20:]) != 0 {
		t.Errorf("frames still lost after 100 ms: %v", got)
	}
	if f := a.node.Stats().FloodsStarted.Load(); f != floods {
		t.Errorf("a flooded %d frames after the failure; the backup should carry them", f-floods)
	}
	if a.node.Links().Links()[m.node.Self()] != nil {
		t.Errorf("the link to the dead bridge is still there after 2 s of traffic")
	}
}

// Both directions of a flow keep going over the backup, and the answers
// go routed back to the sender's bridge: no hop floods them for want of
// state, now or later.
func TestBothDirectionsSwitchToTheBackupWithoutFlooding(t *testing.T) {
	w, a, b, m := acrossABridge(t)
	if got, answers := conversation(w, a, b, 100*time.Millisecond, "before", true); lost(got)+lost(answers) != 0 {
		t.Fatalf("lost %d frames and %d answers before any failure", lost(got), lost(answers))
	}
	before := floods(w)
	w.down[m] = true
	got, answers := conversation(w, a, b, 2*time.Second, "after", true)
	if lost(got[20:])+lost(answers[20:]) != 0 {
		t.Errorf("after 100 ms still lost %d frames and %d answers", lost(got[20:]), lost(answers[20:]))
	}
	if f := floods(w) - before; f != 0 {
		t.Errorf("%d floods started after %s died; frames and answers should go over the backup", f, m.name)
	}
}

// A neighbour that stops answering is found out by broadcasts alone, and
// leaves the flood adjacency: the broadcasts reach every other node.
func TestBroadcastsFindASilentNeighbour(t *testing.T) {
	w, ring := ringOfSuccessors(t, 8, 2)
	src, dead := ring[0], ring[1]
	w.down[dead] = true
	for i := range 40 { // 200 ms of a broadcast every 5 ms
		src.node.Dataplane().FromTAP(src.worker, l2.VirtioNetHdr{}, ethFrame(l2.Broadcast, src.mac, fmt.Sprint("b-", i)), w.now.UnixNano())
		w.advance(5*time.Millisecond, 5*time.Millisecond)
	}
	if slices.Contains(src.node.Adjacency(), dead.node.Self()) {
		t.Fatalf("%s still floods to %s after 200 ms of broadcasts it never answered", src.name, dead.name)
	}
	src.fromTAP(ethFrame(l2.Broadcast, src.mac, "late"))
	for _, n := range ring[2:] {
		if got := n.countTAP("late"); got != 1 {
			t.Errorf("%s got the broadcast %d times, want once", n.name, got)
		}
	}
}

func TestGracefulLeaveLosesNothing(t *testing.T) {
	w, a, b, m := acrossABridge(t)
	m.node.Leave(w.now)
	got, answers := conversation(w, a, b, LeaveDrain, "draining", true)
	w.down[m] = true
	more, moreAnswers := conversation(w, a, b, time.Second, "left", true)
	got, answers = append(got, more...), append(answers, moreAnswers...)
	if lost(got)+lost(answers) != 0 {
		t.Fatalf("%d frames and %d answers lost when %s left gracefully: %v %v", lost(got), lost(answers), m.name, got, answers)
	}
	if n := w.nextHop(a, b.mac); n == m {
		t.Fatalf("a still sends to b through %s, which left", m.name)
	}
}

func TestBroadcastsCrossTheDataPathAlone(t *testing.T) {
	w, ring := ringOfSuccessors(t, 8, 2)
	for _, n := range ring {
		clear(n.handed)
	}
	src := ring[3]
	src.fromTAP(ethFrame(l2.Broadcast, src.mac, "again"))
	for _, n := range ring {
		want := 1
		if n == src {
			want = 0
			if n.handed[EventFromTAP] != 1 {
				t.Errorf("the broadcast went to %s's core %d times, want once", n.name, n.handed[EventFromTAP])
			}
			continue
		}
		if got := n.countTAP("again"); got != want {
			t.Errorf("%s got the broadcast %d times", n.name, got)
		}
		if len(n.handed) != 0 {
			t.Errorf("%s handed %v to its core for a broadcast it had learned from", n.name, n.handed)
		}
	}
	_ = w
}

func TestFirstFrameTeachesItsSourceBridge(t *testing.T) {
	w, ring := ringOfSuccessors(t, 6, 1)
	a, b := ring[0], ring[3]
	// b's host never broadcasts: a knows its MAC only from unicast.
	b.mac = l2.MAC{2, 0xb, 0, 0, 0, 1}
	a.fromTAP(ethFrame(b.mac, a.mac, "request"))
	b.fromTAP(ethFrame(a.mac, b.mac, "reply"))
	if a.countTAP("reply") != 1 {
		t.Fatal("the reply did not arrive")
	}
	for _, n := range ring {
		if n == b {
			continue
		}
		if e, ok := n.node.learn.Lookup(b.mac); ok && e.Root != b.node.Self() {
			t.Errorf("%s learned b's host behind %v, want b", n.name, e.Root.Short())
		}
	}
	if e, ok := a.node.learn.Lookup(b.mac); !ok || e.Root != b.node.Self() {
		t.Errorf("a did not learn which bridge b's host is behind: %+v, %v", e, ok)
	}
	_ = w
}

func TestMovedMACIsRelearnedOnItsFirstFrame(t *testing.T) {
	w, ring := ringOfSuccessors(t, 8, 2)
	a, x, y := ring[0], ring[3], ring[6]
	host := l2.MAC{2, 0xee, 0, 0, 0, 1}
	x.fromTAP(ethFrame(a.mac, host, "from-x"))
	a.fromTAP(ethFrame(host, a.mac, "to-x"))
	if x.countTAP("to-x") != 1 {
		t.Fatal("the host behind x is not reachable")
	}
	// The host moves to y (a VM migrated) and speaks first.
	y.fromTAP(ethFrame(a.mac, host, "from-y"))
	if e, _ := a.node.learn.Lookup(host); e.Root != y.node.Self() {
		t.Fatalf("after the first frame from y, a places the host behind %v, want y", e.Root.Short())
	}
	a.fromTAP(ethFrame(host, a.mac, "to-y"))
	if y.countTAP("to-y") != 1 || x.countTAP("to-y") != 0 {
		t.Fatalf("a's frame went to x %d times and to y %d times, want only y", x.countTAP("to-y"), y.countTAP("to-y"))
	}
	_ = w
}

// A link to a flow's destination bridge carries the flow once it is up,
// even where the MACs say otherwise. Each end of a flow learns the
// other's MAC where its frames come in; when the link between the two
// came up while frames still crossed a bridge m (an end that had not yet
// heard the other's leaves on the new link sent them there), every frame
// m passed on taught the other end that m's port leads to the sender,
// and the flow kept crossing m with the link beside it unused.
func TestADirectLinkTakesOverAFlowLearnedAcrossABridge(t *testing.T) {
	w, a, b, m := acrossABridge(t)
	if got, answers := conversation(w, a, b, 100*time.Millisecond, "across", true); lost(got)+lost(answers) != 0 {
		t.Fatalf("%d frames and %d answers lost across %s", lost(got), lost(answers), m.name)
	}
	w.connect(slices.Index(w.nodes, a), slices.Index(w.nodes, b))
	w.advance(time.Second, 100*time.Millisecond)
	ab, ba := a.node.Links().Links()[b.node.Self()], b.node.Links().Links()[a.node.Self()]
	if ab == nil || !ab.Up() || ba == nil || !ba.Up() {
		t.Fatalf("no link up between %s and %s", a.name, b.name)
	}
	// Both still have the other's MAC behind m, as if neither had heard
	// the other's leaves on the new link.
	for _, e := range [][2]*testNode{{a, b}, {b, a}} {
		l := e[0].node.Links().Links()[m.node.Self()]
		if l == nil || !l.Up() {
			t.Fatalf("%s has no link up to %s", e[0].name, m.name)
		}
		e[0].node.learnMAC(e[1].mac, flood.Port(l.Port), e[1].node.Self(), w.now)
	}
	w.advance(10*time.Millisecond, 10*time.Millisecond)
	rxB, rxA := ba.Counters.RxPackets.Load(), ab.Counters.RxPackets.Load()
	got, answers := conversation(w, a, b, 100*time.Millisecond, "direct", true)
	if lost(got)+lost(answers) != 0 {
		t.Fatalf("%d frames and %d answers lost with the direct link up", lost(got), lost(answers))
	}
	if n := ba.Counters.RxPackets.Load() - rxB; n < uint64(len(got)) {
		t.Errorf("%s got %d datagrams from %s over their link for %d frames; the rest crossed %s", b.name, n, a.name, len(got), m.name)
	}
	if n := ab.Counters.RxPackets.Load() - rxA; n < uint64(len(answers)) {
		t.Errorf("%s got %d datagrams from %s over their link for %d answers; the rest crossed %s", a.name, n, b.name, len(answers), m.name)
	}
}

// linkedButLearnedAcrossABridge is acrossABridge with a link up between a
// and b, while a still has b's MAC behind m, where it learned it: ab and
// am are a's links to b and m.
func linkedButLearnedAcrossABridge(t *testing.T) (w *testNet, a, b, m *testNode, ab, am *link.Link) {
	w, a, b, m = acrossABridge(t)
	w.connect(slices.Index(w.nodes, a), slices.Index(w.nodes, b))
	w.advance(time.Second, 100*time.Millisecond)
	ab, am = a.node.Links().Links()[b.node.Self()], a.node.Links().Links()[m.node.Self()]
	if ab == nil || !ab.Up() || am == nil || !am.Up() {
		t.Fatalf("%s lacks a link up to %s or %s", a.name, b.name, m.name)
	}
	a.node.learnMAC(b.mac, flood.Port(am.Port), b.node.Self(), w.now)
	return w, a, b, m, ab, am
}

// A link being retired carries no flow, not even one to the bridge at its
// other end: the peer tears it down a drain later, or already did when
// its word that it closes was lost, and the frames would vanish.
func TestAFlowDoesNotTakeARetiringLinkToItsBridge(t *testing.T) {
	w, a, b, m, ab, am := linkedButLearnedAcrossABridge(t)
	a.node.retire(ab, a.node.peer(b.node.Self()), w.now)
	toB, toM := ab.Counters.TxPackets.Load(), am.Counters.TxPackets.Load()
	got, _ := conversation(w, a, b, 100*time.Millisecond, "retiring", false)
	if lost(got) != 0 {
		t.Fatalf("%d of %d frames lost while the link retires", lost(got), len(got))
	}
	if n := ab.Counters.TxPackets.Load() - toB; n != 0 {
		t.Errorf("%s sent %d datagrams over the link it retires, for %d frames", a.name, n, len(got))
	}
	if n := am.Counters.TxPackets.Load() - toM; n < uint64(len(got)) {
		t.Errorf("%s sent %d datagrams to %s, where it learned %s's MAC, for %d frames", a.name, n, m.name, b.name, len(got))
	}
}

// A frame that the bridge its destination sits behind sent here itself
// does not go back to that bridge over their link, even with the link
// up: the two would pass it to and fro. It goes the way the MAC was
// learned.
func TestAFrameFromItsDestinationsBridgeDoesNotGoBack(t *testing.T) {
	w, a, b, m, ab, am := linkedButLearnedAcrossABridge(t)
	toB, toM := ab.Counters.TxPackets.Load(), am.Counters.TxPackets.Load()
	host := l2.MAC{0x02, 0, 0, 0, 0xbe, 0xef}
	a.node.switchFrame(ab.Port, ethFrame(b.mac, host, "stale"), l2.Offload{}, b.node.Self(), false, w.now)
	if n := ab.Counters.TxPackets.Load() - toB; n != 0 {
		t.Errorf("%s sent %d datagrams back to %s, which sent it the frame", a.name, n, b.name)
	}
	if n := am.Counters.TxPackets.Load() - toM; n != 1 {
		t.Errorf("%s sent %d datagrams to %s, where it learned %s's MAC; want 1", a.name, n, m.name, b.name)
	}
	// The data path sends the flow's next frames the same way.
	a.node.publishIfDirty()
	r, ok := a.node.snap.Load().flows[flowKey{in: ab.Port, src: host, dst: b.mac}]
	if !ok || r.via == nil || r.via.link != am {
		t.Errorf("the data path's flow from %s to its own bridge's MAC: %v, %+v; want it to go to %s", b.name, ok, r.via, m.name)
	}
}
