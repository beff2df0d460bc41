package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// peerLink is one row of `burrow peers --json`, what these tests read.
type peerLink struct {
	NodeID   string `json:"node_id"`
	State    string `json:"state"`
	Path     string `json:"path"`
	Endpoint string `json:"endpoint"` // relay:<short ID of the relay> on a relayed path
}

// burrowPeers runs `burrow peers --json` on node's daemon; its links by
// peer node ID, nil when the daemon does not answer.
func burrowPeers(node *cluster.Node) map[string]peerLink {
	out, err := exec.Command(burrowBin, "peers", "--json", "--socket", node.Config.ControlSocket).Output()
	if err != nil {
		return nil
	}
	var rows []peerLink
	if json.Unmarshal(out, &rows) != nil {
		return nil
	}
	links := map[string]peerLink{}
	for _, r := range rows {
		links[r.NodeID] = r
	}
	return links
}

// relayOf is the member that relays a's link to b as a's `burrow peers`
// names it, nil when the link is not up on a relay through one of
// members.
func relayOf(a, b *cluster.Node, members []*cluster.Node) *cluster.Node {
	l, ok := burrowPeers(a)[b.ID.String()]
	if !ok || l.State != "up" || l.Path != "relay" {
		return nil
	}
	for _, m := range members {
		if l.Endpoint == "relay:"+m.ID.Short() {
			return m
		}
	}
	return nil
}

// TestMemberRelaysCarryHardPairsWithoutTheBeacon: a beacon, three public
// members that relay, and members behind symmetric and
// endpoint-independent NATs, every pair linked, birthday probing off. With
// the beacon stopped, the pairs that cannot go direct (symmetric with
// symmetric or with endpoint-independent) relay through public members, at least two of
// them carrying pairs, and ping; killing the member that carries the most
// pairs moves them to the others, and they ping again.
func TestMemberRelaysCarryHardPairsWithoutTheBeacon(t *testing.T) {
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "relay", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	bh, err := lab.AddHost("beacon")
	if err != nil {
		t.Fatal(err)
	}
	beacon, err := nw.AddNode(bh, "beacon", virtual(0))
	if err != nil {
		t.Fatal(err)
	}
	beacon.Config.Beacon.Enabled = true
	var public, symmetric, natted []*cluster.Node
	on := true
	for i, spec := range []struct {
		name string
		nat  netlab.NAT
	}{{"pub1", netlab.NoNAT}, {"pub2", netlab.NoNAT}, {"pub3", netlab.NoNAT},
		{"sym1", netlab.Symmetric}, {"sym2", netlab.Symmetric}, {"sym3", netlab.Symmetric},
		{"ei1", netlab.EndpointIndependent}, {"ei2", netlab.EndpointIndependent}} {
		node := addMember(t, lab, nw, spec.name, spec.nat, i+1)
		switch spec.nat {
		case netlab.NoNAT:
			node.Config.Relay.Enabled = &on
			public = append(public, node)
		case netlab.Symmetric:
			symmetric = append(symmetric, node)
			natted = append(natted, node)
		default:
			natted = append(natted, node)
		}
	}
	for _, node := range nw.Nodes {
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		node.Config.Overlay.Successors = len(nw.Nodes) - 1 // a full mesh: every pair gets a link
		node.Config.Overlay.Stabilize = time.Second
		// Without birthday probing, symmetric with endpoint-independent
		// stays relayed too: nine pairs for three relays to share.
		node.Config.NAT.PunchBudget = -1
		if node != beacon {
			node.Config.Beacons = []config.BeaconRef{configBeacon(beacon)}
		}
	}
	// The pairs that cannot go direct: a symmetric NAT with another one or
	// (birthday probing off) with an endpoint-independent NAT.
	var hard [][2]*cluster.Node
	for i, a := range symmetric {
		for _, b := range natted[i+1:] {
			hard = append(hard, [2]*cluster.Node{a, b})
		}
	}
	startAll(t, nw)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}
	for _, p := range hard {
		if err := cluster.WaitFor(ctxFor(t, 30*time.Second), fmt.Sprintf("%s-%s relayed", p[0].Name, p[1].Name), func() bool {
			return p[0].PathTo(p[1]) == "relay" && p[1].PathTo(p[0]) == "relay"
		}); err != nil {
			t.Fatalf("%v (now %q/%q)", err, p[0].PathTo(p[1]), p[1].PathTo(p[0]))
		}
	}

	if err := beacon.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	members := append(append([]*cluster.Node(nil), public...), natted...)
	carried := relayedPairs(t, hard, public, 60*time.Second)
	t.Logf("beacon stopped; every hard pair relayed through a public member %v later", time.Since(stopped).Round(100*time.Millisecond))
	logCarried(t, carried)
	if len(carried) < 2 {
		t.Errorf("all %d hard pairs relay through one member; the load must spread over the public members", len(hard))
	}
	pingAll(t, members, 60*time.Second)
	checkRelaysCarry(t, carried)

	// Kill the member that carries the most pairs, without a word.
	var busiest *cluster.Node
	for r, pairs := range carried {
		if busiest == nil || len(pairs) > len(carried[busiest]) || (len(pairs) == len(carried[busiest]) && r.Name < busiest.Name) {
			busiest = r
		}
	}
	if err := busiest.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var rest []*cluster.Node
	for _, p := range public {
		if p != busiest {
			rest = append(rest, p)
		}
	}
	moved := relayedPairs(t, carried[busiest], rest, 60*time.Second)
	t.Logf("%s killed; its %d pairs relayed through other members %v later", busiest.Name, len(carried[busiest]), time.Since(killed).Round(100*time.Millisecond))
	logCarried(t, moved)
	pingAll(t, append(rest, natted...), 60*time.Second)
	checkRelaysCarry(t, moved)
}

