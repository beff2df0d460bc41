package flood

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"burrow/nid"

	"pgregory.net/rapid"
)

// overlay is an undirected graph of nodes, each with its peers sorted the
// way a node hands them to Targets.
type overlay struct {
	ids   []nid.ID
	index map[nid.ID]int
	peers [][]nid.ID
	// failing marks links (from, to) the sender believes are failing; nil
	// when none.
	failing map[[2]int]bool
}

// skip is the Targets predicate of node from: its failing links.
func (o *overlay) skip(from int) func(nid.ID) bool {
	if o.failing == nil {
		return nil
	}
	return func(p nid.ID) bool { return o.failing[[2]int{from, o.index[p]}] }
}

func newOverlay(ids []nid.ID) *overlay {
	o := &overlay{ids: ids, index: make(map[nid.ID]int, len(ids)), peers: make([][]nid.ID, len(ids))}
	for i, id := range ids {
		o.index[id] = i
	}
	return o
}

// link adds the edge a-b in both directions, ignoring repeats and loops.
func (o *overlay) link(a, b int) {
	if a == b || slices.Contains(o.peers[a], o.ids[b]) {
		return
	}
	o.peers[a] = append(o.peers[a], o.ids[b])
	o.peers[b] = append(o.peers[b], o.ids[a])
}

func (o *overlay) sortPeers() {
	for i, p := range o.peers {
		SortClockwise(o.ids[i], p)
	}
}

// ringOverlay links every node to its s successors on the ring.
func ringOverlay(ids []nid.ID, s int) *overlay {
	o := newOverlay(ids)
	byRing := slices.Clone(ids)
	slices.SortFunc(byRing, nid.ID.Compare)
	for j, id := range byRing {
		for d := 1; d <= s; d++ {
			o.link(o.index[id], o.index[byRing[(j+d)%len(byRing)]])
		}
	}
	return o
}

// floodResult is what every node saw of one broadcast.
type floodResult struct {
	received []int // copies each node received
	links    []int // overlay links the last copy crossed (its Hops)
	sent     int
}

// flood runs one broadcast from root by message passing through the FRB
// codec: each receiver parses the message and forwards it to Targets of its
// peers within the received bound. It stops after more messages than nodes,
// which only a forwarding loop can cause.
func (o *overlay) flood(root int) floodResult {
	n := len(o.ids)
	r := floodResult{received: make([]int, n), links: make([]int, n)}
	type message struct {
		to  int
		frb []byte
	}
	var queue []message
	var targets []Target
	send := func(from int, bound nid.ID, hops uint8) {
		targets = Targets(targets[:0], o.ids[from], o.peers[from], bound, o.skip(from))
		for _, tg := range targets {
			frb := AppendBroadcast(nil, Broadcast, o.ids[root], tg.Bound, hops, arpFrame)
			queue = append(queue, message{o.index[tg.Peer], frb})
		}
	}
	send(root, o.ids[root], 1)
	for len(queue) > 0 && r.sent <= n {
		m := queue[0]
		queue = queue[1:]
		r.sent++
		f, err := Parse(m.frb)
		if err != nil {
			panic(err)
		}
		r.received[m.to]++
		r.links[m.to] = int(f.Hops)
		send(m.to, f.Bound, f.Hops+1)
	}
	return r
}

// drawIDs draws the size first: drawn as a slice length, rapid keeps most
// overlays under 20 nodes.
func drawIDs(t *rapid.T) []nid.ID {
	n := rapid.IntRange(2, 200).Draw(t, "n")
	return rapid.SliceOfNDistinct(genID, n, n, func(id nid.ID) nid.ID { return id }).Draw(t, "ids")
}

