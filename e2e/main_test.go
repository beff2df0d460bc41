// Package e2e runs real burrow processes in network namespaces and drives
// them with real tools: ping, arping, iperf3, tcpdump. Tests skip with the
// reason when namespaces cannot be created here (not root, no iproute2).
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// burrowBin is the burrow executable built once for all tests.
var burrowBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "burrow-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	burrowBin = filepath.Join(dir, "burrow")
	build := exec.Command("go", "build", "-o", burrowBin, "burrow/cmd/burrow")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as released: see the Makefile
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building burrow:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// virtual returns the i-th virtual address of the test network.
func virtual(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, 0, byte(i + 1)}), 24)
}

// newNetwork makes a lab with n internet hosts, one burrow node on each,
// with fast failure detection so tests do not wait long. Self-organization
// is off: the tests link the nodes as they want.
func newNetwork(t *testing.T, n int) (*netlab.Lab, *cluster.Network) {
	lab, nw := newSelfOrganizing(t, n)
	off := false
	for _, node := range nw.Nodes {
		node.Config.Overlay.Enabled = &off
	}
	return lab, nw
}

// newSelfOrganizing is newNetwork with the overlay on.
func newSelfOrganizing(t *testing.T, n int) (*netlab.Lab, *cluster.Network) {
	t.Helper()
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "e2e", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		host, err := lab.AddHost(fmt.Sprintf("h%d", i))
		if err != nil {
			t.Fatal(err)
		}
		node, err := nw.AddNode(host, fmt.Sprintf("n%d", i), virtual(i))
		if err != nil {
			t.Fatal(err)
		}
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 2 * time.Second
	}
	return lab, nw
}

// newJoiningRing is newSelfOrganizing with every node joining through the
// first and stabilizing every second, so that rings form quickly.
func newJoiningRing(t *testing.T, n int) (*netlab.Lab, *cluster.Network) {
	t.Helper()
	lab, nw := newSelfOrganizing(t, n)
	first := nw.Nodes[0]
	for _, node := range nw.Nodes {
		node.Config.Overlay.Stabilize = time.Second
		if node != first {
			node.Config.Overlay.Bootstrap = []string{first.Endpoint().String()}
		}
	}
	return lab, nw
}

// startRing starts every node and waits for their ring to be consistent.
func startRing(t *testing.T, nw *cluster.Network) {
	t.Helper()
	startAll(t, nw)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}
}

func startAll(t *testing.T, nw *cluster.Network) {
	t.Helper()
	for _, node := range nw.Nodes {
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
	}
	// A daemon that exits at once (a configuration it refuses, a socket
	// taken) fails the test here, by name, rather than as a timeout later.
	for _, node := range nw.Nodes {
		var exited bool
		err := cluster.WaitFor(ctxFor(t, 30*time.Second), node.Name+"'s control socket to answer", func() bool {
			if exited = node.Process.Exited(); exited {
				return true
			}
			_, err := node.Status()
			return err == nil
		})
		switch {
		case exited:
			t.Fatalf("%s exited right after it started: %v (its log follows)", node.Name, node.Process.Wait())
		case err != nil:
			t.Fatal(err)
		}
	}
}

// byRing returns the nodes sorted by node ID, i.e. in ring order.
func byRing(nw *cluster.Network) []*cluster.Node {
	nodes := append([]*cluster.Node(nil), nw.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID.Compare(nodes[j].ID) < 0 })
	return nodes
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// pingAll checks that every node reaches every other node's virtual
// address, retrying each pair until deadline.
func pingAll(t *testing.T, nodes []*cluster.Node, deadline time.Duration) {
	t.Helper()
	pingEveryPair(t, nodes, func(n *cluster.Node) netip.Addr { return n.Address.Addr() }, deadline)
}

// pingEveryPair checks that every node reaches every other node at the
// address addrOf gives it, retrying each pair until deadline.
func pingEveryPair(t *testing.T, nodes []*cluster.Node, addrOf func(*cluster.Node) netip.Addr, deadline time.Duration) {
	t.Helper()
	ctx := ctxFor(t, deadline)
	for _, a := range nodes {
		for _, b := range nodes {
			if a == b {
				continue
			}
			err := cluster.WaitFor(ctx, fmt.Sprintf("%s to ping %s at %v", a.Name, b.Name, addrOf(b)), func() bool {
				r, err := netlab.Ping(ctx, a.Host, addrOf(b), 1, 200*time.Millisecond)
				return err == nil && r.Received == 1
			})
			if err != nil {
				t.Error(err)
			}
		}
	}
}

// inside opens a socket from within a lab host's namespace; it stays
// there afterwards, so the test talks from inside the lab.
func inside[T any](h *netlab.Host, open func() (T, error)) (T, error) {
	var sock T
	err := h.Do(func() (err error) {
		sock, err = open()
		return err
	})
	return sock, err
}
