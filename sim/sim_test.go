package sim

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"burrow/nid"
	"burrow/overlay"
)

// newOverlay starts n nodes with s successors and k long-distance links,
// one every 100 ms, and runs them until they converge.
func newOverlay(t *testing.T, seed uint64, n, s, k int) *Sim {
	t.Helper()
	sm := New(Config{Seed: seed})
	nodes := make([]*Node, n)
	for i := range nodes {
		nodes[i] = sm.AddNode(NodeConfig{Params: overlay.Params{Successors: s, LongDistance: k}})
	}
	sm.StartStaggered(nodes, 100*time.Millisecond, 1)
	sm.RunFor(time.Duration(n) * 100 * time.Millisecond)
	if _, err := sm.Converge(5*time.Minute, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return sm
}

func checkInvariants(t *testing.T, s *Sim) {
	t.Helper()
	if inv, err := s.CheckInvariants(); err != nil {
		t.Fatalf("%v (%+v)", err, inv)
	}
}

func TestQueueOrdersByTimeThenInsertion(t *testing.T) {
	var q queue
	times := []int64{5, 1, 5, 3, 1, 9, 0, 5}
	for i, at := range times {
		q.push(event{at: at, seq: uint64(i)})
	}
	var got [][2]int64
	for q.len() > 0 {
		e := q.pop()
		got = append(got, [2]int64{e.at, int64(e.seq)})
	}
	want := [][2]int64{{0, 6}, {1, 1}, {1, 4}, {3, 3}, {5, 0}, {5, 2}, {5, 7}, {9, 5}}
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// run is a small overlay with failures and traffic, summed up as JSON.
func run(t *testing.T, seed uint64) []byte {
	s := newOverlay(t, seed, 16, 2, 2)
	s.Ring()[3].Kill()
	f := s.AddFlow(FlowConfig{Kind: Probes, Src: 0, Dst: 9, Every: 100 * time.Millisecond, Start: s.Elapsed(), Stop: s.Elapsed() + 20*time.Second})
	s.RunFor(30 * time.Second)
	var traffic []Traffic
	for _, n := range s.Nodes() {
		traffic = append(traffic, n.Traffic())
	}
	out, err := json.Marshal(map[string]any{"net": s.NetStats(), "events": s.Events(), "traffic": traffic, "probes": f.Probes, "drops": s.Drops()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSameSeedSameRun(t *testing.T) {
	a, b := run(t, 7), run(t, 7)
	if string(a) != string(b) {
		t.Fatalf("two runs with seed 7 differ:\n%s\n%s", a, b)
	}
	if c := run(t, 8); string(c) == string(a) {
		t.Fatal("seeds 7 and 8 gave the same run; the comparison proves nothing")
	}
}

func TestFormationKeepsInvariants(t *testing.T) {
	for _, c := range []struct{ n, s, k int }{{8, 1, 1}, {32, 2, 3}, {64, 2, 4}} {
		s := newOverlay(t, 1, c.n, c.s, c.k)
		checkInvariants(t, s)
	}
}

func TestSilentFailuresOfSMinusOneAdjacentNodes(t *testing.T) {
	for _, succ := range []int{2, 3} {
		s := newOverlay(t, 2, 32, succ, 2)
		ring := s.Ring()
		// s−1 adjacent nodes die without a word, and one more elsewhere.
		for k := range succ - 1 {
			ring[5+k].Kill()
		}
		ring[20].Kill()
		if _, err := s.Converge(2*time.Minute, 10*time.Second); err != nil {
			t.Fatalf("s=%d: %v", succ, err)
		}
		checkInvariants(t, s)
	}
}

func TestGracefulLeaveRepairsRingAtOnce(t *testing.T) {
	s := newOverlay(t, 3, 24, 2, 2)
	leaver := s.Ring()[7]
	leaver.Stop()
	s.RunFor(500 * time.Millisecond)
	if err := s.CheckRing(nil); err != nil {
		t.Fatalf("half a second after a graceful leave: %v", err)
	}
	checkInvariants(t, s)
}

func TestPartitionFormsTwoRingsAndHealsIntoOne(t *testing.T) {
	s := newOverlay(t, 4, 32, 2, 2)
	var left, right []int
	for i := range s.Nodes() {
		if i%2 == 0 {
			left = append(left, i)
		} else {
			right = append(right, i)
		}
	}
	s.Partition(left, right)
	s.RunFor(90 * time.Second)
	for _, side := range [][]int{left, right} {
		if err := s.CheckRing(side); err != nil {
			t.Fatalf("side of the partition: %v", err)
		}
	}
	// A broadcast reaches its own side once and never crosses.
	ids := []int{s.Broadcast(left[0]), s.Broadcast(right[0])}
	s.RunFor(3 * time.Second)
	c, err := s.CheckBroadcasts(ids)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(left) - 1 + len(right) - 1; c.Delivered != want {
		t.Fatalf("partitioned broadcasts delivered %d times, want %d", c.Delivered, want)
	}
	s.Heal()
	if _, err := s.Converge(5*time.Minute, 10*time.Second); err != nil {
		t.Fatalf("after healing: %v", err)
	}
	checkInvariants(t, s)
}

func TestTagFollowsWhatANodeCauses(t *testing.T) {
	s := newOverlay(t, 5, 16, 2, 2)
	joiner := s.AddNode(NodeConfig{Params: overlay.Params{Successors: 2, LongDistance: 2}, Bootstrap: []int{3}})
	tag := s.Tag(joiner.Index)
	joiner.Start()
	s.RunFor(20 * time.Second)
	m := tag.Traffic.Messages
	if m[KindHandshake] == 0 || m[KindControl] == 0 {
		t.Fatalf("a join caused %v datagrams; want handshakes and control messages", m)
	}
	// Other nodes' traffic is not counted: the tag is much smaller than
	// the whole network's.
	var all Traffic
	for _, n := range s.Nodes() {
		all = all.Add(n.Traffic())
	}
	if tag.Traffic.TotalMessages()*4 > all.TotalMessages() {
		t.Fatalf("tag counted %d of %d datagrams", tag.Traffic.TotalMessages(), all.TotalMessages())
	}
}

func TestSpanningTreeTakesShortestPathsToLowestID(t *testing.T) {
	// A square 0-1-2-3-0 with a diagonal 1-3; node 2 has the lowest ID.
	g := Graph{Adj: [][]int{{1, 3}, {0, 2, 3}, {1, 3}, {0, 1, 2}}}
	g.ids = make([]nid.ID, 4)
	for i, v := range []byte{40, 30, 10, 20} {
		g.ids[i][0] = v
	}
	tree := g.SpanningTree()
	if tree.Root != 2 {
		t.Fatalf("root %d, want 2", tree.Root)
	}
	// 0 is two hops from the root through 1 or 3; 3 has the lower ID.
	if want := []int{-1, 2, -1, 2}; !slices.Equal(tree.Parent[1:], want[1:]) || tree.Parent[0] != 3 {
		t.Fatalf("parents %v", tree.Parent)
	}
	if got := tree.Path(0, 1); !slices.Equal(got, []int{0, 3, 2, 1}) {
		t.Fatalf("tree path 0→1 = %v; the diagonal 1-3 is blocked, so it goes through the root", got)
	}
}

func TestPathOfOneWayFrame(t *testing.T) {
	s := newOverlay(t, 6, 16, 2, 2)
	s.Ping(2, 11, false)
	s.RunFor(time.Second)
	f := s.AddFlow(FlowConfig{Kind: OneWay, Src: 2, Dst: 11, Start: s.Elapsed(), Trace: true})
	s.RunFor(time.Second)
	path, err := f.Path()
	if err != nil {
		t.Fatal(err)
	}
	if path[0] != 2 || path[len(path)-1] != 11 || len(path)-1 != int(f.LastHops) {
		t.Fatalf("path %v, %d hops reported", path, f.LastHops)
	}
	g := s.Graph()
	for i := 1; i < len(path); i++ {
		if !slices.Contains(g.Adj[path[i-1]], path[i]) {
			t.Fatalf("path %v uses %d-%d, not an overlay link", path, path[i-1], path[i])
		}
	}
}

func TestRecordedBulkFlowKeepsEachFrame(t *testing.T) {
	s := newOverlay(t, 8, 4, 2, 2)
	start := s.Elapsed()
	f := s.AddFlow(FlowConfig{Kind: Bulk, Src: 0, Dst: 3, Size: 1000, Rate: 200e3, Start: start, Stop: start + time.Second, Record: true})
	s.RunFor(2 * time.Second)
	if len(f.Frames) != 200 || f.RecvFrames != 200 {
		t.Fatalf("%d frames recorded, %d received; want 200 sent at 5 ms over a second, all received", len(f.Frames), f.RecvFrames)
	}
	acked := 0
	for i, fr := range f.Frames {
		if fr.Sent != start+time.Duration(i)*5*time.Millisecond || fr.Arrived <= fr.Sent || fr.Copies != 1 {
			t.Fatalf("frame %d: %+v", i, fr)
		}
		if fr.Acked >= 0 {
			acked++
			if fr.Acked <= fr.Arrived {
				t.Fatalf("frame %d acknowledged before it arrived: %+v", i, fr)
			}
		}
	}
	if acked != 200/AckEvery || int64(acked) != f.Acks {
		t.Fatalf("%d frames acknowledged, %d acks; want every %dth", acked, f.Acks, AckEvery)
	}
}

// TestTrafficBetweenReadingsIsNeverNegative: readings taken while
// datagrams are in flight (every 3 ms, with 20 ms of latency), their
// differences count only what was decided between them: no kind ever goes
// below zero, and the sum over all windows is the total.
func TestTrafficBetweenReadingsIsNeverNegative(t *testing.T) {
	sm := New(Config{Seed: 3, Latency: 20 * time.Millisecond})
	nodes := make([]*Node, 12)
	for i := range nodes {
		nodes[i] = sm.AddNode(NodeConfig{Params: overlay.Params{Successors: 2, LongDistance: 2}})
	}
	sm.StartStaggered(nodes, 50*time.Millisecond, 1)
	start := nodes[0].Traffic()
	before := start
	var sum Traffic
	for range 3000 {
		sm.RunFor(3 * time.Millisecond)
		now := nodes[0].Traffic()
		d := now.Sub(before)
		for k := range NumKinds {
			if d.Messages[k] < 0 || d.Bytes[k] < 0 {
				t.Fatalf("at %v: %v went negative between two readings: %+v", sm.Elapsed(), Kind(k), d)
			}
		}
		sum = sum.Add(d)
		before = now
	}
	if sum != before.Sub(start) || sum.TotalMessages() == 0 {
		t.Fatalf("windows sum to %+v, the whole run counted %+v", sum, before.Sub(start))
	}
}

// A long run's progress counts the control messages the cores sent and
// passed on, read when it is reported: a ring that forms routes its
// requests across nodes, so some are passed on, and the counts only grow
// while no core restarts.
func TestProgressCountsControlMessages(t *testing.T) {
	type counts struct{ sent, forwarded uint64 }
	var reports []counts
	sm := New(Config{Seed: 3, ProgressEvery: 512, Progress: func(p Progress) {
		sent, forwarded := p.ControlMessages()
		reports = append(reports, counts{sent, forwarded})
	}})
	nodes := make([]*Node, 24)
	for i := range nodes {
		nodes[i] = sm.AddNode(NodeConfig{Params: overlay.Params{Successors: 2, LongDistance: 2}})
	}
	sm.ColdStart(nodes, time.Second)
	sm.RunFor(20 * time.Second)
	if len(reports) < 2 {
		t.Fatalf("%d progress reports, want several", len(reports))
	}
	for i := 1; i < len(reports); i++ {
		if reports[i].sent < reports[i-1].sent || reports[i].forwarded < reports[i-1].forwarded {
			t.Fatalf("counts fell from %+v to %+v", reports[i-1], reports[i])
		}
	}
	first, last := reports[0], reports[len(reports)-1]
	if last.sent <= first.sent || last.forwarded == 0 {
		t.Fatalf("a forming ring of 24 counted %+v at the first report and %+v at the last; want the sent to grow and some passed on", first, last)
	}
	var total counts
	for _, n := range nodes {
		s, f := n.Core().ControlMessages()
		total.sent, total.forwarded = total.sent+s, total.forwarded+f
	}
	if last.sent > total.sent || last.forwarded > total.forwarded {
		t.Fatalf("the last report counted %+v, more than the cores' %+v at the end", last, total)
	}
	if s, f := (Progress{sim: sm}).ControlMessages(); s != total.sent || f != total.forwarded {
		t.Fatalf("a report now counts %d/%d, the cores %+v", s, f, total)
	}
	if s, f := (Progress{}).ControlMessages(); s != 0 || f != 0 {
		t.Fatalf("a report of no simulation counts %d/%d", s, f)
	}
}
