package e2e

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// natNetwork is a beacon on the internet and one node per site, each site
// behind its own router; every node knows only the beacon's address.
type natNetwork struct {
	lab    *netlab.Lab
	net    *cluster.Network
	beacon *cluster.Node
	sites  map[string]*netlab.Site
	nodes  map[string]*cluster.Node
}

func newNATNetwork(t *testing.T, sites map[string]netlab.NAT) *natNetwork {
	t.Helper()
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "nat", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	n := &natNetwork{lab: lab, net: nw, sites: map[string]*netlab.Site{}, nodes: map[string]*cluster.Node{}}
	bh, err := lab.AddHost("beacon")
	if err != nil {
		t.Fatal(err)
	}
	n.beacon, err = nw.AddNode(bh, "beacon", virtual(0))
	if err != nil {
		t.Fatal(err)
	}
	n.beacon.Config.Beacon.Enabled = true
	i := 1
	for _, name := range sortedKeys(sites) {
		site, err := lab.AddSite(name, sites[name])
		if err != nil {
			t.Fatal(err)
		}
		host, err := site.AddHost(name + "h")
		if err != nil {
			t.Fatal(err)
		}
		node, err := nw.AddNode(host, name, virtual(i))
		if err != nil {
			t.Fatal(err)
		}
		n.sites[name], n.nodes[name] = site, node
		i++
	}
	for _, node := range nw.Nodes {
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		node.Config.Overlay.Successors = len(nw.Nodes) - 1 // a full mesh: every pair gets a link
		node.Config.Overlay.Stabilize = time.Second
		if node != n.beacon {
			node.Config.Beacons = append(node.Config.Beacons, configBeacon(n.beacon))
		}
	}
	return n
}

// pathBetween is the path kind of a's link to b, "" without a link.
func pathBetween(a, b *cluster.Node) string {
	st, err := a.Status()
	if err != nil {
		return ""
	}
	for _, l := range st.Links {
		if l.NodeID == b.ID.String() && l.State == "up" {
			return l.Path
		}
	}
	return ""
}

// TestNATTraversalPicksTheRightPath: nodes behind endpoint-independent NATs
// link directly (hole punching through the beacon's signaling); nodes
// behind symmetric NATs fall back to the beacon's relay; every pair pings.
func TestNATTraversalPicksTheRightPath(t *testing.T) {
	n := newNATNetwork(t, map[string]netlab.NAT{
		"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent,
		"c1": netlab.Symmetric, "c2": netlab.Symmetric,
	})
	start := time.Now()
	startAll(t, n.net)
	all := n.net.Nodes
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return ringConsistent(all) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("ring of %d consistent %v after start", len(all), time.Since(start).Round(100*time.Millisecond))
	want := map[[2]string]string{
		{"a", "b"}: "direct", {"c1", "c2"}: "relay", {"a", "c1"}: "relay", {"b", "c2"}: "relay",
	}
	for pair, path := range want {
		a, b := n.nodes[pair[0]], n.nodes[pair[1]]
		err := cluster.WaitFor(ctxFor(t, 30*time.Second), fmt.Sprintf("%s-%s %s", pair[0], pair[1], path), func() bool {
			return pathBetween(a, b) == path && pathBetween(b, a) == path
		})
		if err != nil {
			t.Errorf("%v (paths now %q/%q)", err, pathBetween(a, b), pathBetween(b, a))
		}
	}
	pingAll(t, all, 60*time.Second)
	// A–B traffic never touches the beacon's relay; C1–C2 traffic does.
	a, b := n.nodes["a"], n.nodes["b"]
	c1, c2 := n.nodes["c1"], n.nodes["c2"]
	abBefore, c12Before := relayedBetween(t, n.beacon, a, b), relayedBetween(t, n.beacon, c1, c2)
	if r, err := netlab.Ping(ctxFor(t, 20*time.Second), a.Host, b.Address.Addr(), 50, 10*time.Millisecond); err != nil || r.Received != 50 {
		t.Fatalf("a-b ping: %+v %v", r, err)
	}
	if r, err := netlab.Ping(ctxFor(t, 20*time.Second), c1.Host, c2.Address.Addr(), 20, 10*time.Millisecond); err != nil || r.Received != 20 {
		t.Fatalf("c1-c2 ping: %+v %v", r, err)
	}
	if got := relayedBetween(t, n.beacon, a, b) - abBefore; got != 0 {
		t.Errorf("the beacon relayed %d a-b datagrams although their link is direct", got)
	}
	if got := relayedBetween(t, n.beacon, c1, c2) - c12Before; got < 40 {
		t.Errorf("the beacon relayed %d c1-c2 datagrams for 20 pings", got)
	}
}

// relayedBetween is how many datagrams relay r carried between a and b,
// both ways.
func relayedBetween(t *testing.T, r, a, b *cluster.Node) uint64 {
	st, err := r.Status()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range st.RelayPairs {
		if (p.From == a.ID.String() && p.To == b.ID.String()) || (p.From == b.ID.String() && p.To == a.ID.String()) {
			n += p.Datagrams
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func configBeacon(b *cluster.Node) config.BeaconRef {
	return config.BeaconRef{Address: b.Endpoint().String()}
}
