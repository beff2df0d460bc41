package flood

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"burrow/l2"
	"burrow/nid"

	"pgregory.net/rapid"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func mac(i int) l2.MAC { return l2.MAC{0x02, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)} }

func sortedLeaves(t *Table, root nid.ID) []l2.MAC {
	leaves := t.Leaves(root, nil)
	slices.SortFunc(leaves, func(a, b l2.MAC) int { return slices.Compare(a[:], b[:]) })
	return leaves
}

func TestLearnLookupAndMove(t *testing.T) {
	tab := NewTable(16, time.Minute)
	bridgeA, bridgeB := nid.ID{0xa}, nid.ID{0xb}

	tab.Learn(mac(1), 3, bridgeA, epoch)
	tab.Learn(mac(2), 3, bridgeA, epoch)
	if e, ok := tab.Lookup(mac(1)); !ok || e != (Entry{Port: 3, Root: bridgeA, LastSeen: epoch}) {
		t.Fatalf("Lookup = %+v, %v", e, ok)
	}
	if _, ok := tab.Lookup(mac(9)); ok {
		t.Fatalf("Lookup found a MAC never learned")
	}

	// The address moves to bridge B, now reached over port 5.
	later := epoch.Add(time.Second)
	tab.Learn(mac(1), 5, bridgeB, later)
	if e, _ := tab.Lookup(mac(1)); e != (Entry{Port: 5, Root: bridgeB, LastSeen: later}) {
		t.Fatalf("after the move Lookup = %+v", e)
	}
	if root, ok := tab.RootOf(mac(1)); !ok || root != bridgeB {
		t.Fatalf("RootOf = %v, %v; want bridge B", root, ok)
	}
	if got := sortedLeaves(tab, bridgeA); !slices.Equal(got, []l2.MAC{mac(2)}) {
		t.Fatalf("bridge A leaves %v, want only %v", got, mac(2))
	}
	if got := sortedLeaves(tab, bridgeB); !slices.Equal(got, []l2.MAC{mac(1)}) {
		t.Fatalf("bridge B leaves %v, want only %v", got, mac(1))
	}
	if tab.Len() != 2 {
		t.Fatalf("Len %d, want 2", tab.Len())
	}

	tab.Learn(mac(2), 5, bridgeB, later)
	if leaves := tab.Leaves(bridgeA, nil); leaves != nil {
		t.Fatalf("bridge A kept %v after its last leaf moved", leaves)
	}
}

func TestMulticastIsNotLearned(t *testing.T) {
	tab := NewTable(4, time.Minute)
	tab.Learn(l2.Broadcast, 1, nid.ID{1}, epoch)
	tab.Learn(l2.MAC{0x01, 0, 0x5e, 0, 0, 1}, 1, nid.ID{1}, epoch)
	if tab.Len() != 0 {
		t.Fatalf("learned %d multicast addresses", tab.Len())
	}
}

func TestReroute(t *testing.T) {
	tab := NewTable(16, time.Minute)
	for i := range 6 {
		tab.Learn(mac(i), Port(1+i%2), nid.ID{byte(i % 3)}, epoch)
	}
	tab.Learn(mac(10), LocalPort, nid.ID{0xff}, epoch)
	// Port 1 holds macs 0, 2 and 4; mac 0 has no known root (the zero ID).
	if n := tab.Reroute(1); n != 2 {
		t.Fatalf("Reroute(1) = %d, want 2", n)
	}
	for i := range 6 {
		e, ok := tab.Lookup(mac(i))
		switch {
		case i == 0 && ok:
			t.Errorf("a MAC with no known root was kept: %+v", e)
		case i%2 == 0 && i > 0 && (!ok || e.Port != RoutedPort || e.Root != nid.ID{byte(i % 3)}):
			t.Errorf("after Reroute(1) Lookup(%v) = %+v, %v; want routed toward its root", mac(i), e, ok)
		case i%2 == 1 && e.Port != 2:
			t.Errorf("Reroute(1) moved %v from port 2: %+v", mac(i), e)
		}
	}
	if n := tab.Reroute(1); n != 0 {
		t.Fatalf("rerouting an empty port moved %d", n)
	}
	if tab.Len() != 6 {
		t.Fatalf("Len = %d, want 6", tab.Len())
	}
	seen := 0
	tab.Each(func(m l2.MAC, e Entry) {
		if got, _ := tab.Lookup(m); got != e {
			t.Errorf("Each gave %v %+v, Lookup %+v", m, e, got)
		}
		seen++
	})
	if seen != tab.Len() {
		t.Fatalf("Each visited %d entries of %d", seen, tab.Len())
	}
}

