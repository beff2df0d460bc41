package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// failoverBuild is one burrow binary being measured.
type failoverBuild struct {
	// Label is "baseline" or "current".
	Label  string
	Binary string
}

func (b *failoverBuild) String() string { return b.Label }

// newFailoverBuild checks that the binary exists.
func newFailoverBuild(label, binary string) (*failoverBuild, error) {
	binary, err := filepath.Abs(binary)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("%s binary: %w", label, err)
	}
	return &failoverBuild{Label: label, Binary: binary}, nil
}

// ringShape is how the daemons of a ring are set up. Link timers stay the
// defaults a user gets. Nodes join through the first and stabilize every
// ringStabilize, as in the e2e churn test, so that a restarted node finds
// its place within seconds.
type ringShape struct {
	// name names the lab and the network.
	name string
	// successors is overlay.successors; there are neither long-distance
	// nor on-demand links, so that a flow between distant nodes crosses
	// the nodes in between.
	successors int
	// arpAnswer is services.arp_answer.
	arpAnswer bool
}

// failoverShape is the EdgeVPN seed's churn setting: two successors.
var failoverShape = ringShape{name: "failover", successors: 2, arpAnswer: true}

const (
	ringStabilize = time.Second
	// ringTimeout bounds the ring settling, at the start or after a
	// restart.
	ringTimeout = 90 * time.Second
	// reachTimeout bounds the first ping between a flow's two ends.
	reachTimeout = 20 * time.Second
)

// ringSubnet holds the nodes' virtual addresses.
var ringSubnet = netip.MustParsePrefix("10.79.0.0/24")

// daemonRing is a ring of daemons, all running one build, on the
// internet of its own lab: one bridge, no NAT.
type daemonRing struct {
	build    *failoverBuild
	shape    ringShape
	lab      *netlab.Lab
	nodes    []*cluster.Node // in ring order
	progress io.Writer
}

// startRing builds a lab with size daemons of the build, set up as the
// shape says, and waits for their ring to settle. The caller closes the
// ring.
func startRing(ctx context.Context, build *failoverBuild, shape ringShape, size int, progress io.Writer) (*daemonRing, error) {
	fmt.Fprintf(progress, "== %s: a ring of %d\n", build, size)
	lab, err := newLab("burrow-bench-"+shape.name+"-", progress)
	if err != nil {
		return nil, err
	}
	r := &daemonRing{build: build, shape: shape, lab: lab, progress: progress}
	if err := r.start(ctx, size); err != nil {
		return nil, errors.Join(fmt.Errorf("%s ring: %w", build.Label, err), r.close())
	}
	return r, nil
}

// start adds size nodes to the lab, starts them and waits for their
// ring.
func (r *daemonRing) start(ctx context.Context, size int) error {
	nw, err := cluster.New(r.lab, r.shape.name, r.build.Binary)
	if err != nil {
		return err
	}
	nodes, err := nw.AddJoiningRing(size, ringSubnet)
	if err != nil {
		return err
	}
	off := false
	for _, node := range nodes {
		// Debug logging would cost the data path time it does not spend
		// in production.
		node.Config.Log.Level = "info"
		node.Config.Overlay.Successors = r.shape.successors
		node.Config.Overlay.LongDistance = "0"
		node.Config.Overlay.OnDemand.Enabled = &off
		node.Config.Overlay.Stabilize = ringStabilize
		if !r.shape.arpAnswer {
			// Only when off: the key stays out of the configuration
			// of builds that may predate it.
			node.Config.Services.ARPAnswer = &off
		}
	}
	r.nodes = cluster.ByRing(nw.Nodes)
	// The others join through the first: it goes first, so that their
	// first handshakes find it listening.
	start := time.Now()
	first := nw.Nodes[0]
	if err := first.Start(); err != nil {
		return err
	}
	answerCtx, cancel := context.WithTimeout(ctx, ringTimeout)
	defer cancel()
	if err := r.running().waitFor(answerCtx, first.Name+" to answer", func() bool {
		_, err := first.Status()
		return err == nil
	}); err != nil {
		return err
	}
	if err := startAll(nw.Nodes[1:]); err != nil {
		return err
	}
	if err := r.waitSettled(ctx); err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "   ring settled %s s after the start\n", seconds(time.Since(start)))
	return nil
}

func (r *daemonRing) close() error { return r.lab.Close() }

// ends are the ends of the measured flows: the first node in ring order
// and the one opposite.
func (r *daemonRing) ends() (source, destination *cluster.Node) {
	return r.nodes[0], r.nodes[len(r.nodes)/2]
}

// position is the node's index in ring order: the source is 0.
func (r *daemonRing) position(n *cluster.Node) int {
	for i, m := range r.nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// describe names a node with its ring position, for progress and report.
func (r *daemonRing) describe(n *cluster.Node) string {
	return fmt.Sprintf("%s (position %d)", n.Name, r.position(n))
}

// running is a tunnel of the daemons now running, to wait on: a daemon
// that exits (a crash, or a configuration the binary rejects) ends the
// wait at once.
func (r *daemonRing) running() *tunnel {
	t := &tunnel{}
	for _, n := range r.nodes {
		if n.Process != nil {
			t.add(fmt.Sprintf("%s (log %s)", n.Name, n.Process.LogPath()), n.Process)
		}
	}
	return t
}

// waitSettled waits until the ring is consistent and every node is linked
// to exactly its ring neighbours. Until then the overlay still closes the
// links its nodes made while finding their places, and a flow on one of
// them would be cut by that rather than by the failure measured.
func (r *daemonRing) waitSettled(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ringTimeout)
	defer cancel()
	var unsettled error
	err := r.running().waitFor(ctx, "a settled ring", func() bool {
		if _, misplaced := cluster.Placed(r.nodes); len(misplaced) > 0 {
			unsettled = fmt.Errorf("%s not placed on the ring", misplaced[0].Name)
			return false
		}
		unsettled = cluster.RingLinked(r.nodes, r.shape.successors)
		return unsettled == nil
	})
	if err != nil {
		return fmt.Errorf("%w: %v", err, unsettled)
	}
	return nil
}

// restartStopped starts every node that is not running and waits for the
// ring to settle again.
func (r *daemonRing) restartStopped(ctx context.Context) error {
	for _, n := range r.nodes {
		if n.Process != nil {
			continue
		}
		fmt.Fprintf(r.progress, "   restarting %s\n", r.describe(n))
		if err := n.Start(); err != nil {
			return err
		}
	}
	return r.waitSettled(ctx)
}

// waitReachable waits for a ping from one node to the other's virtual
// address; the first also floods the ARP request and teaches the path.
func (r *daemonRing) waitReachable(ctx context.Context, from, to *cluster.Node) error {
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	return r.running().waitFor(ctx, fmt.Sprintf("a ping from %s to %s", from.Name, to.Name), func() bool {
		res, err := netlab.Ping(ctx, from.Host, to.Address.Addr(), 1, 200*time.Millisecond)
		return err == nil && res.Received == 1
	})
}

// bridges returns the nodes that forwarded at least minBytes of a flow
// between source and destination during window.
func (r *daemonRing) bridges(ctx context.Context, window time.Duration, minBytes uint64) []*cluster.Node {
	source, destination := r.ends()
	return cluster.Forwarding(ctx, r.nodes, window, minBytes, source, destination)
}
