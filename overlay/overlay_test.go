package overlay

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"burrow/nid"
)

func genID(t *rapid.T, label string) nid.ID {
	var id nid.ID
	copy(id[:], rapid.SliceOfN(rapid.Byte(), nid.Size, nid.Size).Draw(t, label))
	return id
}

func genInfo(t *rapid.T, label string) Info {
	in := Info{ID: genID(t, label+".id")}
	for i, n := 0, rapid.IntRange(0, MaxEndpoints).Draw(t, label+".n"); i < n; i++ {
		var addr netip.Addr
		if rapid.Bool().Draw(t, label+".v6") {
			a := [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label+".a6"))
			a[0] = 0x20 // never an IPv4-mapped address
			addr = netip.AddrFrom16(a)
		} else {
			addr = netip.AddrFrom4([4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, label+".a4")))
		}
		in.Endpoints = append(in.Endpoints, netip.AddrPortFrom(addr, rapid.Uint16Range(1, 65535).Draw(t, label+".port")))
	}
	if len(in.Endpoints) > 0 && rapid.Bool().Draw(t, label+".turn") {
		in.TURN = in.Endpoints[rapid.IntRange(0, len(in.Endpoints)-1).Draw(t, label+".turnAt")]
	}
	for i, n := 0, rapid.IntRange(0, MaxRelays).Draw(t, label+".r"); i < n; i++ {
		in.Relays = append(in.Relays, genID(t, label+".relay"))
	}
	return in
}

func TestMessageRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := Message{
			Type: Type(rapid.IntRange(1, int(maxType)-1).Draw(t, "type")), TTL: rapid.Uint8().Draw(t, "ttl"),
			Exact: rapid.Bool().Draw(t, "exact"), Dest: genID(t, "dest"), Origin: genID(t, "origin"), Via: genID(t, "via"),
			ID: rapid.Uint64().Draw(t, "id"),
		}
		switch m.Type {
		case FindSuccessor, Notify, LinkReply:
			m.From = genInfo(t, "from")
			m.Accepted = m.Type == LinkReply && rapid.Bool().Draw(t, "acc")
		case LinkRequest:
			m.Reasons = Reason(rapid.Uint8().Draw(t, "reasons"))
			m.From = genInfo(t, "from")
			m.Passed = rapid.Bool().Draw(t, "passed")
		case LinkUse:
			m.Reasons = Reason(rapid.Uint8().Draw(t, "reasons"))
			m.Joined, m.Closing = rapid.Bool().Draw(t, "joined"), rapid.Bool().Draw(t, "closing")
			m.Relaying = rapid.Bool().Draw(t, "relaying")
			m.Ask = rapid.Bool().Draw(t, "ask")
		case Successors, Leave:
			m.From, m.Pred = genInfo(t, "from"), genInfo(t, "pred")
			m.Own = rapid.Bool().Draw(t, "own")
			for i, n := 0, rapid.IntRange(0, MaxSuccessors).Draw(t, "succ"); i < n; i++ {
				m.Successors = append(m.Successors, genInfo(t, "s"))
			}
		case Topology, Ping, Pong:
			m.From = genInfo(t, "from")
		case TopologyReply:
			m.Name = rapid.StringMatching(`[a-z0-9-]{0,20}`).Draw(t, "name")
			for i, n := 0, rapid.IntRange(0, MaxNeighbors).Draw(t, "nb"); i < n; i++ {
				m.Neighbors = append(m.Neighbors, Neighbor{ID: genID(t, "nbid"), Reasons: Reason(rapid.Uint8().Draw(t, "r")), Path: rapid.Uint8().Draw(t, "p")})
			}
		case Data:
			m.Payload = rapid.SliceOfN(rapid.Byte(), 0, MaxPayload).Draw(t, "payload")
		}
		b := m.Append(nil)
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Append(m)) failed: %v", err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(m)) {
			t.Fatalf("round trip changed the message:\n got %+v\nwant %+v", got, m)
		}
	})
}

