package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ByRing returns the nodes in ring order: sorted by node ID.
func ByRing(nodes []*Node) []*Node {
	ring := slices.Clone(nodes)
	slices.SortFunc(ring, func(a, b *Node) int { return a.ID.Compare(b.ID) })
	return ring
}

// RingLinked returns nil when every node's up links are exactly those to
// the successors nodes on either side of it in ring order: the links a
// ring without long-distance or on-demand links settles on, once the
// links a node made while it looked for its place are closed. Otherwise
// it names the first node whose links differ.
func RingLinked(nodes []*Node, successors int) error {
	ring := ByRing(nodes)
	names := map[string]string{}
	for _, node := range ring {
		names[node.ID.String()] = node.Name
	}
	for i, node := range ring {
		want := map[string]bool{}
		for k := 1; k <= successors; k++ {
			for _, j := range []int{i + k, i - k} {
				if peer := ring[(j%len(ring)+len(ring))%len(ring)]; peer != node {
					want[peer.ID.String()] = true
				}
			}
		}
		st, err := node.Status()
		if err != nil {
			return fmt.Errorf("%s: %w", node.Name, err)
		}
		up := map[string]bool{}
		for _, l := range st.Links {
			if l.State == "up" {
				up[l.NodeID] = true
			}
		}
		if !maps.Equal(up, want) {
			return fmt.Errorf("%s has links up to %s, want %s", node.Name, peerNames(up, names), peerNames(want, names))
		}
	}
	return nil
}

// peerNames renders a set of node IDs as sorted names ("none" for an empty
// set); an ID of no node is shown as such.
func peerNames(ids map[string]bool, names map[string]string) string {
	if len(ids) == 0 {
		return "none"
	}
	var out []string
	for id := range ids {
		name, ok := names[id]
		if !ok {
			name = id
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// SentBytes is what the node has sent over all its current links so far,
// 0 when its status cannot be read (it is not running).
func (node *Node) SentBytes() uint64 {
	st, err := node.Status()
	if err != nil {
		return 0
	}
	var total uint64
	for _, l := range st.Links {
		total += l.TxBytes
	}
	return total
}

// Forwarding returns the nodes, other than the ends of a flow, that sent
// at least minBytes over their links during window: the bridges the flow
// crosses while it runs, in the order of nodes. Overlay upkeep sends a few
// hundred bytes a second, so minBytes set to a fraction of what the flow
// carries in window tells the two apart. It returns nil when ctx ends.
func Forwarding(ctx context.Context, nodes []*Node, window time.Duration, minBytes uint64, ends ...*Node) []*Node {
	before := make([]uint64, len(nodes))
	for i, n := range nodes {
		before[i] = n.SentBytes()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(window):
	}
	var out []*Node
	for i, n := range nodes {
		// A node restarted meanwhile counts from zero again.
		if sent := n.SentBytes(); !slices.Contains(ends, n) && sent > before[i] && sent-before[i] >= minBytes {
			out = append(out, n)
		}
	}
	return out
}