func TestExpire(t *testing.T) {
	tab := NewTable(16, time.Minute)
	tab.Learn(mac(1), 1, nid.ID{1}, epoch)
	tab.Learn(mac(2), 1, nid.ID{1}, epoch.Add(10*time.Second))
	tab.Learn(mac(1), 1, nid.ID{1}, epoch.Add(20*time.Second)) // seen again: younger

	if n := tab.Expire(epoch.Add(70*time.Second - 1)); n != 0 {
		t.Fatalf("expired %d entries before their age", n)
	}
	if n := tab.Expire(epoch.Add(70 * time.Second)); n != 1 {
		t.Fatalf("expired %d entries at mac(2)'s age, want 1", n)
	}
	if _, ok := tab.Lookup(mac(2)); ok {
		t.Fatalf("mac(2) outlived its age")
	}
	if _, ok := tab.Lookup(mac(1)); !ok {
		t.Fatalf("mac(1) expired although seen again")
	}
	if n := tab.Expire(epoch.Add(time.Hour)); n != 1 || tab.Len() != 0 {
		t.Fatalf("Expire = %d, leaving Len %d", n, tab.Len())
	}
}

func TestFullTableEvictsLeastRecentlySeen(t *testing.T) {
	tab := NewTable(3, time.Minute)
	for i := range 3 {
		tab.Learn(mac(i), 1, nid.ID{1}, epoch.Add(time.Duration(i)*time.Second))
	}
	tab.Learn(mac(0), 1, nid.ID{1}, epoch.Add(5*time.Second)) // mac(1) is now the oldest
	tab.Learn(mac(7), 2, nid.ID{2}, epoch.Add(6*time.Second))
	if _, ok := tab.Lookup(mac(1)); ok {
		t.Fatalf("the least recently seen MAC survived eviction")
	}
	for _, m := range []l2.MAC{mac(0), mac(2), mac(7)} {
		if _, ok := tab.Lookup(m); !ok {
			t.Errorf("%v was evicted", m)
		}
	}
}

func TestRandomMACFloodStaysBounded(t *testing.T) {
	const limit = 1000
	tab := NewTable(limit, time.Minute)
	rng := rand.New(rand.NewPCG(1, 1))
	var m l2.MAC
	for i := range 50 * limit {
		for j := range m {
			m[j] = byte(rng.Uint32())
		}
		m[0] &^= 1
		tab.Learn(m, Port(1+i%8), nid.ID{byte(i)}, epoch.Add(time.Duration(i)))
	}
	if tab.Len() != limit || tab.used > limit+1 {
		t.Fatalf("Len %d with %d slots after the flood, want %d", tab.Len(), tab.used, limit)
	}
}

func TestLearnDoesNotAllocateWhenFull(t *testing.T) {
	const limit = 512
	tab := NewTable(limit, time.Minute)
	for i := range limit {
		tab.Learn(mac(i), 1, nid.ID{1}, epoch)
	}
	i := limit
	allocs := testing.AllocsPerRun(1000, func() {
		tab.Learn(mac(i), Port(i%4), nid.ID{byte(i % 3)}, epoch) // evicts and inserts
		tab.Learn(mac(i), Port(i%4+1), nid.ID{byte(i%3 + 1)}, epoch)
		i++
	})
	if allocs != 0 {
		t.Fatalf("Learn allocates %v times per run on a full table, want 0", allocs)
	}
}

// TestTableMatchesModel checks Table against a plain map under random
// sequences of operations.
func TestTableMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const maxAge = 10 * time.Second
		limit := rapid.IntRange(1, 8).Draw(t, "limit")
		tab := NewTable(limit, maxAge)
		type modelEntry struct {
			Entry
			order int // learn sequence number; the smallest is evicted
		}
		model := map[l2.MAC]modelEntry{}
		now := epoch
		genMAC := rapid.Custom(func(t *rapid.T) l2.MAC { return mac(rapid.IntRange(0, 11).Draw(t, "mac")) })
		genRoot := rapid.Custom(func(t *rapid.T) nid.ID { return nid.ID{byte(rapid.IntRange(0, 2).Draw(t, "root"))} })
		genPort := rapid.Custom(func(t *rapid.T) Port { return Port(rapid.IntRange(0, 3).Draw(t, "port")) })

		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 4).Draw(t, "advance")) * time.Second)
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				m, port, root := genMAC.Draw(t, "mac"), genPort.Draw(t, "port"), genRoot.Draw(t, "root")
				old, known := model[m]
				if changed := tab.Learn(m, port, root, now); changed != (!known || old.Port != port || old.Root != root) {
					t.Fatalf("Learn(%v, %d, %v) reported changed=%v; model had %+v, %v", m, port, root.Short(), changed, old.Entry, known)
				}
				if !known && len(model) == limit {
					oldest := l2.MAC{}
					for k, e := range model {
						if _, ok := model[oldest]; !ok || e.order < model[oldest].order {
							oldest = k
						}
					}
					delete(model, oldest)
				}
				model[m] = modelEntry{Entry{port, root, now}, step}
			case 1:
				port := genPort.Draw(t, "port")
				want := 0
				for k, e := range model {
					if e.Port != port {
						continue
					}
					if e.Root == (nid.ID{}) {
						delete(model, k)
						continue
					}
					e.Port = RoutedPort
					model[k] = e
					want++
				}
				if got := tab.Reroute(port); got != want {
					t.Fatalf("Reroute(%d) = %d, want %d", port, got, want)
				}
			case 2:
				want := 0
				for k, e := range model {
					if !now.Before(e.LastSeen.Add(maxAge)) {
						delete(model, k)
						want++
					}
				}
				if got := tab.Expire(now); got != want {
					t.Fatalf("Expire = %d, want %d", got, want)
				}
			}

			if tab.Len() != len(model) {
				t.Fatalf("Len = %d, model has %d", tab.Len(), len(model))
			}
			roots := map[nid.ID][]l2.MAC{}
			for i := range 12 {
				e, ok := tab.Lookup(mac(i))
				want, inModel := model[mac(i)]
				if ok != inModel || e != want.Entry {
					t.Fatalf("Lookup(%v) = %+v, %v; model %+v, %v", mac(i), e, ok, want.Entry, inModel)
				}
				if inModel {
					roots[want.Root] = append(roots[want.Root], mac(i))
				}
			}
			for root, leaves := range roots {
				if got := sortedLeaves(tab, root); !slices.Equal(got, leaves) {
					t.Fatalf("Leaves(%v) = %v, model %v", root.Short(), got, leaves)
				}
			}
		}
	})
}

