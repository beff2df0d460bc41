package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// TestRouterModeBesideALANsOwnDHCPServer: node a bridges a LAN whose own
// DHCP server (Debian's dnsmasq) hands out 10.99.0.50-59; members behind
// another endpoint-independent and a symmetric NAT serve DHCP over the
// overlay from 10.99.0.100-199. With tap.local_dhcp on a, the LAN's hosts
// get dnsmasq's addresses and dnsmasq leases to no one else, the remote
// members' clients get the overlay's, and everyone reaches everyone: the
// LAN hosts each other directly over their bridge, remote members them
// across the overlay.
func TestRouterModeBesideALANsOwnDHCPServer(t *testing.T) {
	for _, tool := range []string{"dnsmasq", "udhcpc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (apt-get install dnsmasq-base udhcpc)", tool)
		}
	}
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent, "c1": netlab.Symmetric})
	for _, node := range n.net.Nodes {
		node.Config.TAP.Addresses = []string{node.Address.String()}
		node.Config.TAP.Bridge = "br0"
		node.Config.Services.Network = "10.99.0.0/24"
		node.Config.Services.DHCP.Enabled = true
		node.Config.Services.DHCP.Range = "10.99.0.100-10.99.0.199"
	}
	router := n.nodes["a"]
	router.Config.TAP.LocalDHCP = true
	startAll(t, n.net)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(n.net.Nodes) }); err != nil {
		t.Fatal(err)
	}

	server, err := router.Host.AddContainer("lan-dhcp", "br0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Run(ctxFor(t, 10*time.Second), "ip", "addr", "add", "10.99.0.40/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	leases := filepath.Join(n.lab.LogDir(), "dnsmasq.leases")
	if _, err := server.Start("dnsmasq", "--no-daemon", "--port=0", "--no-resolv", "--interface=eth0", "--bind-interfaces",
		"--dhcp-range=10.99.0.50,10.99.0.59,255.255.255.0,1h", "--dhcp-leasefile="+leases, "--log-dhcp",
		"--pid-file="+filepath.Join(n.lab.LogDir(), "dnsmasq.pid")); err != nil {
		t.Fatal(err)
	}
	if err := server.WaitListening(ctxFor(t, 10*time.Second), "udp", 67); err != nil {
		t.Fatal(err)
	}

	lease := func(node *cluster.Node, name string) (*netlab.Host, netip.Addr) {
		t.Helper()
		c, err := node.Host.AddContainer(name, "br0")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := c.Run(ctxFor(t, 60*time.Second), "udhcpc", "-i", "eth0", "-n", "-q", "-t", "10", "-T", "2", "-s", "/etc/udhcpc/default.script"); err != nil {
			t.Fatalf("%s: udhcpc: %v\n%s", name, err, out)
		}
		out, err := c.Run(ctxFor(t, 5*time.Second), "ip", "-4", "addr", "show", "dev", "eth0")
		m := leasedAddr.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s has no address: %s %v", name, out, err)
		}
		return c, netip.MustParseAddr(string(m[1]))
	}
	within := func(a netip.Addr, from, to string) bool {
		return !a.Less(netip.MustParseAddr(from)) && !netip.MustParseAddr(to).Less(a)
	}
	var lanHosts []*netlab.Host
	var lanAddrs []netip.Addr
	for i := range 2 {
		h, a := lease(router, fmt.Sprintf("lan%d", i))
		if !within(a, "10.99.0.50", "10.99.0.59") {
			t.Errorf("LAN host %s got %s, not from the LAN's own server", h.Name, a)
		}
		lanHosts, lanAddrs = append(lanHosts, h), append(lanAddrs, a)
	}
	remote := map[string]netip.Addr{}
	var remoteHosts []*netlab.Host
	for _, name := range []string{"b", "c1"} {
		h, a := lease(n.nodes[name], "client-"+name)
		if !within(a, "10.99.0.100", "10.99.0.199") {
			t.Errorf("%s's client got %s, not from the overlay's range", name, a)
		}
		remote[h.Name] = a
		remoteHosts = append(remoteHosts, h)
	}
	t.Logf("LAN hosts %v, remote clients %v", lanAddrs, remote)
	data, err := os.ReadFile(leases)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(strings.TrimSpace(string(data)), "\n") + 1; got != len(lanHosts) {
		t.Errorf("dnsmasq leased %d addresses, want only the LAN's %d:\n%s", got, len(lanHosts), data)
	}
	st, err := router.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Services.DHCPKeptLocal == 0 {
		t.Error("a kept no DHCP frame off the overlay")
	} else {
		t.Logf("a kept %d DHCP frames off the overlay", st.Services.DHCPKeptLocal)
	}

	ping := func(from *netlab.Host, to netip.Addr) {
		t.Helper()
		ctx := ctxFor(t, 30*time.Second)
		if err := cluster.WaitFor(ctx, fmt.Sprintf("%s to ping %s", from.Name, to), func() bool {
			r, err := netlab.Ping(ctx, from, to, 1, 200*time.Millisecond)
			return err == nil && r.Received == 1
		}); err != nil {
			t.Error(err)
		}
	}
	ping(lanHosts[0], lanAddrs[1])
	for _, h := range remoteHosts {
		for _, a := range lanAddrs {
			ping(h, a)
		}
	}
	ping(lanHosts[1], remote["client-c1"])
}
