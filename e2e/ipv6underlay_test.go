package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// ipv6FallbackBound is how long a link may take to leave a dead IPv6 path
// for IPv4, pings passing again.
const ipv6FallbackBound = 10 * time.Second

// TestIPv6Underlay: three public hosts, two of them dual-stack (IPv4 and a
// global IPv6 address from the documentation prefix) and one with IPv4
// alone; every node listens on [::] and advertises nothing by hand. The
// dual-stack pair links directly over IPv6, the IPv4-only member reaches
// both over IPv4, and every pair pings. Then IPv6 is dropped in one of
// the pair's namespaces (ip6tables, both directions): their link moves to
// IPv4 and pings pass again within ipv6FallbackBound.
func TestIPv6Underlay(t *testing.T) {
	if _, err := exec.LookPath("ip6tables"); err != nil {
		t.Skip("skipping: ip6tables is not installed (apt-get install iptables)")
	}
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "v6", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*cluster.Node
	for i, name := range []string{"four", "sixa", "sixb"} {
		host, err := lab.AddHost(name)
		if err != nil {
			t.Fatal(err)
		}
		if name != "four" {
			if err := host.AddIPv6(); err != nil {
				t.Fatal(err)
			}
		}
		node, err := nw.AddNode(host, name, virtual(i))
		if err != nil {
			t.Fatal(err)
		}
		node.Config.Listen = fmt.Sprintf("[::]:%d", cluster.Port)
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		node.Config.Overlay.Successors = 2 // a full mesh of three
		node.Config.Overlay.Stabilize = time.Second
		nodes = append(nodes, node)
	}
	four, sixa, sixb := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes[1:] {
		n.Config.Overlay.Bootstrap = []string{four.Endpoint().String()}
	}
	startAll(t, nw)

	v6a, v6b := netip.AddrPortFrom(sixa.Host.Addr6, cluster.Port), netip.AddrPortFrom(sixb.Host.Addr6, cluster.Port)
	ctx := ctxFor(t, 30*time.Second)
	if err := cluster.WaitFor(ctx, "sixa and sixb linked directly over IPv6", func() bool {
		return linkEndpoint(t, sixa, sixb) == v6b && linkEndpoint(t, sixb, sixa) == v6a
	}); err != nil {
		t.Fatalf("%v: sixa sees sixb at %v, sixb sees sixa at %v", err, linkEndpoint(t, sixa, sixb), linkEndpoint(t, sixb, sixa))
	}
	for _, n := range []*cluster.Node{sixa, sixb} {
		if err := cluster.WaitFor(ctx, four.Name+" and "+n.Name+" linked over IPv4", func() bool {
			return linkEndpoint(t, four, n) == n.Endpoint() && linkEndpoint(t, n, four) == four.Endpoint()
		}); err != nil {
			t.Errorf("%v: %s sees %s at %v, %s sees %s at %v", err, four.Name, n.Name, linkEndpoint(t, four, n), n.Name, four.Name, linkEndpoint(t, n, four))
		}
	}
	pingAll(t, nodes, 30*time.Second)
	t.Logf("sixa sees sixb at %v, sixb sees sixa at %v; four sees them at %v and %v",
		linkEndpoint(t, sixa, sixb), linkEndpoint(t, sixb, sixa), linkEndpoint(t, four, sixa), linkEndpoint(t, four, sixb))

	for _, chain := range []string{"INPUT", "OUTPUT"} {
		if _, err := sixa.Host.Run(ctxFor(t, 10*time.Second), "ip6tables", "-w", "-A", chain, "-j", "DROP"); err != nil {
			t.Fatal(err)
		}
	}
	dropped := time.Now()
	ctx = ctxFor(t, ipv6FallbackBound)
	if err := cluster.WaitFor(ctx, "sixa and sixb back on IPv4, pinging", func() bool {
		if linkEndpoint(t, sixa, sixb) != sixb.Endpoint() || linkEndpoint(t, sixb, sixa) != sixa.Endpoint() {
			return false
		}
		r, err := netlab.Ping(ctx, sixa.Host, sixb.Address.Addr(), 1, 200*time.Millisecond)
		return err == nil && r.Received == 1
	}); err != nil {
		t.Fatalf("%v: sixa sees sixb at %v, sixb sees sixa at %v", err, linkEndpoint(t, sixa, sixb), linkEndpoint(t, sixb, sixa))
	}
	t.Logf("IPv6 dropped at sixa: the link is on IPv4 and pings pass %.1f s later", time.Since(dropped).Seconds())
	pingAll(t, nodes, 30*time.Second)
}

// linkEndpoint is where from's up link to to sends, as `burrow peers
// --json` shows it; the zero AddrPort without a direct link.
func linkEndpoint(t *testing.T, from, to *cluster.Node) netip.AddrPort {
	t.Helper()
	out, err := exec.Command(burrowBin, "peers", "--json", "--socket", from.Config.ControlSocket).Output()
	if err != nil {
		return netip.AddrPort{}
	}
	var rows []struct {
		NodeID                string `json:"node_id"`
		State, Path, Endpoint string
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("burrow peers --json on %s: %v\n%s", from.Name, err, out)
	}
	for _, r := range rows {
		if r.NodeID == to.ID.String() && r.State == "up" && r.Path == "direct" {
			ep, _ := netip.ParseAddrPort(r.Endpoint)
			return ep
		}
	}
	return netip.AddrPort{}
}
