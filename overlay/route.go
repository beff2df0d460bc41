package overlay

import "burrow/nid"

// NextHop picks where a message for dest goes from self, greedily: the
// candidate that gets closest to dest without passing it, i.e. with the
// smallest clockwise distance to dest. It returns self when no candidate
// does better, meaning self is the closest node preceding dest (or dest
// itself) among those it knows.
func NextHop(self nid.ID, candidates []nid.ID, dest nid.ID) nid.ID {
	return nearest(self, candidates, dest, nid.ID.Distance)
}

// NextHopTo picks where a message meant for the node dest alone goes from
// self: the candidate nearest dest the short way round the ring, in
// either direction, as links carry messages both ways. It returns self
// when no candidate is nearer. Clockwise routing would send an answer the
// long way round (the rest of the ring, after a request that came a part
// of it), and while a ring forms, with few long links, that is node by
// node until the hops run out.
func NextHopTo(self nid.ID, candidates []nid.ID, dest nid.ID) nid.ID {
	return nearest(self, candidates, dest, nid.ID.Gap)
}

// nearest is the candidate, or self, at the least distance to dest.
func nearest(self nid.ID, candidates []nid.ID, dest nid.ID, distance func(from, to nid.ID) nid.ID) nid.ID {
	best, bestDist := self, distance(self, dest)
	for _, c := range candidates {
		if d := distance(c, dest); d.Compare(bestDist) < 0 {
			best, bestDist = c, d
		}
	}
	return best
}
