package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/warrens"
)

// servicesNetwork makes n self-organizing nodes whose TAPs sit on a
// bridge br0, with DHCP and DNS on 10.99.0.0/24; the nodes' own addresses
// are .11 and up, DHCP hands out .100-.199, DNS answers on .1.
func servicesNetwork(t *testing.T, n int) (*netlab.Lab, *cluster.Network) {
	t.Helper()
	lab, nw := newServicesNetwork(t, n)
	startRing(t, nw)
	return lab, nw
}

// newServicesNetwork is servicesNetwork before it starts.
func newServicesNetwork(t *testing.T, n int) (*netlab.Lab, *cluster.Network) {
	t.Helper()
	lab, nw := newJoiningRing(t, n)
	for i, node := range nw.Nodes {
		node.Address = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, 0, byte(11 + i)}), 24)
		node.Config.TAP.Addresses = []string{node.Address.String()}
		node.Config.TAP.Bridge = "br0"
		node.Config.Services.Network = "10.99.0.0/24"
		node.Config.Services.DHCP.Enabled = true
		node.Config.Services.DHCP.Range = "10.99.0.100-10.99.0.199"
		node.Config.Services.DNS.Domain = "burrow.test"
	}
	return lab, nw
}

var leasedAddr = regexp.MustCompile(`inet (10\.99\.0\.\d+)/24`)

