package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"burrow/nid"
	"burrow/node"
	"burrow/runtime"
)

// ringOf makes nodes named n0… with IDs in that order on the ring.
func ringOf(count int) []*Node {
	nodes := make([]*Node, count)
	for i := range nodes {
		nodes[i] = &Node{Name: fmt.Sprintf("n%d", i), ID: nid.ID{byte(0x10 * (i + 1))}}
	}
	return nodes
}

// placeOf is the place of ring[i] whose status says joined, with the
// given first successor and predecessor (nil for none).
func placeOf(ring []*Node, i int, joined bool, successor, predecessor *Node) Place {
	st := &runtime.Status{Status: node.Status{Overlay: node.OverlayStatus{Joined: joined}}}
	if successor != nil {
		st.Overlay.Successors = []string{successor.ID.String()}
	}
	if predecessor != nil {
		st.Overlay.Predecessor = predecessor.ID.String()
	}
	return Place{Node: ring[i], Status: st, Successor: ring[(i+1)%len(ring)], Predecessor: ring[(i+len(ring)-1)%len(ring)]}
}

func TestPlacedNeedsJoinedAndBothNeighbours(t *testing.T) {
	ring := ringOf(4)
	for _, c := range []struct {
		name   string
		place  Place
		placed bool
	}{
		{"right", placeOf(ring, 1, true, ring[2], ring[0]), true},
		{"not joined", placeOf(ring, 1, false, ring[2], ring[0]), false},
		{"wrong successor", placeOf(ring, 1, true, ring[3], ring[0]), false},
		{"no predecessor", placeOf(ring, 1, true, ring[2], nil), false},
		{"wraps around", placeOf(ring, 3, true, ring[0], ring[2]), true},
		{"unreadable", Place{Node: ring[1], Err: errors.New("busy"), Successor: ring[2], Predecessor: ring[0]}, false},
	} {
		if got := c.place.Placed(); got != c.placed {
			t.Errorf("%s: placed %v, want %v", c.name, got, c.placed)
		}
	}
}

func TestSnapshotCountsAndDescribes(t *testing.T) {
	ring := ringOf(3)
	s := RingSnapshot{Places: []Place{
		placeOf(ring, 0, true, ring[1], ring[2]),
		placeOf(ring, 1, false, ring[0], nil),
		{Node: ring[2], Err: errors.New("connection refused"), Successor: ring[0], Predecessor: ring[1]},
	}, byID: map[string]*Node{}}
	for _, n := range ring {
		s.byID[n.ID.String()] = n
	}
	s.Places[1].Status.Overlay.Successors = []string{ring[0].ID.String(), ring[2].ID.String()}
	if s.Joined() != 1 || s.Placed() != 1 || s.Unreadable() != 1 || s.Consistent() {
		t.Errorf("joined %d, placed %d, unreadable %d, consistent %v", s.Joined(), s.Placed(), s.Unreadable(), s.Consistent())
	}
	misplaced := s.Misplaced()
	if len(misplaced) != 2 {
		t.Fatalf("%d misplaced, want 2", len(misplaced))
	}
	for i, want := range []string{
		"n1 (20000000): not joined, successor n0 (10000000) (want n2 (30000000)), predecessor none (want n0 (10000000)), 0 links up (handshakes: 0 started, 0 completed, 0 rate-limited)",
		"n2 (30000000): status unreadable: connection refused",
	} {
		if got := s.Describe(misplaced[i]); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

func TestNthAddr(t *testing.T) {
	if got := nthAddr(netip.MustParsePrefix("10.80.0.0/16"), 300); got != netip.MustParseAddr("10.80.1.44") {
		t.Errorf("got %s", got)
	}
}