// normalize makes nil and empty endpoint lists compare equal.
func normalize(m Message) Message {
	fix := func(in Info) Info {
		if len(in.Endpoints) == 0 {
			in.Endpoints = nil
		}
		if len(in.Relays) == 0 {
			in.Relays = nil
		}
		return in
	}
	m.From, m.Pred = fix(m.From), fix(m.Pred)
	for i := range m.Successors {
		m.Successors[i] = fix(m.Successors[i])
	}
	if len(m.Successors) == 0 {
		m.Successors = nil
	}
	if len(m.Neighbors) == 0 {
		m.Neighbors = nil
	}
	if len(m.Payload) == 0 {
		m.Payload = nil
	}
	return m
}

func TestParseRejectsGarbage(t *testing.T) {
	good := (&Message{Type: Successors, From: Info{ID: nid.ID{1}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:1")}}}).Append(nil)
	for i := range good {
		if _, err := Parse(good[:i]); err == nil {
			t.Fatalf("truncation at %d accepted", i)
		}
	}
	if _, err := Parse(append(bytes.Clone(good), 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	bad := bytes.Clone(good)
	bad[0] = 9
	if _, err := Parse(bad); err != ErrVersion {
		t.Fatalf("unknown version: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add((&Message{Type: FindSuccessor, TTL: 64, From: Info{ID: nid.ID{7}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:51820")}}}).Append(nil))
	f.Add((&Message{Type: Successors, Successors: []Info{{ID: nid.ID{1}}, {ID: nid.ID{2}}}}).Append(nil))
	relayed := netip.MustParseAddrPort("203.0.113.9:49152")
	f.Add((&Message{Type: Notify, From: Info{ID: nid.ID{3}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:51820"), relayed}, TURN: relayed}}).Append(nil))
	dualStack := []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:51820"), netip.MustParseAddrPort("[2001:db8::1]:51820")}
	f.Add((&Message{Type: LinkUse, Reasons: ReasonSuccessor, From: Info{ID: nid.ID{4}, Endpoints: dualStack}}).Append(nil))
	f.Add((&Message{Type: LinkUse, Reasons: ReasonSuccessor, Joined: true}).Append(nil))
	f.Add((&Message{Type: LinkUse, Reasons: ReasonLongDistance, Ask: true, Relaying: true}).Append(nil))
	f.Add((&Message{Type: Ping, TTL: 64, Exact: true, ID: 7, From: Info{ID: nid.ID{6}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.2:51820")}}}).Append(nil))
	f.Add((&Message{Type: Pong, TTL: 61, Exact: true, ID: 7, From: Info{ID: nid.ID{8}, Relays: []nid.ID{{9}}}}).Append(nil))
	f.Add((&Message{Type: LinkRequest, TTL: 1, Exact: true, Reasons: ReasonLongDistance, Passed: true, From: Info{ID: nid.ID{5}}}).Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		if again := m.Append(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
	})
}

func TestRingKeepsClosestSuccessorsAndPredecessor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := genID(t, "self")
		max := rapid.IntRange(1, 8).Draw(t, "max")
		r := NewRing(self, max)
		var all []nid.ID
		for i, n := 0, rapid.IntRange(1, 40).Draw(t, "n"); i < n; i++ {
			id := genID(t, "id")
			if id == self || slices.Contains(all, id) {
				continue
			}
			all = append(all, id)
			r.Consider(Info{ID: id})
		}
		if len(all) == 0 {
			return
		}
		byDist := slices.Clone(all)
		slices.SortFunc(byDist, func(a, b nid.ID) int { return self.Distance(a).Compare(self.Distance(b)) })
		got := r.Successors(max)
		if len(got) != min(max, len(all)) {
			t.Fatalf("%d successors, want %d", len(got), min(max, len(all)))
		}
		for i, s := range got {
			if s.ID != byDist[i] {
				t.Fatalf("successor %d is %v, want %v", i, s.ID, byDist[i])
			}
		}
		pred, ok := r.Predecessor()
		if !ok || pred.ID != byDist[len(byDist)-1] {
			t.Fatalf("predecessor %v, want %v", pred.ID, byDist[len(byDist)-1])
		}
		r.Forget(byDist[0])
		if s := r.Successors(1); len(all) > 1 && len(s) > 0 && s[0].ID == byDist[0] {
			t.Fatal("forgotten node still first successor")
		}
	})
}

func TestPruneDropsWhatTheSuccessorDoesNotKnow(t *testing.T) {
	r := NewRing(nid.ID{0x10}, 8)
	for _, b := range []byte{0x20, 0x30, 0x40, 0x50, 0x60, 0x70} {
		r.Consider(Info{ID: nid.ID{b}})
	}
	// 0x20 lists its successors 0x40 and 0x60: 0x30 and 0x50, between it
	// and 0x60, are unknown to it; 0x50 is kept because we link to it;
	// 0x70, beyond the list, it says nothing of.
	linked := nid.ID{0x50}
	if !r.Prune(nid.ID{0x20}, []Info{{ID: nid.ID{0x40}}, {ID: nid.ID{0x60}}}, func(id nid.ID) bool { return id == linked }) {
		t.Fatal("Prune reports no change")
	}
	var got []byte
	for _, s := range r.Successors(8) {
		got = append(got, s.ID[0])
	}
	if want := []byte{0x20, 0x40, 0x50, 0x60, 0x70}; !bytes.Equal(got, want) {
		t.Fatalf("successors %x after pruning, want %x", got, want)
	}
	if r.Prune(nid.ID{0x20}, nil, func(nid.ID) bool { return false }) {
		t.Fatal("an empty list pruned something")
	}
}

// genLinkedRing draws up to 60 distinct sorted node IDs, each linked both
// ways to the next round the ring, plus random chords.
func genLinkedRing(t *rapid.T) ([]nid.ID, map[nid.ID][]nid.ID) {
	ids := make([]nid.ID, rapid.IntRange(2, 60).Draw(t, "n"))
	for i := range ids {
		ids[i] = genID(t, "id")
	}
	slices.SortFunc(ids, nid.ID.Compare)
	ids = slices.Compact(ids)
	adj := map[nid.ID][]nid.ID{}
	if len(ids) < 2 {
		return ids, adj
	}
	for i, id := range ids {
		next := ids[(i+1)%len(ids)]
		adj[id] = append(adj[id], next)
		adj[next] = append(adj[next], id)
	}
	for range rapid.IntRange(0, 2*len(ids)).Draw(t, "chords") {
		a, b := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "a")], ids[rapid.IntRange(0, len(ids)-1).Draw(t, "b")]
		if a != b {
			adj[a], adj[b] = append(adj[a], b), append(adj[b], a)
		}
	}
	return ids, adj
}

func TestNextHopNeverOvershootsAndReachesThePredecessor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids, adj := genLinkedRing(t)
		if len(ids) < 2 {
			return
		}
		dest := genID(t, "dest")
		at := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "start")]
		for hops := 0; ; hops++ {
			if hops > len(ids) {
				t.Fatal("greedy routing did not terminate")
			}
			next := NextHop(at, adj[at], dest)
			if next == at {
				break
			}
			if next.Distance(dest).Compare(at.Distance(dest)) >= 0 {
				t.Fatal("a hop made no progress")
			}
			at = next
		}
		// The last node is the closest one at or before dest.
		for _, id := range ids {
			if id.Distance(dest).Compare(at.Distance(dest)) < 0 {
				t.Fatalf("stopped at %v but %v is closer before %v", at, id, dest)
			}
		}
	})
}

