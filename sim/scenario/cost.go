package scenario

import (
	"fmt"
	"time"

	"burrow/sim"
)

const (
	costIdle = 60 * time.Second
	costJoin = 30 * time.Second
)

func runCost(o Options) (*Result, error) {
	r := newResult("cost", "Cost of the overlay vs size: idle traffic, join messages, per-node state (s=2, k=4)", o)
	idle := r.table("idle", fmt.Sprintf("Bytes per second each node sends over %v of quiet after convergence (UDP payload)", costIdle),
		"n", "mean B/s", "max B/s", "keepalive", "control", "handshake", "flood", "data", "undelivered", "datagrams/s", "control msgs/s (core count)")
	join := r.table("join", fmt.Sprintf("One more node joins a converged overlay: datagrams it caused in %v", costJoin),
		"n", "control", "handshake", "keepalive", "flood", "links of the new node", "paper: 2n+2(k+s)")
	state := r.table("state", "Per-node state after convergence",
		"n", "links mean", "links max", "learned MACs mean", "learned MACs max", "long-distance links up/wanted", "converged at")
	data := map[string]any{}
	for _, n := range o.sizes(100, 1000) {
		s := build(o, r, "cost", spec{n: n, node: uniform(2, 4, false), coldStart: true})
		converged := s.Elapsed()
		have, want := s.LongDistance()
		// Idle traffic.
		before := traffic(s)
		coreBefore := coreControl(s)
		ticksBefore := s.NetStats().Ticks
		s.RunFor(costIdle)
		idleTicks := float64(s.NetStats().Ticks-ticksBefore) / costIdle.Seconds() / float64(n)
		after := traffic(s)
		coreAfter := coreControl(s)
		secs := costIdle.Seconds()
		var perNode []float64
		var sum sim.Traffic
		for i := range after {
			d := after[i].Sub(before[i])
			sum = sum.Add(d)
			perNode = append(perNode, float64(d.TotalBytes())/secs)
		}
		rate := func(k sim.Kind) float64 { return float64(sum.Bytes[k]) / secs / float64(n) }
		idle.Add(n, mean(perNode), maxOf(perNode), rate(sim.KindKeepalive), rate(sim.KindControl), rate(sim.KindHandshake),
			rate(sim.KindFlood), rate(sim.KindData), rate(sim.KindUndelivered), float64(sum.TotalMessages())/secs/float64(n),
			float64(coreAfter-coreBefore)/secs/float64(n))
		// State.
		var links, macs []float64
		for _, nd := range s.Nodes() {
			links = append(links, float64(len(nd.Core().Adjacency())))
			macs = append(macs, float64(nd.Core().Status().LearnedMACs))
		}
		state.Add(n, mean(links), int(maxOf(links)), mean(macs), int(maxOf(macs)), fmt.Sprintf("%d/%d", have, want), converged)
		// One join, its datagrams followed from the new node outward.
		joiner := s.AddNode(uniform(2, 4, false)(n))
		joiner.Config.Bootstrap = []int{s.Rand().IntN(n)}
		tag := s.Tag(joiner.Index)
		joiner.Start()
		s.RunFor(costJoin)
		s.Untag(joiner.Index)
		jt := tag.Traffic.Messages
		join.Add(n, jt[sim.KindControl], jt[sim.KindHandshake], jt[sim.KindKeepalive], jt[sim.KindFlood], len(joiner.Core().Adjacency()), 2*n+2*(4+2))
		inv := invariants(r, fmt.Sprintf("n=%d", n), s)
		data[fmt.Sprint(n)] = map[string]any{"node_bytes_per_s": perNode, "idle": sum, "join": tag.Traffic, "invariants": inv}
		o.logf("cost n=%d: %.0f B/s per node idle, %.2f ticks per node a second idle (the engine's work), join %d control datagrams", n, mean(perNode), idleTicks, jt[sim.KindControl])
	}
	r.Data["sizes"] = data
	r.note("kinds: keepalive = empty transport messages; handshake = Noise handshakes (links, rekeys every 2 min, heal probes); control = overlay messages; flood = Bounded Flood (leaf adverts when links come up); undelivered = transport datagrams that never reached a running receiver, whose content the simulator cannot see; IP and UDP headers (28 bytes per datagram) are not counted")
	r.note("join: every datagram the new node sent in its first %v and every datagram any node sent while handling one of those, transitively; this includes the new node's own keepalives and periodic stabilization, and the handshakes of all its links.", costJoin)
	r.note("paper (§5.2): a join costs O(2n) XMPP presence messages plus 2(k+s) links; §5.1: each node keeps 2(s+k)+o links")
	return r, r.Err()
}

// traffic reads every node's traffic counters.
func traffic(s *sim.Sim) []sim.Traffic {
	out := make([]sim.Traffic, len(s.Nodes()))
	for i, n := range s.Nodes() {
		out[i] = n.Traffic()
	}
	return out
}

// coreControl sums the control messages every running core counts as
// sent and forwarded.
func coreControl(s *sim.Sim) uint64 {
	var sum uint64
	for _, n := range s.Nodes() {
		if n.Up() {
			sent, fwd := n.Core().ControlMessages()
			sum += sent + fwd
		}
	}
	return sum
}
