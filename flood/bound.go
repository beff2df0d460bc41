package flood

import (
	"slices"

	"burrow/nid"
)

// Target is one forwarding decision of the flooding-bound algorithm: send the
// broadcast to Peer, which may carry it on up to, but not including, Bound.
type Target struct {
	Peer, Bound nid.ID
}

// SortClockwise orders peers by clockwise distance from self, the order
// Targets expects.
func SortClockwise(self nid.ID, peers []nid.ID) {
	slices.SortFunc(peers, func(a, b nid.ID) int {
		return self.Distance(a).Compare(self.Distance(b))
	})
}

// Targets appends to dst the peers a node forwards a broadcast to, each with
// its new bound (EdgeVPN section 3.2.3). self received the broadcast with
// bound; the initiator passes bound == self, meaning the whole ring.
//
// peers is self's adjacency list sorted by SortClockwise. Only peers strictly
// inside the clockwise interval (self, bound) are targets; each gets the next
// target clockwise as its bound, and the last one gets bound. Every target's
// share [Peer, Bound) is thus a disjoint piece of self's own share, which is
// why no node receives a broadcast twice whatever the overlay's cycles. Self
// and repeated entries in peers are ignored: a repeated peer would otherwise
// receive the bound (p, p), which is the whole ring.
//
// skip, when not nil, names peers whose links are failing: such a peer is
// passed over and its share goes to the target before it, which reaches
// the same nodes through its own links, unless it would be the first
// target, whose share nobody before it could take.
//
// Targets does not allocate when dst has room for len(peers) more targets.
func Targets(dst []Target, self nid.ID, peers []nid.ID, bound nid.ID, skip func(nid.ID) bool) []Target {
	first := len(dst)
	for _, p := range peers {
		if !nid.InOpen(p, self, bound) {
			continue
		}
		if last := len(dst) - 1; last >= first {
			if dst[last].Peer == p || skip != nil && skip(p) {
				continue
			}
			dst[last].Bound = p
		}
		dst = append(dst, Target{Peer: p, Bound: bound})
	}
	return dst
}