// drawRingWithChords draws a ring overlay, each node linked to its s
// successors, with up to 2n random chords.
func drawRingWithChords(t *rapid.T) *overlay {
	ids := drawIDs(t)
	n := len(ids)
	o := ringOverlay(ids, rapid.IntRange(1, 3).Draw(t, "s"))
	for range rapid.IntRange(0, 2*n).Draw(t, "chords") {
		o.link(rapid.IntRange(0, n-1).Draw(t, "a"), rapid.IntRange(0, n-1).Draw(t, "b"))
	}
	o.sortPeers()
	return o
}

// checkExactlyOnce floods from every node of o and checks that each other
// node gets the broadcast exactly once, over at most n−1 links.
func checkExactlyOnce(t *rapid.T, o *overlay) {
	ids, n := o.ids, len(o.ids)
	for root := range n {
		r := o.flood(root)
		if r.sent > n-1 {
			t.Fatalf("root %d: %d messages for %d nodes: forwarding does not terminate or duplicates", root, r.sent, n)
		}
		for i, c := range r.received {
			if i == root && c != 0 {
				t.Fatalf("root %v received its own broadcast %d times", ids[root].Short(), c)
			}
			if i != root && c != 1 {
				t.Fatalf("root %v: node %v received %d copies, want 1", ids[root].Short(), ids[i].Short(), c)
			}
		}
		if longest := slices.Max(r.links); longest > n-1 {
			t.Fatalf("root %v: a copy crossed %d links in a %d-node overlay", ids[root].Short(), longest, n)
		}
	}
}

func TestRingOverlayDeliversExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { checkExactlyOnce(t, drawRingWithChords(t)) })
}

// TestFloodingAroundFailingLinksDeliversExactlyOnce: senders pass over any
// links they believe are failing (but never their first target), giving
// the share to the target before; on a ring with chords every node still
// gets the broadcast exactly once.
func TestFloodingAroundFailingLinksDeliversExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := drawRingWithChords(t)
		n := len(o.ids)
		o.failing = map[[2]int]bool{}
		for range rapid.IntRange(0, 2*n).Draw(t, "failing") {
			o.failing[[2]int{rapid.IntRange(0, n-1).Draw(t, "from"), rapid.IntRange(0, n-1).Draw(t, "to")}] = true
		}
		checkExactlyOnce(t, o)
	})
}

func TestArbitraryGraphNeverDuplicates(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := drawIDs(t)
		n := len(ids)
		o := newOverlay(ids)
		for range rapid.IntRange(0, 3*n).Draw(t, "edges") {
			a, b := rapid.IntRange(0, n-1).Draw(t, "a"), rapid.IntRange(0, n-1).Draw(t, "b")
			// Raw appends: a node's list may repeat a peer or name itself,
			// as a half-updated adjacency list might during churn.
			o.peers[a] = append(o.peers[a], ids[b])
			o.peers[b] = append(o.peers[b], ids[a])
		}
		o.sortPeers()

		for root := range n {
			r := o.flood(root)
			if r.received[root] != 0 {
				t.Fatalf("root %v received its own broadcast", ids[root].Short())
			}
			for i, c := range r.received {
				if c > 1 {
					t.Fatalf("root %v: node %v received %d copies", ids[root].Short(), ids[i].Short(), c)
				}
			}
		}
	})
}

// fig2 places x of the paper's 0..63 example ID space at the same fraction of
// burrow's 128-bit ring.
func fig2(x uint64) nid.ID { return nid.FromUint128(x<<58, 0) }

