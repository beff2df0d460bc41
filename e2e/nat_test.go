package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	for _, name := range sortedKeys(sites) {
		site, err := lab.AddSite(name, sites[name])
		if err != nil {
			t.Fatal(err)
		}
		n.sites[name] = site
		n.addNode(t, site, name)
	}
	return n
}

// addMember adds a node named name on a host of its own: on the lab's
// internet for NoNAT, else alone on a new site behind a NAT of that kind.
func addMember(t *testing.T, lab *netlab.Lab, nw *cluster.Network, name string, nat netlab.NAT, virtualIndex int) *cluster.Node {
	t.Helper()
	var host *netlab.Host
	var err error
	if nat == netlab.NoNAT {
		host, err = lab.AddHost(name)
	} else {
		var site *netlab.Site
		if site, err = lab.AddSite(name, nat); err == nil {
			host, err = site.AddHost(name + "h")
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	node, err := nw.AddNode(host, name, virtual(virtualIndex))
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// addNode adds a node on a new host at site, and makes every node's links
// and overlay fit the network's new size.
func (n *natNetwork) addNode(t *testing.T, site *netlab.Site, name string) *cluster.Node {
	t.Helper()
	host, err := site.AddHost(name + "h")
	if err != nil {
		t.Fatal(err)
	}
	node, err := n.net.AddNode(host, name, virtual(len(n.net.Nodes)))
	if err != nil {
		t.Fatal(err)
	}
	n.nodes[name] = node
	for _, node := range n.net.Nodes {
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		node.Config.Overlay.Successors = len(n.net.Nodes) - 1 // a full mesh: every pair gets a link
		node.Config.Overlay.Stabilize = time.Second
		if node != n.beacon {
			node.Config.Beacons = []config.BeaconRef{configBeacon(n.beacon)}
		}
	}
	return node
}

// TestNATTraversalPicksTheRightPath: nodes behind endpoint-independent NATs
// link directly (hole punching through the beacon's signaling), and with
// nodes behind symmetric NATs too (birthday probing, the symmetric side
// told by the beacon's two STUN ports); two symmetric NATs fall back to
// the beacon's relay; every pair pings.
func TestNATTraversalPicksTheRightPath(t *testing.T) {
	n := newNATNetwork(t, map[string]netlab.NAT{
		"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent,
		"c1": netlab.Symmetric, "c2": netlab.Symmetric,
	})
	start := time.Now()
	startAll(t, n.net)
	all := n.net.Nodes
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(all) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("ring of %d consistent %v after start", len(all), time.Since(start).Round(100*time.Millisecond))
	want := map[[2]string]string{
		{"a", "b"}: "direct", {"c1", "c2"}: "relay", {"a", "c1"}: "direct", {"b", "c2"}: "direct",
	}
	for pair, path := range want {
		a, b := n.nodes[pair[0]], n.nodes[pair[1]]
		err := cluster.WaitFor(ctxFor(t, 30*time.Second), fmt.Sprintf("%s-%s %s", pair[0], pair[1], path), func() bool {
			return a.PathTo(b) == path && b.PathTo(a) == path
		})
		if err != nil {
			t.Errorf("%v (paths now %q/%q)", err, a.PathTo(b), b.PathTo(a))
		}
	}
	// Bulk data crosses the punched path both ways: c1 sends from, and
	// receives on, a spare socket. The floor catches a broken path, not a
	// slow one; the log compares it with b-a's path over main sockets.
	for _, pair := range [][2]string{{"c1", "a"}, {"a", "c1"}, {"b", "a"}} {
		from, to := n.nodes[pair[0]], n.nodes[pair[1]]
		if _, err := netlab.StartIperf3Server(to.Host); err != nil {
			t.Fatal(err)
		}
		res, err := netlab.Iperf3(ctxFor(t, 30*time.Second), from.Host, to.Address.Addr(), 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("iperf3 %s→%s on %s (%s): %.0f Mbit/s, %d retransmits", from.Name, to.Name, from.PathTo(to), from.EndpointTo(to), res.BitsPerSecond/1e6, res.Retransmits)
		if res.BitsPerSecond < 100e6 {
			t.Errorf("iperf3 %s→%s: %.1f Mbit/s; the path is broken", from.Name, to.Name, res.BitsPerSecond/1e6)
		}
	}
	// burrow peers names the path birthday probing opened (once the core
	// noticed, within 50 ms of the path changing).
	var out []byte
	err := cluster.WaitFor(ctxFor(t, 5*time.Second), "burrow peers on c1 to name birthday probing", func() bool {
		out, _ = exec.Command(burrowBin, "peers", "--socket", n.nodes["c1"].Config.ControlSocket).CombinedOutput()
		return strings.Contains(string(out), "direct (birthday probing")
	})
	if err != nil {
		t.Errorf("%v:\n%s", err, out)
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

// newWebSocketNetwork is a natNetwork of a node "a" behind an
// endpoint-independent NAT and a node "d" on a site that lets only TCP 443
// out, with the beacon serving WebSocket (see overWebSocket).
func newWebSocketNetwork(t *testing.T) *natNetwork {
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "d": netlab.UDPBlocked})
	n.overWebSocket()
	return n
}

// overWebSocket has the beacon serve WebSocket on 443 and every node know
// it there too, so that nodes on UDP-blocked sites reach it.
func (n *natNetwork) overWebSocket() {
	ws := netip.AddrPortFrom(n.beacon.Host.Addr, 443)
	n.beacon.Config.Beacon.WebSocket.Listen = ws.String()
	for _, node := range n.nodes {
		node.Config.Beacons[0].WebSocket = "ws://" + ws.String() + "/burrow"
	}
}

// TestUDPBlockedSiteJoinsOverWebSocket: a node whose firewall lets only
// TCP 443 out reaches the beacon over WebSocket and everyone else through
// the beacon's relay; pings and an iperf3 run cross it.
func TestUDPBlockedSiteJoinsOverWebSocket(t *testing.T) {
	n := newWebSocketNetwork(t)
	start := time.Now()
	startAll(t, n.net)
	d, a := n.nodes["d"], n.nodes["a"]
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "d's beacon link over WebSocket", func() bool {
		return d.PathTo(n.beacon) == "websocket"
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("d linked to the beacon over WebSocket %v after start", time.Since(start).Round(100*time.Millisecond))
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(n.net.Nodes) }); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor(ctxFor(t, 30*time.Second), "d-a over the relay", func() bool {
		return d.PathTo(a) == "relay" && a.PathTo(d) == "relay"
	}); err != nil {
		t.Fatalf("%v (now %q/%q)", err, d.PathTo(a), a.PathTo(d))
	}
	pingAll(t, n.net.Nodes, 60*time.Second)
	if _, err := netlab.StartIperf3Server(a.Host); err != nil {
		t.Fatal(err)
	}
	res, err := netlab.Iperf3(ctxFor(t, 30*time.Second), d.Host, a.Address.Addr(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iperf3 d -> a over WebSocket and relay: %.0f Mbit/s", res.BitsPerSecond/1e6)
}

// TestTURNRelaysBetweenSymmetricNATs: with the beacon relaying nothing,
// two nodes behind symmetric NATs reach each other through a standard TURN
// server (Debian's coturn, started by the test).
func TestTURNRelaysBetweenSymmetricNATs(t *testing.T) {
	if _, err := exec.LookPath("turnserver"); err != nil {
		t.Skip("skipping: coturn's turnserver is not installed (apt-get install coturn)")
	}
	n := newNATNetwork(t, map[string]netlab.NAT{"c1": netlab.Symmetric, "c2": netlab.Symmetric})
	turnHost, err := n.lab.AddHost("turn")
	if err != nil {
		t.Fatal(err)
	}
	addr := turnHost.Addr.String()
	if _, err := turnHost.Start("turnserver", "-n", "--listening-ip="+addr, "--relay-ip="+addr, "--listening-port=3478",
		"--lt-cred-mech", "--user=burrow:secret", "--realm=burrow", "--no-tls", "--no-dtls", "--no-cli",
		"--pidfile="+filepath.Join(n.lab.LogDir(), "turn.pid"), "--log-file=stdout", "--simple-log"); err != nil {
		t.Fatal(err)
	}
	if err := turnHost.WaitListening(ctxFor(t, 10*time.Second), "udp", 3478); err != nil {
		t.Fatal(err)
	}
	off := false
	n.beacon.Config.Relay.Enabled = &off
	for _, name := range []string{"c1", "c2"} {
		n.nodes[name].Config.TURN = &config.TURN{Server: addr + ":3478", Username: "burrow", Password: "secret"}
	}
	startAll(t, n.net)
	c1, c2 := n.nodes["c1"], n.nodes["c2"]
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "c1-c2 linked", func() bool {
		return c1.PathTo(c2) != "" && c2.PathTo(c1) != ""
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("c1-c2 paths: %s / %s", c1.PathTo(c2), c2.PathTo(c1))
	if p1, p2 := c1.PathTo(c2), c2.PathTo(c1); p1 != "turn" && p2 != "turn" {
		t.Errorf("neither end uses TURN (%s / %s), yet symmetric NATs and no beacon relay leave nothing else", p1, p2)
	}
	if r, err := netlab.Ping(ctxFor(t, 20*time.Second), c1.Host, c2.Address.Addr(), 20, 10*time.Millisecond); err != nil || r.Received != 20 {
		t.Fatalf("c1-c2 ping through TURN: %+v %v", r, err)
	}
}

// TestLinksSurviveANATMappingChange: flushing a router's connection
// tracking gives its node new mappings; its links follow and keep working.
func TestLinksSurviveANATMappingChange(t *testing.T) {
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent, "c1": netlab.Symmetric})
	startAll(t, n.net)
	a, b, c1 := n.nodes["a"], n.nodes["b"], n.nodes["c1"]
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a-b direct", func() bool {
		return a.PathTo(b) == "direct" && b.PathTo(a) == "direct"
	}); err != nil {
		t.Fatal(err)
	}
	pingAll(t, n.net.Nodes, 60*time.Second)
	for _, site := range []string{"a", "c1"} {
		if err := n.sites[site].FlushConntrack(); err != nil {
			t.Fatal(err)
		}
		flushed := time.Now()
		pingAll(t, []*cluster.Node{a, b, c1, n.beacon}, 30*time.Second)
		t.Logf("after flushing %s's router, all pairs ping again within %v", site, time.Since(flushed).Round(100*time.Millisecond))
	}
}

// TestMembersBehindOneNATLinkOverTheirLAN: two members behind the same
// NAT, endpoint-independent or symmetric, link over their LAN, at each
// other's own addresses, neither hairpinned through the NAT nor relayed;
// status and burrow peers call the path lan, while the paths to a member
// behind an endpoint-independent NAT elsewhere are direct (from behind the
// symmetric NAT by birthday probing).
func TestMembersBehindOneNATLinkOverTheirLAN(t *testing.T) {
	for _, kind := range []netlab.NAT{netlab.EndpointIndependent, netlab.Symmetric} {
		t.Run(kind.String(), func(t *testing.T) {
			n := newNATNetwork(t, map[string]netlab.NAT{"a": kind, "b": netlab.EndpointIndependent})
			a, b := n.nodes["a"], n.nodes["b"]
			a2 := n.addNode(t, n.sites["a"], "a2")
			startAll(t, n.net)
			if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a-a2 over their LAN, a-b and a2-b direct", func() bool {
				return a.PathTo(a2) == "lan" && a2.PathTo(a) == "lan" && a.PathTo(b) == "direct" && a2.PathTo(b) == "direct"
			}); err != nil {
				t.Fatalf("%v (a-a2 %q/%q, a-b %q, a2-b %q)", err, a.PathTo(a2), a2.PathTo(a), a.PathTo(b), a2.PathTo(b))
			}
			st, err := a.Status()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range st.Links {
				if l.NodeID == a2.ID.String() && l.Endpoint != netip.AddrPortFrom(a2.Host.Addr, cluster.Port).String() {
					t.Errorf("a reaches a2 at %s, not at a2's own address %s", l.Endpoint, a2.Host.Addr)
				}
			}
			out, err := exec.Command(burrowBin, "peers", "--socket", a.Config.ControlSocket).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "lan") {
				t.Errorf("burrow peers on a does not name the LAN path: %v\n%s", err, out)
			}
			for _, to := range []*cluster.Node{a2, b} {
				if r, err := netlab.Ping(ctxFor(t, 20*time.Second), a.Host, to.Address.Addr(), 20, 10*time.Millisecond); err != nil || r.Received != 20 {
					t.Fatalf("a to %s: %+v %v", to.Name, r, err)
				}
			}
		})
	}
}
