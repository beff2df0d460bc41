package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/warrens"
)

// ulaPrefix is the unique local prefix the router advertises.
var ulaPrefix = netip.MustParsePrefix("fd42:b0:0:1::/64")

// TestIPv6AndSLAACAcrossNATs: Debian's radvd on one member advertises a
// unique local prefix over burrow's virtual Ethernet; members behind an
// endpoint-independent and a symmetric NAT configure addresses from it
// with the kernel's own SLAAC, and every member pings every other at its
// link-local and at its unique local address.
func TestIPv6AndSLAACAcrossNATs(t *testing.T) {
	if _, err := exec.LookPath("radvd"); err != nil {
		t.Skip("skipping: radvd is not installed (apt-get install radvd)")
	}
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent, "c1": netlab.Symmetric})
	startAll(t, n.net)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(n.net.Nodes) }); err != nil {
		t.Fatal(err)
	}
	router := n.nodes["a"]
	routerAddr := ulaPrefix.Addr().Next()
	tap := router.Config.TAP.Name
	if _, err := router.Host.Run(ctxFor(t, 10*time.Second), "ip", "-6", "addr", "add", netip.PrefixFrom(routerAddr, ulaPrefix.Bits()).String(), "dev", tap, "nodad"); err != nil {
		t.Fatal(err)
	}
	if _, err := router.Host.Run(ctxFor(t, 10*time.Second), "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(n.lab.LogDir(), "radvd.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `interface %s {
	AdvSendAdvert on;
	MinRtrAdvInterval 3;
	MaxRtrAdvInterval 4;
	prefix %s {
		AdvOnLink on;
		AdvAutonomous on;
	};
};
`, tap, ulaPrefix), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := router.Host.Start("radvd", "--nodaemon", "--config", conf, "--pidfile", filepath.Join(n.lab.LogDir(), "radvd.pid"), "--logmethod", "stderr"); err != nil {
		t.Fatal(err)
	}

	ula := map[*cluster.Node]netip.Addr{router: routerAddr}
	linkLocal := map[*cluster.Node]netip.Addr{}
	for _, node := range n.net.Nodes {
		ctx := ctxFor(t, 30*time.Second)
		err := cluster.WaitFor(ctx, node.Name+"'s IPv6 addresses", func() bool {
			addrs, err := ipv6Addresses(ctx, node)
			if err != nil {
				return false
			}
			for _, a := range addrs {
				switch {
				case a.IsLinkLocalUnicast():
					linkLocal[node] = a.WithZone(node.Config.TAP.Name)
				case node != router && ulaPrefix.Contains(a):
					ula[node] = a
				}
			}
			return linkLocal[node].IsValid() && ula[node].IsValid()
		})
		if err != nil {
			addrs, _ := ipv6Addresses(ctxFor(t, 5*time.Second), node)
			t.Fatalf("%v (has %v)", err, addrs)
		}
		t.Logf("%s: %s, %s", node.Name, linkLocal[node], ula[node])
	}
	for _, from := range n.net.Nodes {
		for _, to := range n.net.Nodes {
			if from == to {
				continue
			}
			for _, addr := range []netip.Addr{linkLocal[to], ula[to]} {
				ctx := ctxFor(t, 20*time.Second)
				err := cluster.WaitFor(ctx, fmt.Sprintf("%s to ping %s at %s", from.Name, to.Name, addr), func() bool {
					r, err := netlab.Ping(ctx, from.Host, withZone(addr, from), 1, 200*time.Millisecond)
					return err == nil && r.Received == 1
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// With its neighbour cache flushed, c1's kernel solicits b's address
	// again. The first time, c1's node looks the address up in the DHT
	// (where b's node put it from b's advertisements) while the
	// solicitation floods; the second time, c1's node answers itself. A
	// burst then loses nothing.
	c1, b := n.nodes["c1"], n.nodes["b"]
	var answeredBefore uint64
	for range 2 {
		answeredBefore = ndAnswered(t, c1)
		if _, err := c1.Host.Run(ctxFor(t, 10*time.Second), "ip", "-6", "neigh", "flush", "dev", c1.Config.TAP.Name); err != nil {
			t.Fatal(err)
		}
		r, err := netlab.Ping(ctxFor(t, 20*time.Second), c1.Host, ula[b], 20, 10*time.Millisecond)
		if err != nil || r.Received != 20 {
			t.Fatalf("c1 to b over IPv6, across a symmetric and an endpoint-independent NAT: %+v %v", r, err)
		}
	}
	if answered := ndAnswered(t, c1) - answeredBefore; answered == 0 {
		t.Fatal("c1's node answered no neighbour solicitation for b's address")
	}
	bStatus, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	neigh, err := c1.Host.Run(ctxFor(t, 10*time.Second), "ip", "-6", "neigh", "show", ula[b].String(), "dev", c1.Config.TAP.Name)
	if err != nil || !strings.Contains(string(neigh), bStatus.TAP.MAC) {
		t.Fatalf("c1's kernel has %q for b's address, want b's MAC %s (%v)", neigh, bStatus.TAP.MAC, err)
	}
	// The same for the router's link-local address: the answer keeps the
	// router flag, which c1's kernel notes on its neighbour entry (a host
	// that sees a router's flag cleared drops it as a default router).
	for range 2 {
		answeredBefore = ndAnswered(t, c1)
		if _, err := c1.Host.Run(ctxFor(t, 10*time.Second), "ip", "-6", "neigh", "flush", "dev", c1.Config.TAP.Name); err != nil {
			t.Fatal(err)
		}
		if r, err := netlab.Ping(ctxFor(t, 20*time.Second), c1.Host, linkLocal[router].WithZone(c1.Config.TAP.Name), 5, 10*time.Millisecond); err != nil || r.Received != 5 {
			t.Fatalf("c1 to the router's link-local address: %+v %v", r, err)
		}
	}
	if answered := ndAnswered(t, c1) - answeredBefore; answered == 0 {
		t.Fatal("c1's node answered no neighbour solicitation for the router's address")
	}
	neigh, err = c1.Host.Run(ctxFor(t, 10*time.Second), "ip", "-6", "neigh", "show", linkLocal[router].WithZone("").String(), "dev", c1.Config.TAP.Name)
	if err != nil || !strings.Contains(string(neigh), " router") {
		t.Fatalf("c1's kernel has %q for the router's address, without the router flag (%v)", neigh, err)
	}
}

// ndAnswered is how many neighbour solicitations node's daemon answered.
func ndAnswered(t *testing.T, node *cluster.Node) uint64 {
	st, err := node.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st.Services.NDAnswered
}

// ipv6Addresses lists the IPv6 addresses on node's TAP that have finished
// duplicate address detection.
func ipv6Addresses(ctx context.Context, node *cluster.Node) ([]netip.Addr, error) {
	out, err := node.Host.Run(ctx, "ip", "-6", "-j", "addr", "show", "dev", node.Config.TAP.Name)
	if err != nil {
		return nil, err
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			Tentative bool   `json:"tentative"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if addr, err := netip.ParseAddr(a.Local); err == nil && !a.Tentative {
				addrs = append(addrs, addr)
			}
		}
	}
	return addrs, nil
}

// withZone gives a link-local address the zone of from's TAP, where it is
// reached; other addresses need none.
func withZone(addr netip.Addr, from *cluster.Node) netip.Addr {
	if addr.IsLinkLocalUnicast() {
		return addr.WithZone(from.Config.TAP.Name)
	}
	return addr
}

// TestIPv6ContainerSubnetsAcrossNATs: two members behind an
// endpoint-independent and a symmetric NAT claim Warrens IPv6 container
// subnets; a container on each (a namespace on the node's container
// bridge) pings the other's over the virtual Ethernet. Each node answers
// its kernel's neighbour solicitations for the other subnet's addresses
// with the MAC of the member that claimed it.
func TestIPv6ContainerSubnetsAcrossNATs(t *testing.T) {
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "c1": netlab.Symmetric})
	members := []*cluster.Node{n.nodes["a"], n.nodes["c1"]}
	for i, node := range members {
		idFile := filepath.Join(node.Dir, "machine-id")
		if err := os.WriteFile(idFile, []byte(fmt.Sprintf("%032x\n", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		node.Config.Services.Subnets = config.SubnetConfig{Enabled: true, Families: []string{"ipv6"}, MachineID: idFile}
	}
	startAll(t, n.net)
	ctx := ctxFor(t, 90*time.Second)
	var containers []*netlab.Host
	var addrs []netip.Addr
	for i, node := range members {
		var subnet netip.Prefix
		if err := cluster.WaitFor(ctx, node.Name+"'s IPv6 subnet claim", func() bool {
			st, err := node.Status()
			if err != nil {
				return false
			}
			for _, s := range st.Services.Subnets {
				if s.State == warrens.Claimed.String() && s.Prefix.Addr().Is6() {
					subnet = s.Prefix
				}
			}
			return subnet.IsValid()
		}); err != nil {
			t.Fatal(err)
		}
		c, first := containerOn(t, ctx, node, fmt.Sprintf("ctr6-%d", i), subnet)
		t.Logf("%s claimed %v; its container is %v", node.Name, subnet, first)
		containers, addrs = append(containers, c), append(addrs, first)
	}
	pingEachOther(t, ctx, containers, addrs)
	if r, err := netlab.Ping(ctx, containers[0], addrs[1], 20, 10*time.Millisecond); err != nil || r.Received != 20 {
		t.Errorf("a burst between the containers: %+v %v", r, err)
	}
}
