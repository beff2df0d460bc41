package overlay

import (
	"math"
	"slices"

	"burrow/nid"
)

// Ring is one node's view of its neighbourhood on the ring: the closest
// nodes it knows clockwise (successors) and the closest counter-clockwise
// (predecessor). Every node it hears of is offered with Consider; nodes
// found dead are removed with Forget. The view is bounded.
type Ring struct {
	self nid.ID
	max  int
	succ []Info // sorted clockwise from self, at most max
	pred Info   // zero ID when unknown
}

// NewRing makes an empty view for self keeping up to max successors.
func NewRing(self nid.ID, max int) *Ring {
	return &Ring{self: self, max: max}
}

// Self is the owner's ID.
func (r *Ring) Self() nid.ID { return r.self }

// Consider offers a node the owner heard of. It reports whether the view
// changed. Endpoints of a known node are refreshed when in carries some.
func (r *Ring) Consider(in Info) bool {
	if in.ID == r.self || in.ID == (nid.ID{}) {
		return false
	}
	changed := false
	if r.pred.ID == in.ID {
		if len(in.Endpoints) > 0 {
			r.pred = cloneInfo(in)
		}
	} else if r.pred.ID == (nid.ID{}) || nid.InOpen(in.ID, r.pred.ID, r.self) {
		r.pred = cloneInfo(in)
		changed = true
	}
	i, found := slices.BinarySearchFunc(r.succ, in.ID, func(s Info, id nid.ID) int {
		return r.self.Distance(s.ID).Compare(r.self.Distance(id))
	})
	if found {
		if len(in.Endpoints) > 0 {
			r.succ[i] = cloneInfo(in)
		}
		return changed
	}
	if i >= r.max {
		return changed
	}
	r.succ = slices.Insert(r.succ, i, cloneInfo(in))
	if len(r.succ) > r.max {
		r.succ = r.succ[:r.max]
	}
	return true
}

func cloneInfo(in Info) Info {
	return Info{ID: in.ID, Endpoints: slices.Clone(in.Endpoints), Relays: slices.Clone(in.Relays), TURN: in.TURN}
}

// Forget removes a node found dead or gone.
func (r *Ring) Forget(id nid.ID) bool {
	changed := false
	if r.pred.ID == id {
		r.pred = Info{}
		changed = true
	}
	for i, s := range r.succ {
		if s.ID == id {
			r.succ = slices.Delete(r.succ, i, i+1)
			return true
		}
	}
	return changed
}

// Prune drops the successors that from's list of its own successors says
// do not exist: those between from and the last node listed that the list
// leaves out, unless keep vouches for them (say, because the owner has a
// link to them). The list is the closest nodes from knows clockwise, so a
// node it leaves out of that stretch is unknown to it; trusting this
// keeps dead nodes, which only their neighbours see die, from living on in
// second-hand views that pass them back and forth.
func (r *Ring) Prune(from nid.ID, listed []Info, keep func(nid.ID) bool) bool {
	if len(listed) == 0 {
		return false
	}
	last := listed[len(listed)-1].ID
	changed := false
	r.succ = slices.DeleteFunc(r.succ, func(s Info) bool {
		drop := nid.InOpen(s.ID, from, last) && !slices.ContainsFunc(listed, func(in Info) bool { return in.ID == s.ID }) && !keep(s.ID)
		changed = changed || drop
		return drop
	})
	return changed
}

// KnownSuccessors is how many successors the view holds.
func (r *Ring) KnownSuccessors() int { return len(r.succ) }

// Successors returns up to n successors, closest first.
func (r *Ring) Successors(n int) []Info { return r.succ[:min(n, len(r.succ))] }

// Known reports whether id is in the view.
func (r *Ring) Known(id nid.ID) bool {
	if r.pred.ID == id {
		return true
	}
	for _, s := range r.succ {
		if s.ID == id {
			return true
		}
	}
	return false
}

// Lookup returns what the view knows about id.
func (r *Ring) Lookup(id nid.ID) (Info, bool) {
	if r.pred.ID == id && id != (nid.ID{}) {
		return r.pred, true
	}
	for _, s := range r.succ {
		if s.ID == id {
			return s, true
		}
	}
	return Info{}, false
}

// Predecessor is the closest known node counter-clockwise.
func (r *Ring) Predecessor() (Info, bool) { return r.pred, r.pred.ID != (nid.ID{}) }

// EstimateSize estimates the number of nodes on the ring from how much of
// it the known successors cover, as Symphony does: k successors spanning a
// fraction f of the ring suggest k/f nodes. At least 1.
func (r *Ring) EstimateSize() float64 {
	if len(r.succ) == 0 {
		return 1
	}
	last := r.succ[len(r.succ)-1].ID
	f := r.self.Distance(last).Fraction()
	if f <= 0 {
		return 1
	}
	return math.Max(float64(len(r.succ)+1), float64(len(r.succ))/f)
}