// TestFigure2 replays an overlay in the spirit of the paper's Fig. 2: node 0
// floods an ARP; it sends to 1 with bound 10 and to 10 with bound 30, and
// each receiver subdivides its own range.
func TestFigure2(t *testing.T) {
	nodes := []uint64{0, 1, 7, 10, 18, 30, 41, 52, 60}
	ids := make([]nid.ID, len(nodes))
	for i, x := range nodes {
		ids[i] = fig2(x)
	}
	o := newOverlay(ids)
	at := func(x uint64) int { return o.index[fig2(x)] }
	for i := range nodes { // successor links, s = 1
		o.link(i, (i+1)%len(nodes))
	}
	for _, chord := range [][2]uint64{{0, 10}, {0, 30}, {10, 41}, {18, 52}, {7, 30}, {30, 52}} {
		o.link(at(chord[0]), at(chord[1]))
	}
	o.sortPeers()

	type tuple struct{ peer, bound uint64 } // [peer, bound) in 0..63
	cases := []struct {
		node, bound uint64
		want        []tuple
	}{
		{0, 0, []tuple{{1, 10}, {10, 30}, {30, 60}, {60, 0}}},
		{1, 10, []tuple{{7, 10}}},
		{7, 10, nil}, // its peers 10, 30 and 1 all lie outside (7, 10)
		{10, 30, []tuple{{18, 30}}},
		{18, 30, nil},
		{30, 60, []tuple{{41, 52}, {52, 60}}}, // the chord to 52 splits the range
		{41, 52, nil},
		{52, 60, nil},
		{60, 0, nil}, // its successor 0 is the bound itself
	}
	for _, c := range cases {
		got := Targets(nil, fig2(c.node), o.peers[at(c.node)], fig2(c.bound), nil)
		want := make([]Target, len(c.want))
		for i, w := range c.want {
			want[i] = Target{Peer: fig2(w.peer), Bound: fig2(w.bound)}
		}
		if !slices.Equal(got, want) {
			t.Errorf("node %d with bound %d: targets %v, want %v", c.node, c.bound, got, c.want)
		}
	}

	r := o.flood(at(0))
	wantLinks := map[uint64]int{1: 1, 10: 1, 30: 1, 60: 1, 7: 2, 18: 2, 41: 2, 52: 2}
	for x, links := range wantLinks {
		if r.received[at(x)] != 1 || r.links[at(x)] != links {
			t.Errorf("node %d: %d copies after %d links, want 1 after %d", x, r.received[at(x)], r.links[at(x)], links)
		}
	}
}

func TestTargetsEdgeCases(t *testing.T) {
	self := fig2(20)
	peers := []nid.ID{self, fig2(25), fig2(25), fig2(40), fig2(5)} // sorted clockwise from 20
	cases := []struct {
		name  string
		bound nid.ID
		want  []Target
	}{
		{"whole ring", self, []Target{{fig2(25), fig2(40)}, {fig2(40), fig2(5)}, {fig2(5), self}}},
		{"bound on a peer excludes it", fig2(40), []Target{{fig2(25), fig2(40)}}},
		{"bound between peers", fig2(41), []Target{{fig2(25), fig2(40)}, {fig2(40), fig2(41)}}},
		{"bound right after self", fig2(21), nil},
	}
	for _, c := range cases {
		if got := Targets(nil, self, peers, c.bound, nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	kept := Target{fig2(1), fig2(2)}
	got := Targets([]Target{kept}, self, peers, fig2(40), nil)
	if want := []Target{kept, {fig2(25), fig2(40)}}; !slices.Equal(got, want) {
		t.Errorf("appending to a non-empty dst: %v, want %v", got, want)
	}
}

func TestSortClockwise(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := genID.Draw(t, "self")
		peers := rapid.SliceOf(genID).Draw(t, "peers")
		sorted := slices.Clone(peers)
		SortClockwise(self, sorted)
		for i := 1; i < len(sorted); i++ {
			if self.Distance(sorted[i-1]).Compare(self.Distance(sorted[i])) > 0 {
				t.Fatalf("%v comes before %v but is further clockwise from %v", sorted[i-1], sorted[i], self)
			}
		}
		slices.SortFunc(peers, nid.ID.Compare)
		slices.SortFunc(sorted, nid.ID.Compare)
		if !slices.Equal(peers, sorted) {
			t.Fatalf("SortClockwise changed the set of peers")
		}
	})
}