// relayedPairs waits until both ends of every pair report their link up
// on a relay through one of relays, the same one, and returns the pairs
// each relay carries.
func relayedPairs(t *testing.T, pairs [][2]*cluster.Node, relays []*cluster.Node, deadline time.Duration) map[*cluster.Node][][2]*cluster.Node {
	t.Helper()
	carried := map[*cluster.Node][][2]*cluster.Node{}
	ctx := ctxFor(t, deadline)
	for _, p := range pairs {
		var r *cluster.Node
		err := cluster.WaitFor(ctx, fmt.Sprintf("%s-%s relayed through one of %s", p[0].Name, p[1].Name, names(relays)), func() bool {
			r = relayOf(p[0], p[1], relays)
			return r != nil && relayOf(p[1], p[0], relays) == r
		})
		if err != nil {
			a, b := burrowPeers(p[0])[p[1].ID.String()], burrowPeers(p[1])[p[0].ID.String()]
			t.Fatalf("%v (now %s %s / %s %s)", err, a.Path, a.Endpoint, b.Path, b.Endpoint)
		}
		carried[r] = append(carried[r], p)
	}
	return carried
}

// checkRelaysCarry checks, in each relay's own counters, that it carried
// the traffic of the pairs both ends say it relays: 20 pings each.
func checkRelaysCarry(t *testing.T, carried map[*cluster.Node][][2]*cluster.Node) {
	t.Helper()
	for r, pairs := range carried {
		for _, p := range pairs {
			before := relayedBetween(t, r, p[0], p[1])
			if res, err := netlab.Ping(ctxFor(t, 20*time.Second), p[0].Host, p[1].Address.Addr(), 20, 10*time.Millisecond); err != nil || res.Received != 20 {
				t.Errorf("%s to %s through %s: %+v %v", p[0].Name, p[1].Name, r.Name, res, err)
			}
			if got := relayedBetween(t, r, p[0], p[1]) - before; got < 40 {
				t.Errorf("%s relayed %d %s-%s datagrams for 20 pings", r.Name, got, p[0].Name, p[1].Name)
			}
		}
	}
}

func logCarried(t *testing.T, carried map[*cluster.Node][][2]*cluster.Node) {
	for r, pairs := range carried {
		var s []string
		for _, p := range pairs {
			s = append(s, p[0].Name+"-"+p[1].Name)
		}
		t.Logf("  %s relays %s", r.Name, strings.Join(s, ", "))
	}
}

func names(nodes []*cluster.Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}
