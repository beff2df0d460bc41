package scenario

import (
	"fmt"
	"slices"
	"time"

	"burrow/node"
	"burrow/sim"
)

// The revocation experiment: once the overlay has formed, one member is
// handed the CA's revocation of another, as `burrow cert revoke --push`
// does, and the revocation spreads over the overlay.
const (
	revocationSample = 10 * time.Millisecond
	revocationLimit  = 30 * time.Second
)

func runRevocation(o Options) (*Result, error) {
	r := newResult("revocation", "A revocation handed to one member, spreading over a formed overlay (s=2, k=4)", o)
	spread := r.table("spread", fmt.Sprintf("From the hand-over to every member knowing (the ring's stabilization round is %v)", node.DefaultStabilizeEvery),
		"n", "members that learned", "all learned after", "median member after", "the revoked member saw its last link die after", "revocation messages per member", "links per member")
	data := map[string]any{}
	for _, n := range o.sizes(100, 1000) {
		s := build(o, r, "revocation", spec{n: n, node: uniform(2, 4, false), coldStart: true})
		nodes := s.Nodes()
		revoked, handedTo := s.Rand().IntN(n), s.Rand().IntN(n)
		for handedTo == revoked {
			handedTo = s.Rand().IntN(n)
		}
		var links int
		for _, nd := range nodes {
			links += len(nd.Core().Adjacency())
		}
		start := s.Elapsed()
		if err := s.Revoke(handedTo, revoked); err != nil {
			r.check(fmt.Sprintf("revocation n=%d", n), err)
			continue
		}
		cutAt := time.Duration(-1)
		for s.Elapsed()-start < revocationLimit {
			s.RunFor(revocationSample)
			if cutAt < 0 && len(nodes[revoked].Core().Adjacency()) == 0 {
				cutAt = s.Elapsed() - start
			}
			if cutAt >= 0 && learned(nodes, revoked) == n-1 {
				break
			}
		}
		var after []float64
		for i, nd := range nodes {
			if i != revoked && len(nd.RevocationsLearned) > 0 {
				after = append(after, (nd.RevocationsLearned[0].At - start).Seconds())
			}
		}
		got := learned(nodes, revoked)
		if got != n-1 {
			r.check(fmt.Sprintf("revocation n=%d", n), fmt.Errorf("%d of %d members learned the revocation within %v", got, n-1, revocationLimit))
		}
		if cutAt < 0 {
			r.check(fmt.Sprintf("revocation n=%d", n), fmt.Errorf("the revoked member still has links %v after", revocationLimit))
		}
		var sent uint64
		for _, nd := range nodes {
			sent += nd.Core().Stats().RevocationsSent.Load()
		}
		spread.Add(n, fmt.Sprintf("%d of %d", got, n-1), seconds(maxOf(after)), seconds(percentile(after, 50)), cutAt,
			float64(sent)/float64(n), float64(links)/float64(n))
		data[fmt.Sprint(n)] = map[string]any{"learned_after_s": after, "revoked_cut_off_s": cutAt.Seconds()}
	}
	r.Data["sizes"] = data
	r.note("a member given a new revocation cuts the revoked member off and passes the revocation to each of its neighbours but the one it came from; a member that knows it already does nothing, so each member sends it at most once over each of its links")
	r.note("every member drops its link to the revoked member as it learns the revocation; the revoked member, told nothing, sees its links die when they fall silent (the links' dead-peer timeout)")
	r.note("times are virtual, with the simulator's link latencies; the daemon adds its processing, measured end to end in e2e/revocation_test.go")
	return r, r.Err()
}

// learned counts the members other than revoked that learned its
// revocation.
func learned(nodes []*sim.Node, revoked int) int {
	count := 0
	for i, nd := range nodes {
		if i != revoked && slices.ContainsFunc(nd.RevocationsLearned, func(l sim.RevocationLearned) bool { return l.Node == nodes[revoked].ID }) {
			count++
		}
	}
	return count
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
