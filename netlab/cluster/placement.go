package cluster

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"burrow/runtime"
)

// AddJoiningRing adds count hosts on the lab's internet (one bridge, no
// NAT), each with a node whose virtual address is the next of subnet, and
// gives every node but the first the first as its only bootstrap contact:
// a network as a new user sets one up, every other setting left at its
// default. Hosts are named h0, h1, …, nodes n0, n1, … in that order.
func (n *Network) AddJoiningRing(count int, subnet netip.Prefix) ([]*Node, error) {
	if room := 1<<(32-subnet.Bits()) - 2; count > room {
		return nil, fmt.Errorf("cluster: %d nodes do not fit in %s", count, subnet)
	}
	var nodes []*Node
	for i := range count {
		host, err := n.Lab.AddHost(fmt.Sprintf("h%d", i))
		if err != nil {
			return nil, err
		}
		node, err := n.AddNode(host, fmt.Sprintf("n%d", i), netip.PrefixFrom(nthAddr(subnet, i+1), subnet.Bits()))
		if err != nil {
			return nil, err
		}
		if i > 0 {
			node.Config.Overlay.Bootstrap = []string{nodes[0].Endpoint().String()}
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// nthAddr returns the IPv4 address n places after the start of p.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	base := p.Masked().Addr().As4()
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], binary.BigEndian.Uint32(base[:])+uint32(n))
	return netip.AddrFrom4(out)
}

// Label names the node for people: its name and the first 8 hex digits
// of its ID, as "n5 (3fa1c2d0)".
func (node *Node) Label() string {
	return fmt.Sprintf("%s (%s)", node.Name, shortID(node.ID.String()))
}

// shortID is the first 8 hex digits of a node ID, enough to tell the
// nodes of a lab apart.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// Place is one node's place on the ring as its own status shows it, beside
// its true neighbours by node ID.
type Place struct {
	Node *Node
	// Status is the node's status, nil when it could not be read (Err
	// says why: not running, or too busy to answer in time).
	Status *runtime.Status
	Err    error
	// ReadAt is when the status was read.
	ReadAt time.Time
	// Successor and Predecessor are the node's true neighbours: the next
	// and the previous of the snapshot's nodes by node ID.
	Successor, Predecessor *Node
}

// Joined says the node reports that it has found its place on the ring.
func (p Place) Joined() bool { return p.Status != nil && p.Status.Overlay.Joined }

// SuccessorRight says the node's first successor is its true one.
func (p Place) SuccessorRight() bool {
	return p.Status != nil && len(p.Status.Overlay.Successors) > 0 && p.Status.Overlay.Successors[0] == p.Successor.ID.String()
}

// PredecessorRight says the node's predecessor is its true one.
func (p Place) PredecessorRight() bool {
	return p.Status != nil && p.Status.Overlay.Predecessor == p.Predecessor.ID.String()
}

// Placed says the node is joined and both of its ring neighbours are its
// true ones. A restarted node knows its old neighbours from the peers it
// saved before it joins again, so the neighbours alone do not say it is
// back on the ring.
func (p Place) Placed() bool { return p.Joined() && p.SuccessorRight() && p.PredecessorRight() }

// RingSnapshot is every node's status read once, in ring order.
type RingSnapshot struct {
	Places []Place
	byID   map[string]*Node
}

// StatusReaders is how many statuses a snapshot reads at once: enough to
// read hundreds of nodes in about a second, few enough not to crowd out
// the daemons on a small machine.
const StatusReaders = 8

// TakeRingSnapshot reads the status of every node, several at a time.
func TakeRingSnapshot(nodes []*Node) RingSnapshot {
	ring := ByRing(nodes)
	s := RingSnapshot{Places: make([]Place, len(ring)), byID: map[string]*Node{}}
	for _, node := range ring {
		s.byID[node.ID.String()] = node
	}
	EachNode(ring, func(i int, node *Node) {
		p := Place{Node: node, Successor: ring[(i+1)%len(ring)], Predecessor: ring[(i+len(ring)-1)%len(ring)]}
		p.Status, p.Err = node.Status()
		p.ReadAt = time.Now()
		s.Places[i] = p
	})
	return s
}

// EachNode runs fn for every node, StatusReaders at once, and returns when
// every call has.
func EachNode(nodes []*Node, fn func(i int, node *Node)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(StatusReaders, len(nodes)) {
		wg.Go(func() {
			for i := range work {
				fn(i, nodes[i])
			}
		})
	}
	for i := range nodes {
		work <- i
	}
	close(work)
	wg.Wait()
}

// Joined counts the nodes that report being joined.
func (s RingSnapshot) Joined() int { return s.count(Place.Joined) }

// Placed counts the nodes that are placed.
func (s RingSnapshot) Placed() int { return s.count(Place.Placed) }

// Unreadable counts the nodes whose status could not be read.
func (s RingSnapshot) Unreadable() int {
	return s.count(func(p Place) bool { return p.Status == nil })
}

// Consistent says the ring is the true order of the node IDs: every node
// is joined, with its true successor first and its true predecessor.
func (s RingSnapshot) Consistent() bool { return s.Placed() == len(s.Places) }

// Misplaced returns the places of the nodes that are not placed.
func (s RingSnapshot) Misplaced() []Place {
	return slices.DeleteFunc(slices.Clone(s.Places), Place.Placed)
}

func (s RingSnapshot) count(holds func(Place) bool) int {
	n := 0
	for _, p := range s.Places {
		if holds(p) {
			n++
		}
	}
	return n
}

// Describe says what the node's status shows against the truth, as
// "n5 (3fa1c2d0): joined, successor n7 (1a2b3c4d) (want n9 (0c1d2e3f)),
// predecessor right, 6 links up", with its handshake counts when it has
// no link up.
func (s RingSnapshot) Describe(p Place) string {
	if p.Status == nil {
		return fmt.Sprintf("%s: status unreadable: %v", p.Node.Label(), p.Err)
	}
	joined := "not joined"
	if p.Joined() {
		joined = "joined"
	}
	successor := ""
	if len(p.Status.Overlay.Successors) > 0 {
		successor = p.Status.Overlay.Successors[0]
	}
	links := fmt.Sprintf("%d links up", upLinks(p.Status))
	if upLinks(p.Status) == 0 {
		// Why a node is alone: its handshakes fail, or it sends none.
		hs := p.Status.Handshakes
		links += fmt.Sprintf(" (handshakes: %d started, %d completed, %d rate-limited)", hs.Started, hs.Completed, hs.RateLimited)
	}
	return fmt.Sprintf("%s: %s, successor %s, predecessor %s, %s", p.Node.Label(), joined,
		s.neighbour(successor, p.Successor), s.neighbour(p.Status.Overlay.Predecessor, p.Predecessor), links)
}

// neighbour renders a neighbour a node reports against the true one.
func (s RingSnapshot) neighbour(reported string, truth *Node) string {
	if reported == truth.ID.String() {
		return "right"
	}
	want := "want " + truth.Label()
	switch node := s.byID[reported]; {
	case reported == "":
		return "none (" + want + ")"
	case node == nil:
		return fmt.Sprintf("%s, not a member (%s)", shortID(reported), want)
	default:
		return fmt.Sprintf("%s (%s)", node.Label(), want)
	}
}

func upLinks(st *runtime.Status) int {
	up := 0
	for _, l := range st.Links {
		if l.State == "up" {
			up++
		}
	}
	return up
}
