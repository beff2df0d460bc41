package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// Kernel VXLAN devices whose underlay is burrow's virtual Ethernet: the
// seed's E10, where flannel ran across NATed sites on the overlay.

const (
	vxlanPort = "4789" // IANA's
	// vxlanOverhead is what VXLAN adds to its device's packets on the
	// TAP: outer IPv4 (20), UDP (8) and VXLAN (8) headers and the inner
	// Ethernet header (14).
	vxlanOverhead = 50
)

// newVXLANNetwork starts a beacon and members behind an
// endpoint-independent NAT (a), behind a symmetric NAT (c) and on a
// UDP-blocked site reaching the beacon over WebSocket (d), and waits
// until every pair is linked and pings over burrow.
func newVXLANNetwork(t *testing.T) *natNetwork {
	t.Helper()
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "c": netlab.Symmetric, "d": netlab.UDPBlocked})
	n.overWebSocket()
	startAll(t, n.net)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "d's beacon link over WebSocket and a consistent ring", func() bool {
		return n.nodes["d"].PathTo(n.beacon) == "websocket" && cluster.RingConsistent(n.net.Nodes)
	}); err != nil {
		t.Fatal(err)
	}
	// Every pair linked, so that VXLAN between members crosses their own
	// link (a relay for these three) rather than hops through the beacon.
	a, c, d := n.nodes["a"], n.nodes["c"], n.nodes["d"]
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "every pair of members linked", func() bool {
		for _, pair := range [][2]*cluster.Node{{a, c}, {a, d}, {c, d}} {
			if pair[0].PathTo(pair[1]) == "" || pair[1].PathTo(pair[0]) == "" {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v (a-c %q, a-d %q, c-d %q)", err, a.PathTo(c), a.PathTo(d), c.PathTo(d))
	}
	t.Logf("burrow paths: a-c %s, a-d %s, c-d %s", a.PathTo(c), a.PathTo(d), c.PathTo(d))
	pingAll(t, n.net.Nodes, 60*time.Second)
	return n
}

// addVXLAN creates a VXLAN device on node's host over burrow's TAP with
// the style's arguments (ip link's after "type vxlan"), an MTU that fits
// its packets into the TAP's, and addr.
func addVXLAN(t *testing.T, node *cluster.Node, dev string, addr netip.Prefix, style ...string) {
	t.Helper()
	st, err := node.Status()
	if err != nil {
		t.Fatal(err)
	}
	create := append([]string{"link", "add", dev, "type", "vxlan"}, style...)
	create = append(create, "dev", node.Config.TAP.Name, "dstport", vxlanPort)
	mustRun(t, node.Host, "ip", create...)
	mustRun(t, node.Host, "ip", "link", "set", dev, "mtu", strconv.Itoa(st.TAP.MTU-vxlanOverhead), "up")
	mustRun(t, node.Host, "ip", "addr", "add", addr.String(), "dev", dev)
}

// mustRun runs a command on a host and fails the test when it fails.
func mustRun(t *testing.T, h *netlab.Host, name string, args ...string) []byte {
	t.Helper()
	out, err := h.Run(ctxFor(t, 10*time.Second), name, args...)
	if err != nil {
		t.Fatalf("%s: %s %v: %v\n%s", h.Name, name, args, err, out)
	}
	return out
}

// ipLink is what ip says of a device.
type ipLink struct {
	Address  string `json:"address"` // the MAC
	MTU      int    `json:"mtu"`
	AddrInfo []struct {
		Family string `json:"family"`
		Local  string `json:"local"`
	} `json:"addr_info"`
}

// ipv4 is the device's first IPv4 address, if it has one.
func (l ipLink) ipv4() (netip.Addr, bool) {
	for _, a := range l.AddrInfo {
		if a.Family == "inet" {
			addr, err := netip.ParseAddr(a.Local)
			return addr, err == nil
		}
	}
	return netip.Addr{}, false
}

// readLink asks ip about device dev on h and its addresses.
func readLink(ctx context.Context, h *netlab.Host, dev string) (ipLink, error) {
	out, err := h.Run(ctx, "ip", "-j", "addr", "show", "dev", dev)
	if err != nil {
		return ipLink{}, fmt.Errorf("%s: ip addr show dev %s: %v\n%s", h.Name, dev, err, out)
	}
	var links []ipLink
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return ipLink{}, fmt.Errorf("%s: ip addr show dev %s: %v\n%s", h.Name, dev, err, out)
	}
	return links[0], nil
}

// showLink is readLink failing the test when ip cannot tell.
func showLink(t *testing.T, h *netlab.Host, dev string) ipLink {
	t.Helper()
	link, err := readLink(ctxFor(t, 10*time.Second), h, dev)
	if err != nil {
		t.Fatal(err)
	}
	return link
}

