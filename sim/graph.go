package sim

import (
	"slices"

	"burrow/nid"
)

// Graph is the overlay as the running nodes see it: an edge joins two
// nodes when each lists the other in its adjacency.
type Graph struct {
	// Adj lists each node's neighbours by index, ascending; nil for nodes
	// that are down.
	Adj [][]int
	ids []nid.ID
}

// Graph snapshots the overlay graph.
func (s *Sim) Graph() Graph {
	g := Graph{Adj: make([][]int, len(s.nodes)), ids: make([]nid.ID, len(s.nodes))}
	lists := make([]map[nid.ID]bool, len(s.nodes))
	for i, n := range s.nodes {
		g.ids[i] = n.ID
		if n.up {
			lists[i] = map[nid.ID]bool{}
			for _, id := range n.core.Adjacency() {
				lists[i][id] = true
			}
		}
	}
	for i, n := range s.nodes {
		for id := range lists[i] {
			if j, ok := s.indexOf(id); ok && lists[j] != nil && lists[j][n.ID] {
				g.Adj[i] = append(g.Adj[i], j)
			}
		}
		slices.Sort(g.Adj[i])
	}
	return g
}

// Edges counts the graph's edges.
func (g Graph) Edges() int {
	sum := 0
	for _, a := range g.Adj {
		sum += len(a)
	}
	return sum / 2
}

// Tree is a spanning tree: each node's parent (-1 for the root and for
// nodes outside the tree) and depth.
type Tree struct {
	Root   int
	Parent []int
	Depth  []int
}

// SpanningTree computes the tree 802.1D converges to on this graph when
// every link costs the same: the root is the node with the lowest ID, and
// each other node's root port leads to the neighbour on a shortest path
// to the root, ties going to the neighbour with the lower ID. Only tree
// links forward; the rest are blocked.
func (g Graph) SpanningTree() Tree {
	t := Tree{Root: -1, Parent: make([]int, len(g.Adj)), Depth: make([]int, len(g.Adj))}
	for i := range t.Parent {
		t.Parent[i], t.Depth[i] = -1, -1
		if g.Adj[i] != nil && (t.Root < 0 || g.ids[i].Compare(g.ids[t.Root]) < 0) {
			t.Root = i
		}
	}
	if t.Root < 0 {
		return t
	}
	t.Depth[t.Root] = 0
	frontier := []int{t.Root}
	for len(frontier) > 0 {
		var next []int
		for _, u := range frontier {
			for _, v := range g.Adj[u] {
				switch {
				case t.Depth[v] < 0:
					t.Depth[v], t.Parent[v] = t.Depth[u]+1, u
					next = append(next, v)
				case t.Depth[v] == t.Depth[u]+1 && g.ids[u].Compare(g.ids[t.Parent[v]]) < 0:
					t.Parent[v] = u
				}
			}
		}
		frontier = next
	}
	return t
}

// Path returns the nodes from a to b along the tree, nil if either is
// outside it.
func (t Tree) Path(a, b int) []int {
	if t.Depth[a] < 0 || t.Depth[b] < 0 {
		return nil
	}
	var up, down []int
	for t.Depth[a] > t.Depth[b] {
		up, a = append(up, a), t.Parent[a]
	}
	for t.Depth[b] > t.Depth[a] {
		down, b = append(down, b), t.Parent[b]
	}
	for a != b {
		up, a = append(up, a), t.Parent[a]
		down, b = append(down, b), t.Parent[b]
	}
	up = append(up, a)
	slices.Reverse(down)
	return append(up, down...)
}