func TestNextHopToReachesTheNodeTheShortWayRound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids, adj := genLinkedRing(t)
		if len(ids) < 2 {
			return
		}
		dest := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "dest")]
		at := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "start")]
		for hops := 0; at != dest; hops++ {
			if hops >= len(ids) {
				t.Fatal("routing to a node did not reach it")
			}
			next := NextHopTo(at, adj[at], dest)
			if next.Gap(dest).Compare(at.Gap(dest)) >= 0 {
				t.Fatalf("a hop from %v to %v made no progress toward %v", at, next, dest)
			}
			at = next
		}
	})
}

func TestAnAnswerTwoNodesBackTakesTwoHops(t *testing.T) {
	const n = 32
	ids := make([]nid.ID, n)
	adj := map[nid.ID][]nid.ID{}
	for i := range ids {
		ids[i] = nid.FromUint128(uint64(i+1)<<56, 0)
	}
	for i, id := range ids {
		next := ids[(i+1)%n]
		adj[id] = append(adj[id], next)
		adj[next] = append(adj[next], id)
	}
	hops := func(route func(nid.ID, []nid.ID, nid.ID) nid.ID, from, to nid.ID) int {
		count := 0
		for at := from; at != to; count++ {
			if count > n {
				t.Fatal("no route")
			}
			at = route(at, adj[at], to)
		}
		return count
	}
	from, to := ids[5], ids[3]
	if got := hops(NextHopTo, from, to); got != 2 {
		t.Errorf("NextHopTo took %d hops two nodes back, want 2", got)
	}
	if got := hops(NextHop, from, to); got != n-2 {
		t.Errorf("NextHop took %d hops two nodes back, want %d: the long way round", got, n-2)
	}
}