func TestTargetsAndSortDoNotAllocate(t *testing.T) {
	self, peers := benchPeers()
	dst := make([]Target, 0, len(peers))
	allocs := testing.AllocsPerRun(100, func() {
		SortClockwise(self, peers)
		dst = Targets(dst[:0], self, peers, self, nil)
	})
	if allocs != 0 {
		t.Fatalf("SortClockwise and Targets allocate %v times per run, want 0", allocs)
	}
	if len(dst) != len(peers) {
		t.Fatalf("the initiator targets %d of %d peers", len(dst), len(peers))
	}
}

// symphonyOverlay builds the overlay of experiment E7: each node links to its
// s ring successors and draws k long-distance peers from the harmonic pdf of
// EdgeVPN equation (1), taking the furthest node within the drawn distance.
func symphonyOverlay(rng *rand.Rand, n, s, k int) *overlay {
	ids := make([]nid.ID, n)
	for i := range ids {
		ids[i] = nid.FromUint128(rng.Uint64(), rng.Uint64())
	}
	slices.SortFunc(ids, nid.ID.Compare)
	o := ringOverlay(ids, s)
	for i, self := range ids {
		for range k {
			reach := nid.FromFraction(math.Exp(math.Log(float64(n)) * (rng.Float64() - 1)))
			j := (i + 1) % n
			for next := (j + 1) % n; next != i && self.Distance(ids[next]).Compare(reach) < 0; next = (next + 1) % n {
				j = next
			}
			o.link(i, j)
		}
	}
	o.sortPeers()
	return o
}

// TestSymphonyPathLengths follows experiment E7 (s = 2, k = log2 n): every
// node floods once; every other node must receive each broadcast exactly
// once, and paths stay short because long-distance links split the ring.
func TestSymphonyPathLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{8, 32, 64, 128} {
		k := int(math.Round(math.Log2(float64(n))))
		o := symphonyOverlay(rng, n, 2, k)
		longest, total := 0, 0
		for root := range n {
			r := o.flood(root)
			for i, c := range r.received {
				if (i == root) != (c == 0) || c > 1 {
					t.Fatalf("n=%d root %d: node %d received %d copies", n, root, i, c)
				}
			}
			for _, l := range r.links {
				total += l
				longest = max(longest, l)
			}
		}
		mean := float64(total) / float64(n*(n-1))
		t.Logf("n=%3d k=%d: mean path %.2f links, longest %d", n, k, mean, longest)
		if limit := math.Log2(float64(n)) * 2; mean > limit {
			t.Errorf("n=%d: mean path %.2f links, want at most 2 log2 n = %.1f", n, mean, limit)
		}
	}
}

// benchPeers is a node with 2 successors, 2 predecessors and 16 long-distance
// or on-demand peers spread around the ring.
func benchPeers() (nid.ID, []nid.ID) {
	rng := rand.New(rand.NewPCG(1, 2))
	self := nid.FromUint128(rng.Uint64(), rng.Uint64())
	peers := make([]nid.ID, 20)
	for i := range peers {
		peers[i] = nid.FromUint128(rng.Uint64(), rng.Uint64())
	}
	SortClockwise(self, peers)
	return self, peers
}

func BenchmarkTargets(b *testing.B) {
	self, peers := benchPeers()
	bound := peers[len(peers)/2]
	dst := make([]Target, 0, len(peers))
	b.ReportAllocs()
	b.Run("initiator", func(b *testing.B) {
		for b.Loop() {
			dst = Targets(dst[:0], self, peers, self, nil)
		}
	})
	b.Run("forwarder", func(b *testing.B) {
		for b.Loop() {
			dst = Targets(dst[:0], self, peers, bound, nil)
		}
	})
}

func BenchmarkSortClockwise(b *testing.B) {
	self, peers := benchPeers()
	shuffled := slices.Clone(peers)
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	for b.Loop() {
		copy(shuffled, peers)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		SortClockwise(self, shuffled)
	}
}