// TestConcurrentDHCPGivesDistinctAddresses: 20 unmodified clients — dhclient
// and udhcpc, two per node — on 10 nodes ask at once; every one gets its
// own address from the range.
func TestConcurrentDHCPGivesDistinctAddresses(t *testing.T) {
	_, nw := servicesNetwork(t, 10)
	var clients []*netlab.Host
	var kinds []string
	for i, node := range nw.Nodes {
		for j, kind := range []string{"dhclient", "udhcpc"} {
			c, err := node.Host.AddContainer(fmt.Sprintf("c%d%d", i, j), "br0")
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
			kinds = append(kinds, kind)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxFor(t, 60*time.Second)
			var err error
			if kinds[i] == "dhclient" {
				dir := t.TempDir()
				pid, lease, conf := filepath.Join(dir, "dhclient.pid"), filepath.Join(dir, "dhclient.leases"), filepath.Join(dir, "dhclient.conf")
				os.WriteFile(conf, []byte(fmt.Sprintf("send host-name %q;\n", c.Name)), 0o644)
				_, err = c.Run(ctx, "dhclient", "-1", "-4", "-v", "-pf", pid, "-lf", lease, "-cf", conf, "eth0")
				if data, rerr := os.ReadFile(pid); rerr == nil {
					c.Run(ctx, "kill", strings.TrimSpace(string(data))) // dhclient stays as a daemon after binding
				}
			} else {
				_, err = c.Run(ctx, "udhcpc", "-i", "eth0", "-n", "-q", "-t", "10", "-T", "2", "-x", "hostname:"+c.Name,
					"-s", "/etc/udhcpc/default.script")
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s on %s: %v", kinds[i], c.Name, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("20 clients configured in %v", time.Since(start).Round(100*time.Millisecond))
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		for _, node := range nw.Nodes {
			if st, err := node.Status(); err == nil {
				var unjoined []string
				for _, l := range st.Overlay.Links {
					if !l.RemoteJoined {
						unjoined = append(unjoined, l.Peer[:8])
					}
				}
				t.Logf("%s %s: pred %.8s succ %.8s links to peers not joined %v dhcp %+v dht %+v", node.Name, node.ID.Short(), st.Overlay.Predecessor, st.Overlay.Successors, unjoined, st.Services.DHCP, st.Services.DHT)
			}
		}
		return
	}
	seen := map[string]string{}
	for _, c := range clients {
		out, err := c.Run(ctxFor(t, 5*time.Second), "ip", "-4", "addr", "show", "dev", "eth0")
		m := leasedAddr.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s has no address: %s %v", c.Name, out, err)
		}
		addr := string(m[1])
		if a := netip.MustParseAddr(addr); a.Less(netip.MustParseAddr("10.99.0.100")) || netip.MustParseAddr("10.99.0.199").Less(a) {
			t.Errorf("%s got %s, outside the range", c.Name, addr)
		}
		if other, dup := seen[addr]; dup {
			t.Errorf("%s and %s both got %s", other, c.Name, addr)
		}
		seen[addr] = c.Name
	}
	t.Logf("%d clients, %d distinct addresses", len(clients), len(seen))
	// Clients on different nodes reach each other.
	var to netip.Addr
	for addr, name := range seen {
		if name == clients[len(clients)-1].Name {
			to = netip.MustParseAddr(addr)
		}
	}
	if r, err := netlab.Ping(ctxFor(t, 20*time.Second), clients[0], to, 3, 200*time.Millisecond); err != nil || r.Received == 0 {
		t.Errorf("client on the first node cannot ping one on the last: %+v %v", r, err)
	}
}

// TestVirtualDNS: dig and the system resolver find node names, automatic
// names and PTR records; unknown names in the domain are NXDOMAIN.
func TestVirtualDNS(t *testing.T) {
	_, nw := servicesNetwork(t, 4)
	asker := nw.Nodes[0]
	target := nw.Nodes[3]
	ctx := ctxFor(t, 60*time.Second)
	dig := func(args ...string) string {
		out, _ := asker.Host.Run(ctx, "dig", append([]string{"@10.99.0.1", "+short", "+time=2", "+tries=2"}, args...)...)
		return strings.TrimSpace(string(out))
	}
	name := target.Name + ".burrow.test"
	if err := cluster.WaitFor(ctx, "the target's name to resolve", func() bool { return dig(name) == target.Address.Addr().String() }); err != nil {
		t.Fatalf("%v: dig %s answered %q", err, name, dig(name))
	}
	// In a /24 the automatic name spells the last byte: 10.99.0.14 is C014.
	if got := dig("C014.burrow.test"); got != "10.99.0.14" {
		t.Errorf("automatic name C014 resolved to %q", got)
	}
	if got := dig("-x", target.Address.Addr().String()); !strings.HasPrefix(strings.ToLower(got), "c0") {
		t.Errorf("PTR of %v is %q", target.Address.Addr(), got)
	}
	out, _ := asker.Host.Run(ctx, "dig", "@10.99.0.1", "+time=2", "nobody-here.burrow.test")
	if !strings.Contains(string(out), "NXDOMAIN") {
		t.Errorf("unknown name not NXDOMAIN:\n%s", out)
	}
	// The system resolver (glibc) in the namespace, pointed at the virtual DNS.
	etc := filepath.Join("/etc/netns", asker.Host.Namespace)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(etc) })
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver 10.99.0.1\nsearch burrow.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := asker.Host.Run(ctx, "getent", "hosts", target.Name)
	if err != nil || !strings.Contains(string(got), target.Address.Addr().String()) {
		t.Errorf("getent hosts %s: %s %v", target.Name, got, err)
	}
}