// fdbDestinations maps each MAC in dev's forwarding database to the
// underlay address its frames go to.
func fdbDestinations(t *testing.T, h *netlab.Host, dev string) map[string]string {
	t.Helper()
	var entries []struct {
		MAC string `json:"mac"`
		Dst string `json:"dst"`
	}
	out := mustRun(t, h, "bridge", "-j", "fdb", "show", "dev", dev)
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatalf("%s: bridge fdb show dev %s: %v\n%s", h.Name, dev, err, out)
	}
	dst := map[string]string{}
	for _, e := range entries {
		dst[e.MAC] = e.Dst
	}
	return dst
}

// checkVXLANCarries has from ping addr, across VXLAN, with a packet that
// fills dev's MTU and may not be fragmented, until it is answered; then
// run iperf3 to an iperf3 server on to at addr, which must receive bytes.
func checkVXLANCarries(t *testing.T, from, to *cluster.Node, dev string, addr netip.Addr) {
	t.Helper()
	payload := strconv.Itoa(showLink(t, from.Host, dev).MTU - 20 - 8) // less the IPv4 and ICMP headers
	ctx := ctxFor(t, 30*time.Second)
	if err := cluster.WaitFor(ctx, fmt.Sprintf("%s to ping %s across VXLAN with %s-byte payloads, not fragmented", from.Name, to.Name, payload), func() bool {
		// ping exits 0 once answered.
		_, err := from.Host.Run(ctx, "ping", "-n", "-q", "-M", "do", "-s", payload, "-c", "1", "-W", "1", addr.String())
		return err == nil
	}); err != nil {
		t.Error(err)
	}
	if _, err := netlab.StartIperf3Server(to.Host); err != nil {
		t.Fatal(err)
	}
	res, err := netlab.Iperf3(ctxFor(t, 30*time.Second), from.Host, addr, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes <= 0 {
		t.Fatalf("iperf3 %s -> %s across VXLAN: the server received %d bytes", from.Name, to.Name, res.Bytes)
	}
	t.Logf("iperf3 %s -> %s across VXLAN: %d bytes, %.0f Mbit/s, %d retransmits", from.Name, to.Name, res.Bytes, res.BitsPerSecond/1e6, res.Retransmits)
}

// TestVXLANWithStaticFDBAcrossNATs sets VXLAN up as flannel's vxlan
// backend does, by hand: each member owns a /24 of 10.244.0.0/16 with
// its VTEP at the .0 address, learning off; for every other member it
// has a route to that /24 through its VTEP, a permanent neighbour entry
// with the VTEP's MAC, and an FDB entry sending that MAC to the member's
// burrow address. Every pair pings across VXLAN; a full-MTU ping and
// iperf3 cross between the symmetric-NAT and the UDP-blocked member.
func TestVXLANWithStaticFDBAcrossNATs(t *testing.T) {
	n := newVXLANNetwork(t)
	const dev = "vxlan-fdb"
	members := n.net.Nodes
	vtep := map[*cluster.Node]netip.Addr{}
	mac := map[*cluster.Node]string{}
	for i, m := range members {
		vtep[m] = netip.AddrFrom4([4]byte{10, 244, byte(i), 0})
		addVXLAN(t, m, dev, netip.PrefixFrom(vtep[m], 32), "id", "1", "local", m.Address.Addr().String(), "nolearning")
		mac[m] = showLink(t, m.Host, dev).Address
	}
	for _, m := range members {
		for _, peer := range members {
			if peer == m {
				continue
			}
			mustRun(t, m.Host, "ip", "route", "add", netip.PrefixFrom(vtep[peer], 24).String(), "via", vtep[peer].String(), "dev", dev, "onlink")
			mustRun(t, m.Host, "ip", "neigh", "add", vtep[peer].String(), "lladdr", mac[peer], "dev", dev, "nud", "permanent")
			mustRun(t, m.Host, "bridge", "fdb", "add", mac[peer], "dev", dev, "dst", peer.Address.Addr().String())
		}
	}
	pingEveryPair(t, members, func(m *cluster.Node) netip.Addr { return vtep[m] }, 60*time.Second)
	c, d := n.nodes["c"], n.nodes["d"]
	checkVXLANCarries(t, c, d, dev, vtep[d])
}

// TestVXLANMulticastLearningAcrossNATs: VXLAN devices with a multicast
// group on burrow's TAP, learning on. Each kernel joins the group with
// IGMP on the TAP, where its node's snooping sees it; ARP inside VXLAN
// floods to the group over burrow, and each kernel learns the others'
// VTEPs from what arrives. Every pair pings across VXLAN, and every
// member's forwarding database ends up sending each other member's VTEP
// MAC to that member's burrow address.
func TestVXLANMulticastLearningAcrossNATs(t *testing.T) {
	n := newVXLANNetwork(t)
	const dev = "vxlan-group"
	group := netip.MustParseAddr("239.1.1.42")
	members := n.net.Nodes
	addr := map[*cluster.Node]netip.Addr{}
	for i, m := range members {
		addr[m] = netip.AddrFrom4([4]byte{10, 245, 0, byte(i + 1)})
		addVXLAN(t, m, dev, netip.PrefixFrom(addr[m], 24), "id", "2", "group", group.String())
	}
	// A node passes group frames to its TAP only once a host behind it
	// reported the group.
	if err := cluster.WaitFor(ctxFor(t, 30*time.Second), "every node to see its kernel join "+group.String(), func() bool {
		for _, m := range members {
			st, err := m.Status()
			if err != nil || !slices.Contains(st.Groups.Local, group.String()) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	pingEveryPair(t, members, func(m *cluster.Node) netip.Addr { return addr[m] }, 60*time.Second)
	for _, m := range members {
		learned := fdbDestinations(t, m.Host, dev)
		for _, peer := range members {
			if peer == m {
				continue
			}
			if peerMAC := showLink(t, peer.Host, dev).Address; learned[peerMAC] != peer.Address.Addr().String() {
				t.Errorf("%s's VXLAN sends %s's VTEP MAC %s to %q, not to its burrow address %v (fdb %v)", m.Name, peer.Name, peerMAC, learned[peerMAC], peer.Address.Addr(), learned)
			}
		}
	}
}

// TestVXLANFlannelWithEtcdAcrossNATs runs flannel itself: flanneld with
// its vxlan backend on every member, on burrow's TAP, against Debian's
// etcd on the beacon's burrow address, so that etcd's clients too reach
// it over burrow, from behind both NATs and over WebSocket. Each flanneld
// leases a /24 and programs the others' routes, neighbours and FDB
// entries from etcd; every pair pings across the VTEPs, and a full-MTU
// ping and iperf3 cross between the symmetric-NAT and the UDP-blocked
// member.
func TestVXLANFlannelWithEtcdAcrossNATs(t *testing.T) {
	for _, tool := range []struct{ command, install string }{
		{"flannel", "scripts/install-deps builds it from its Go module"},
		{"etcd", "apt-get install etcd-server"},
		{"etcdctl", "apt-get install etcd-client"},
	} {
		if _, err := exec.LookPath(tool.command); err != nil {
			t.Skipf("skipping: %s is not installed (%s)", tool.command, tool.install)
		}
	}
	n := newVXLANNetwork(t)
	const dev = "flannel.1" // flannel's name for VNI 1
	etcdURL := "http://" + netip.AddrPortFrom(n.beacon.Address.Addr(), 2379).String()
	peerURL := "http://127.0.0.1:2380"
	if _, err := n.beacon.Host.Start("etcd", "--name", "lab", "--data-dir", filepath.Join(n.lab.LogDir(), "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "lab="+peerURL); err != nil {
		t.Fatal(err)
	}
	if err := n.beacon.Host.WaitListening(ctxFor(t, 20*time.Second), "tcp", 2379); err != nil {
		t.Fatal(err)
	}
	mustRun(t, n.beacon.Host, "etcdctl", "--endpoints", etcdURL, "put", "/coreos.com/network/config",
		`{"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan", "VNI": 1, "Port": `+vxlanPort+`}}`)
	members := n.net.Nodes
	vtep := map[*cluster.Node]netip.Addr{}
	// One flannel at a time: two that start together can pick the same
	// subnet, and the one whose lease etcd then refuses exits ("subnet
	// already exists") instead of picking again.
	for _, m := range members {
		// No pods here for flannel to let through the FORWARD chain.
		if _, err := m.Host.Start("flannel", "--etcd-endpoints", etcdURL, "--iface", m.Config.TAP.Name,
			"--iptables-forward-rules=false", "--subnet-file", filepath.Join(m.Dir, "flannel-subnet.env")); err != nil {
			t.Fatal(err)
		}
		ctx := ctxFor(t, 60*time.Second)
		var link ipLink
		if err := cluster.WaitFor(ctx, m.Name+"'s flannel VTEP", func() bool {
			var err error
			link, err = readLink(ctx, m.Host, dev)
			if err != nil {
				return false
			}
			var ok bool
			vtep[m], ok = link.ipv4()
			return ok
		}); err != nil {
			t.Fatal(err)
		}
		st, err := m.Status()
		if err != nil {
			t.Fatal(err)
		}
		if link.MTU != st.TAP.MTU-vxlanOverhead {
			t.Errorf("flannel gave %s's VTEP MTU %d on a TAP of MTU %d", m.Name, link.MTU, st.TAP.MTU)
		}
		t.Logf("%s: flannel's VTEP %v", m.Name, vtep[m])
	}
	pingEveryPair(t, members, func(m *cluster.Node) netip.Addr { return vtep[m] }, 90*time.Second)
	c, d := n.nodes["c"], n.nodes["d"]
	checkVXLANCarries(t, c, d, dev, vtep[d])
}
