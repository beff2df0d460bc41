package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// ipv6FallbackBound is how long a link may take to leave a dead IPv6 path
// for IPv4, pings passing again; with links.keepalive at 0.5 s the link
// tries IPv4 once the peer is 0.75 s overdue (or sooner, when pings go
// unanswered), well before links.dead_after (3 s here).
const ipv6FallbackBound = 5 * time.Second

// ipv6ReturnBound is how long a link on IPv4 may take to return to IPv6
// once it works again: the upgrade probes run at most 10 s apart.
const ipv6ReturnBound = 15 * time.Second

// TestIPv6Underlay: three public hosts, two of them dual-stack (IPv4 and
// a global IPv6 address from the documentation prefix) and one, the
// beacon, with IPv4 alone; and two hosts behind symmetric NATs whose sites
// also route global IPv6 (no NAT66; the routers' firewalls let nothing new
// in, for IPv6 too). Every node listens on [::] and advertises nothing by
// hand. The four dual-stack nodes link directly over IPv6 — the NATed pair
// too, which over IPv4 would need a relay — and the IPv4-only member
// reaches all of them over IPv4; every pair pings. Then IPv6 is dropped in
// one namespace (ip6tables, both directions): its links move to IPv4
// without going down, and pings pass again within ipv6FallbackBound; with
// IPv6 back, the pair returns to it within ipv6ReturnBound.
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
	add := func(host *netlab.Host, name string) *cluster.Node {
		node, err := nw.AddNode(host, name, virtual(len(nodes)))
		if err != nil {
			t.Fatal(err)
		}
		node.Config.Listen = fmt.Sprintf("[::]:%d", cluster.Port)
		nodes = append(nodes, node)
		return node
	}
	for _, name := range []string{"four", "sixa", "sixb"} {
		host, err := lab.AddHost(name)
		if err != nil {
			t.Fatal(err)
		}
		if name != "four" {
			if err := host.AddIPv6(); err != nil {
				t.Fatal(err)
			}
		}
		add(host, name)
	}
	for _, name := range []string{"syma", "symb"} {
		site, err := lab.AddSite(name, netlab.Symmetric)
		if err != nil {
			t.Fatal(err)
		}
		if err := site.AddIPv6(); err != nil {
			t.Fatal(err)
		}
		host, err := site.AddHost(name + "h")
		if err != nil {
			t.Fatal(err)
		}
		add(host, name)
	}
	four, sixa, sixb, syma, symb := nodes[0], nodes[1], nodes[2], nodes[3], nodes[4]
	four.Config.Beacon.Enabled = true
	for _, n := range nodes {
		n.Config.Links.Keepalive = 500 * time.Millisecond
		n.Config.Links.DeadAfter = 3 * time.Second
		n.Config.Overlay.Successors = len(nodes) - 1 // a full mesh
		n.Config.Overlay.Stabilize = time.Second
		if n != four {
			n.Config.Beacons = []config.BeaconRef{{Address: four.Endpoint().String()}}
		}
	}
	startAll(t, nw)

	at6 := func(n *cluster.Node) netip.AddrPort { return netip.AddrPortFrom(n.Host.Addr6, cluster.Port) }
	ctx := ctxFor(t, 45*time.Second)
	dual := nodes[1:]
	for i, a := range dual {
		for _, b := range dual[i+1:] {
			if err := cluster.WaitFor(ctx, a.Name+" and "+b.Name+" linked directly over IPv6", func() bool {
				return linkEndpoint(t, a, b) == at6(b) && linkEndpoint(t, b, a) == at6(a)
			}); err != nil {
				t.Errorf("%v: %s sees %s at %v, %s sees %s at %v", err, a.Name, b.Name, linkEndpoint(t, a, b), b.Name, a.Name, linkEndpoint(t, b, a))
			}
		}
	}
	for _, n := range dual {
		if err := cluster.WaitFor(ctx, four.Name+" and "+n.Name+" linked over IPv4", func() bool {
			return linkEndpoint(t, four, n).Addr().Is4() && linkEndpoint(t, n, four) == four.Endpoint()
		}); err != nil {
			t.Errorf("%v: %s sees %s at %v, %s sees %s at %v", err, four.Name, n.Name, linkEndpoint(t, four, n), n.Name, four.Name, linkEndpoint(t, n, four))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	pingAll(t, nodes, 30*time.Second)
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				t.Logf("%s sees %s at %v", a.Name, b.Name, linkEndpoint(t, a, b))
			}
		}
	}

	// TCP's super-frames cross the IPv6 path segmented by the kernel (UDP
	// GSO), each datagram within the TAP MTU sized for IPv6.
	server, err := netlab.StartIperf3Server(sixb.Host)
	if err != nil {
		t.Fatal(err)
	}
	r, err := netlab.Iperf3(ctxFor(t, 20*time.Second), sixa.Host, sixb.Address.Addr(), 2)
	server.Stop()
	if err != nil || r.BitsPerSecond < 50e6 {
		t.Fatalf("iperf3 from sixa to sixb over IPv6: %+v, %v; want over 50 Mbit/s", r, err)
	}
	t.Logf("iperf3 from sixa to sixb over IPv6: %.0f Mbit/s, %d retransmits", r.BitsPerSecond/1e6, r.Retransmits)

	upSince := map[*cluster.Node]time.Time{sixb: linkSince(sixa, sixb), symb: linkSince(sixa, symb)}
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		if _, err := sixa.Host.Run(ctxFor(t, 10*time.Second), "ip6tables", "-w", "-A", chain, "-j", "DROP"); err != nil {
			t.Fatal(err)
		}
	}
	dropped := time.Now()
	ctx = ctxFor(t, ipv6FallbackBound)
	for _, b := range []*cluster.Node{sixb, symb} {
		if err := cluster.WaitFor(ctx, "sixa and "+b.Name+" back on IPv4, pinging", func() bool {
			if !onIPv4(sixa.PathTo(b), linkEndpoint(t, sixa, b)) || !onIPv4(b.PathTo(sixa), linkEndpoint(t, b, sixa)) {
				return false
			}
			r, err := netlab.Ping(ctx, sixa.Host, b.Address.Addr(), 1, 200*time.Millisecond)
			return err == nil && r.Received == 1
		}); err != nil {
			t.Fatalf("%v: sixa sees %s at %v (%s), %s sees sixa at %v (%s)", err, b.Name, linkEndpoint(t, sixa, b), sixa.PathTo(b), b.Name, linkEndpoint(t, b, sixa), b.PathTo(sixa))
		}
		t.Logf("IPv6 dropped at sixa: its link to %s is on IPv4 (%s %v) and pings pass %.1f s later", b.Name, sixa.PathTo(b), linkEndpoint(t, sixa, b), time.Since(dropped).Seconds())
		if since := linkSince(sixa, b); !since.Equal(upSince[b]) {
			t.Errorf("sixa's link to %s went down to fall back: up since %v, before since %v", b.Name, since, upSince[b])
		}
	}
	pingAll(t, nodes, 30*time.Second)
	if got := linkEndpoint(t, syma, symb); got != at6(symb) {
		t.Errorf("syma's link to symb left IPv6 for %v when sixa lost it", got)
	}

	for _, chain := range []string{"INPUT", "OUTPUT"} {
		if _, err := sixa.Host.Run(ctxFor(t, 10*time.Second), "ip6tables", "-w", "-D", chain, "-j", "DROP"); err != nil {
			t.Fatal(err)
		}
	}
	restored := time.Now()
	if err := cluster.WaitFor(ctxFor(t, ipv6ReturnBound), "sixa and sixb back on IPv6", func() bool {
		return linkEndpoint(t, sixa, sixb) == at6(sixb) && linkEndpoint(t, sixb, sixa) == at6(sixa)
	}); err != nil {
		t.Fatalf("%v: sixa sees sixb at %v, sixb sees sixa at %v", err, linkEndpoint(t, sixa, sixb), linkEndpoint(t, sixb, sixa))
	}
	t.Logf("IPv6 restored at sixa: its link to sixb is on IPv6 again %.1f s later", time.Since(restored).Seconds())
	pingAll(t, nodes, 30*time.Second)
}

// linkSince is when from's link to to came up, as `burrow status` shows.
func linkSince(from, to *cluster.Node) time.Time {
	st, err := from.Status()
	if err != nil {
		return time.Time{}
	}
	for _, l := range st.Links {
		if l.NodeID == to.ID.String() && l.State == "up" {
			return l.Since
		}
	}
	return time.Time{}
}

// onIPv4 says a link of that path and direct endpoint (zero unless
// direct) is up and off IPv6: direct over IPv4, or relayed by a member
// that only has IPv4.
func onIPv4(path string, direct netip.AddrPort) bool {
	return path == "relay" || (path == "direct" && direct.Addr().Is4())
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