// TestContainerSubnetsReachEachOther: two nodes derive container subnets
// from their machine ids (Warrens), claim them in the DHT, and "containers"
// (namespaces on each node's bridge) reach each other over the virtual
// Ethernet. A third node with the second one's machine id collides and
// moves to the next candidate.
func TestContainerSubnetsReachEachOther(t *testing.T) {
	_, nw := newJoiningRing(t, 3)
	ids := []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "fedcba9876543210fedcba9876543210"}
	for i, node := range nw.Nodes {
		idFile := filepath.Join(node.Dir, "machine-id")
		if err := os.WriteFile(idFile, []byte(ids[i]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		node.Config.Services.Subnets = config.SubnetConfig{Enabled: true, Families: []string{"ipv4"}, MachineID: idFile}
	}
	// The collider starts last, so the second node holds the subnet first.
	for _, node := range nw.Nodes[:2] {
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
	}
	subnet := func(n *cluster.Node) netip.Prefix {
		st, err := n.Status()
		if err != nil {
			return netip.Prefix{}
		}
		for _, s := range st.Services.Subnets {
			if s.State == warrens.Claimed.String() {
				return s.Prefix
			}
		}
		return netip.Prefix{}
	}
	ctx := ctxFor(t, 60*time.Second)
	for _, n := range nw.Nodes[:2] {
		if err := cluster.WaitFor(ctx, n.Name+"'s subnet claim", func() bool { return subnet(n).IsValid() }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nw.Nodes[2].Start(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor(ctx, "the collider's claim", func() bool { return subnet(nw.Nodes[2]).IsValid() }); err != nil {
		t.Fatal(err)
	}
	s0, s1, s2 := subnet(nw.Nodes[0]), subnet(nw.Nodes[1]), subnet(nw.Nodes[2])
	t.Logf("subnets: %v, %v, and %v for the collider", s0, s1, s2)
	if s1 == s2 || s0 == s1 || s0 == s2 {
		t.Fatalf("two nodes hold one subnet: %v %v %v", s0, s1, s2)
	}
	if s2 == warrens.Subnet(warrens.IPv4, warrens.NodeHash(ids[2])) {
		t.Fatal("the collider kept the subnet the second node had claimed first")
	}
	checkSubnetCommand(t, nw.Nodes[2], s2, s1, nw.Nodes[1])
	// A container on each of the first two nodes.
	var containers []*netlab.Host
	var addrs []netip.Addr
	for i, n := range nw.Nodes[:2] {
		c, first := containerOn(t, ctx, n, fmt.Sprintf("ctr%d", i), []netip.Prefix{s0, s1}[i])
		containers, addrs = append(containers, c), append(addrs, first)
	}
	pingEachOther(t, ctx, containers, addrs)
}

// containerOn adds a container on node's container bridge with the first
// container address of subnet, the node's claim, routed through the bridge.
func containerOn(t *testing.T, ctx context.Context, node *cluster.Node, name string, subnet netip.Prefix) (*netlab.Host, netip.Addr) {
	t.Helper()
	c, err := node.Host.AddContainer(name, "bw-cni0")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := warrens.Containers(subnet)
	addr := []string{"addr", "add", netip.PrefixFrom(first, subnet.Bits()).String(), "dev", "eth0"}
	if first.Is6() {
		addr = append(addr, "nodad")
	}
	for _, args := range [][]string{addr, {"route", "add", "default", "via", warrens.Bridge(subnet).String()}} {
		if out, err := c.Run(ctx, "ip", args...); err != nil {
			t.Fatalf("%s: ip %v: %v %s", c.Name, args, err, out)
		}
	}
	return c, first
}

// pingEachOther has each of two hosts ping the other's address until it
// answers.
func pingEachOther(t *testing.T, ctx context.Context, hosts []*netlab.Host, addrs []netip.Addr) {
	t.Helper()
	for i := range 2 {
		to := addrs[1-i]
		if err := cluster.WaitFor(ctx, fmt.Sprintf("%s to ping %v", hosts[i].Name, to), func() bool {
			r, err := netlab.Ping(ctx, hosts[i], to, 1, 200*time.Millisecond)
			return err == nil && r.Received == 1
		}); err != nil {
			t.Error(err)
		}
	}
}

// checkSubnetCommand runs 'burrow subnet --json' against a node, as an
// operator would, and expects its claimed subnet there, routed on the
// default bridge, and a collision on the subnet the holder claimed first.
func checkSubnetCommand(t *testing.T, n *cluster.Node, claimed, collided netip.Prefix, holder *cluster.Node) {
	t.Helper()
	out := burrowCLI(t, "subnet", "--json", "--socket", n.Config.ControlSocket)
	var got struct {
		Enabled bool `json:"enabled"`
		Subnets []struct {
			Family, State, Bridge, Gateway string
			Prefix                         netip.Prefix
			Collisions                     []struct {
				Prefix netip.Prefix
				Holder string
			}
		} `json:"subnets"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("burrow subnet --json on %s: %v\n%s", n.Name, err, out)
	}
	if !got.Enabled || len(got.Subnets) != 1 {
		t.Fatalf("burrow subnet --json on %s: want one claim:\n%s", n.Name, out)
	}
	s := got.Subnets[0]
	if s.Family != "ipv4" || s.Prefix != claimed || s.State != "claimed" || s.Bridge != "bw-cni0" || s.Gateway != warrens.Bridge(claimed).String() ||
		len(s.Collisions) != 1 || s.Collisions[0].Prefix != collided || s.Collisions[0].Holder != holder.ID.String() {
		t.Errorf("burrow subnet --json on %s: want %v claimed after %v collided with %s:\n%s", n.Name, claimed, collided, holder.Name, out)
	}
	t.Logf("burrow subnet on %s:\n%s", n.Name, burrowCLI(t, "subnet", "--socket", n.Config.ControlSocket))
}

// TestAddressRelocation is the paper's E2/E11: an address moves from one
// node to another (a gratuitous ARP announces it); a third node, pinging
// it all along, reaches it again within a second.
func TestAddressRelocation(t *testing.T) {
	_, nw := newJoiningRing(t, 4)
	startRing(t, nw)
	ctx := ctxFor(t, 60*time.Second)
	pinger, from, to := nw.Nodes[1], nw.Nodes[2], nw.Nodes[3]
	const moving = "10.99.0.200"
	if out, err := from.Host.Run(ctx, "ip", "addr", "add", moving+"/24", "dev", "burrow0"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if r, err := netlab.Ping(ctx, pinger.Host, netip.MustParseAddr(moving), 3, 100*time.Millisecond); err != nil || r.Received == 0 {
		t.Fatalf("the address is not reachable before the move: %+v %v", r, err)
	}
	// Ping every 20 ms with a timestamp per reply, move the address, and
	// find the longest gap between replies.
	pings, err := pinger.Host.Start("ping", "-n", "-D", "-i", "0.02", "-W", "1", moving)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	from.Host.Run(ctx, "ip", "addr", "del", moving+"/24", "dev", "burrow0")
	if out, err := to.Host.Run(ctx, "ip", "addr", "add", moving+"/24", "dev", "burrow0"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// arping exits 1 for a gratuitous ARP, since nobody answers one.
	to.Host.Run(ctx, "arping", "-U", "-c", "1", "-i", "burrow0", "-S", moving, moving)
	time.Sleep(3 * time.Second)
	pings.Stop()
	log, _ := os.ReadFile(pings.LogPath())
	gap, replies := longestGap(string(log))
	t.Logf("%d replies; longest gap without a reply around the move: %v", replies, gap)
	if replies < 100 {
		t.Fatalf("only %d ping replies in 4 s", replies)
	}
	if gap > time.Second {
		t.Errorf("the moved address was unreachable for %v (target: under 1 s; EdgeVPN measured 6.15 s)", gap)
	}
}

var pingStamp = regexp.MustCompile(`^\[(\d+\.\d+)\] \d+ bytes from`)

// longestGap finds the longest time between two ping replies in ping -D
// output.
func longestGap(out string) (time.Duration, int) {
	var last float64
	var gap time.Duration
	replies := 0
	for _, line := range strings.Split(out, "\n") {
		m := pingStamp.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var ts float64
		fmt.Sscanf(m[1], "%f", &ts)
		if replies > 0 {
			gap = max(gap, time.Duration((ts-last)*float64(time.Second)))
		}
		last = ts
		replies++
	}
	return gap, replies
}