func TestLongDistanceDrawsFollowTheHarmonicDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1024.0
	checkHarmonic(t, n, func() float64 { return Draw(rng).Fraction(n) })
}

// A draw carried over to another size estimate is a draw at that size,
// whether the estimate fell or rose, and one it reports kept still points
// where it did.
func TestResizedDrawsFollowTheHarmonicDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ from, to float64 }{{4096, 256}, {256, 4096}, {1024, 3000}, {20000, 5000}} {
		t.Run(fmt.Sprintf("%v to %v", c.from, c.to), func(t *testing.T) {
			kept := 0
			checkHarmonic(t, c.to, func() float64 {
				d := Draw(rng)
				before := d.Fraction(c.from)
				if d.Resize(c.from, c.to, rng) {
					kept++
					if after := d.Fraction(c.to); math.Abs(after-before) > 1e-9*before {
						t.Fatalf("kept draw moved from %v to %v", before, after)
					}
				}
				return d.Fraction(c.to)
			})
			lo, hi := math.Log(min(c.from, c.to)), math.Log(max(c.from, c.to))
			if want := lo / hi * harmonicDraws; math.Abs(float64(kept)-want) > 0.05*want {
				t.Errorf("kept %d draws, want about %.0f", kept, want)
			}
		})
	}
}

const harmonicDraws = 20000

// checkHarmonic draws harmonicDraws fractions and checks they follow
// p(x) ∝ 1/x on [1/n, 1): each factor of two in distance gets the same
// share of draws, 1/log2(n) each (the last, when n is no power of two,
// its part of one).
func checkHarmonic(t *testing.T, n float64, draw func() float64) {
	t.Helper()
	octaves := math.Log2(n)
	buckets := make([]int, int(math.Ceil(octaves)))
	for range harmonicDraws {
		x := draw()
		if x < 1/n*(1-1e-9) || x >= 1 {
			t.Fatalf("fraction %v outside [1/n, 1)", x)
		}
		buckets[min(max(int(math.Log2(x*n)), 0), len(buckets)-1)]++
	}
	for i, c := range buckets {
		want := harmonicDraws * (min(float64(i+1), octaves) - float64(i)) / octaves
		if math.Abs(float64(c)-want) > 0.15*want {
			t.Errorf("octave %d got %d draws, want about %.0f", i, c, want)
		}
	}
}

func TestSizeEstimate(t *testing.T) {
	self := nid.ID{}
	r := NewRing(self, 8)
	// 8 successors evenly spaced as in a ring of 1000.
	for i := 1; i <= 8; i++ {
		r.Consider(Info{ID: nid.FromFraction(float64(i) / 1000)})
	}
	if got := r.EstimateSize(); got < 900 || got > 1100 {
		t.Fatalf("estimate %v, want about 1000", got)
	}
}
