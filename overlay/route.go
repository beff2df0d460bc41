package overlay

import "burrow/nid"

// NextHop picks where a message for dest goes from self, greedily: the
// candidate that gets closest to dest without passing it, i.e. with the
// smallest clockwise distance to dest. It returns self when no candidate
// does better, meaning self is the closest node preceding dest (or dest
// itself) among those it knows.
func NextHop(self nid.ID, candidates []nid.ID, dest nid.ID) nid.ID {
	best, bestDist := self, self.Distance(dest)
	for _, c := range candidates {
		if d := c.Distance(dest); d.Compare(bestDist) < 0 {
			best, bestDist = c, d
		}
	}
	return best
}