// TestChangesKeepACopyInStep follows a table with a copy that only
// applies the changes the table reports (rebuilt when it lost track),
// as the core's published snapshot does, and checks that the copy always
// equals the table.
func TestChangesKeepACopyInStep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tab := NewTable(rapid.IntRange(1, 24).Draw(t, "limit"), 10*time.Second)
		whole := func() map[l2.MAC]Entry {
			out := map[l2.MAC]Entry{}
			tab.Each(func(m l2.MAC, e Entry) { out[m] = e })
			return out
		}
		mirror := whole()
		tab.ClearChanges()
		now := epoch
		for range rapid.IntRange(1, 120).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "advance")) * time.Second)
			m := mac(rapid.IntRange(0, 40).Draw(t, "mac"))
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1:
				tab.Learn(m, Port(rapid.IntRange(0, 3).Draw(t, "port")), nid.ID{byte(rapid.IntRange(0, 2).Draw(t, "root"))}, now)
			case 2:
				tab.Reroute(Port(rapid.IntRange(0, 3).Draw(t, "port")))
			case 3:
				tab.Expire(now)
			case 4:
				tab.Forget(m)
			}
			if !rapid.Bool().Draw(t, "sync") {
				continue
			}
			changed, kept := tab.Changes()
			if kept {
				for _, c := range changed {
					if e, ok := tab.Lookup(c); ok {
						mirror[c] = e
					} else {
						delete(mirror, c)
					}
				}
			} else {
				mirror = whole()
			}
			tab.ClearChanges()
			if want := whole(); !maps.Equal(mirror, want) {
				t.Fatalf("copy following the changes (kept: %v) = %v, table %v", kept, mirror, want)
			}
		}
	})
}

func TestNewTableRejectsBadLimits(t *testing.T) {
	for _, c := range []struct {
		max int
		age time.Duration
	}{{0, time.Minute}, {-1, time.Minute}, {10, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewTable(%d, %v) did not panic", c.max, c.age)
				}
			}()
			NewTable(c.max, c.age)
		}()
	}
}

// BenchmarkLearnFlood learns a stream of new random-looking MACs into a full
// table of several sizes: the cost per Learn (evict one, insert one) should
// stay flat as the table grows, apart from cache misses.
func BenchmarkLearnFlood(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 14, 1 << 18} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			tab := NewTable(size, time.Minute)
			for i := range size {
				tab.Learn(mac(i), 1, nid.ID{byte(i)}, epoch)
			}
			b.ReportAllocs()
			var m l2.MAC
			for i := uint64(0); b.Loop(); i++ {
				x := i * 0x9e3779b97f4a7c15 // spreads consecutive i over the address space
				for j := range m {
					m[j] = byte(x >> (8 * j))
				}
				m[0] &^= 1
				tab.Learn(m, Port(i&7), nid.ID{byte(i)}, epoch)
			}
		})
	}
}

func BenchmarkLearnKnown(b *testing.B) {
	tab := NewTable(1024, time.Minute)
	for i := range 1024 {
		tab.Learn(mac(i), 1, nid.ID{1}, epoch)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tab.Learn(mac(i&1023), 1, nid.ID{1}, epoch)
		i++
	}
}

func BenchmarkLookup(b *testing.B) {
	tab := NewTable(1024, time.Minute)
	for i := range 1024 {
		tab.Learn(mac(i), 1, nid.ID{1}, epoch)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := tab.Lookup(mac(i & 1023)); !ok {
			b.Fatal("miss")
		}
		i++
	}
}

// A table grows a page of slots at a time: a few hundred MACs learned
// leave less than a page spare, where a doubling slice left up to as
// many slots unused as were used.
func TestATableGrowsAPageAtATime(t *testing.T) {
	tab := NewTable(1000, time.Minute)
	for i := range 300 {
		tab.Learn(mac(i), 1, nid.ID{byte(i)}, epoch)
	}
	if room := len(tab.pages) << slotPageBits; room-int(tab.used) >= 1<<slotPageBits {
		t.Fatalf("%d slots of room for %d used", room, tab.used)
	}
}
