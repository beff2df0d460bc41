package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/node"
)

// setGroups signs each node's certificate again with the groups given.
func setGroups(t *testing.T, groups map[*cluster.Node]string) {
	t.Helper()
	for n, g := range groups {
		if err := n.SetGroups(g); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupFirewall: db's firewall lets TCP 5432 in from group app only
// (and pings from anyone). iperf3 from app reaches it, replies included;
// from web it gets nowhere. `burrow firewall check` says why. After the
// rule is widened to group web and db gets SIGHUP, web gets through, with
// every link of db's still up from before.
func TestGroupFirewall(t *testing.T) {
	_, nw := newJoiningRing(t, 3)
	db, app, web := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2]
	setGroups(t, map[*cluster.Node]string{db: "db", app: "app", web: "web"})
	icmpEcho := 8
	db.Config.Firewall = &config.Firewall{
		Inbound: []config.FirewallRule{
			{Proto: "tcp", Port: "5432", Group: "app"},
			{Proto: "icmp", ICMPType: &icmpEcho, Host: "any"},
		},
		Outbound: []config.FirewallRule{{Host: "any"}},
	}
	startRing(t, nw)
	ctx := ctxFor(t, 60*time.Second)
	if err := cluster.WaitFor(ctx, "db's links to app and web", func() bool { return db.UpLinks() == 2 }); err != nil {
		t.Fatal(err)
	}
	server, err := db.Host.Start("iperf3", "-s", "-p", "5432")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Stop() })
	dbAddr := db.Address.Addr().String()
	iperf := func(from *cluster.Node) error {
		out, err := from.Host.Run(ctxFor(t, 20*time.Second), "iperf3", "-c", dbAddr, "-p", "5432", "-t", "1", "--connect-timeout", "3000")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := cluster.WaitFor(ctx, "iperf3 from app to db's port 5432", func() bool { return iperf(app) == nil }); err != nil {
		t.Fatalf("%v: %v", err, iperf(app))
	}
	if err := iperf(web); err == nil {
		t.Fatal("web, outside group app, reached db's port 5432")
	}
	if r, err := netlab.Ping(ctx, web.Host, db.Address.Addr(), 3, 100*time.Millisecond); err != nil || r.Received == 0 {
		t.Errorf("web's pings, which a rule allows, did not pass: %+v %v", r, err)
	}
	check := func(from, to *cluster.Node) (string, error) {
		out, err := exec.Command(burrowBin, "firewall", "check", from.Name, to.Name, "tcp", "5432", "--socket", db.Config.ControlSocket).CombinedOutput()
		return string(out), err
	}
	if out, err := check(app, db); err != nil || !strings.Contains(out, "ALLOWED") || !strings.Contains(out, "group app") {
		t.Errorf("firewall check app db: %v\n%s", err, out)
	}
	if out, err := check(web, db); err == nil || !strings.Contains(out, "DROPPED") || !strings.Contains(out, "no inbound rule matches") {
		t.Errorf("firewall check web db: %v, want exit 1 and the reason\n%s", err, out)
	}
	st, err := db.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Firewall == nil || st.Firewall.Dropped == 0 {
		t.Errorf("db's status shows no dropped frames: %+v", st.Firewall)
	}
	before := map[string]time.Time{}
	for _, l := range st.Links {
		before[l.NodeID] = l.Since
	}

	db.Config.Firewall.Inbound = append(db.Config.Firewall.Inbound, config.FirewallRule{Proto: "tcp", Port: "5432", Group: "web"})
	if err := db.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor(ctx, "iperf3 from web after the reload", func() bool { return iperf(web) == nil }); err != nil {
		t.Fatalf("%v: %v", err, iperf(web))
	}
	if err := iperf(app); err != nil {
		t.Errorf("app lost its access after the reload: %v", err)
	}
	st, err = db.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Links {
		if since, ok := before[l.NodeID]; !ok || !since.Equal(l.Since) || l.State != "up" {
			t.Errorf("db's link to %s changed with the reload: up since %v, before %v (%s)", l.Peer, l.Since, since, l.State)
		}
	}
}

// TestGroupFirewallAcrossTheRing: on a ring of 5 where each node links
// only to its two ring neighbours, app and db have no link of their own.
// db's firewall cannot tell app's groups from a frame that crossed another
// member, so it drops the first one and opens a link to app's bridge;
// iperf3's retries then pass on the group rule.
func TestGroupFirewallAcrossTheRing(t *testing.T) {
	_, nw := newJoiningRing(t, 5)
	for _, n := range nw.Nodes {
		n.Config.Overlay.Successors = 1
		n.Config.Overlay.LongDistance = "0"
	}
	// Two nodes two steps apart on the ring, neither the one everyone
	// joined through (which links to all of them at first).
	ring := byRing(nw)
	first := slices.Index(ring, nw.Nodes[0])
	db, app := ring[(first+1)%5], ring[(first+3)%5]
	setGroups(t, map[*cluster.Node]string{db: "db", app: "app"})
	db.Config.Firewall = &config.Firewall{
		Inbound:  []config.FirewallRule{{Proto: "tcp", Port: "5432", Group: "app"}},
		Outbound: []config.FirewallRule{{Host: "any"}},
	}
	startRing(t, nw)
	linked := func() bool {
		st, err := db.Status()
		return err == nil && slices.ContainsFunc(st.Links, func(l node.LinkStatus) bool { return l.NodeID == app.ID.String() && l.State == "up" })
	}
	// The links a node makes while it joins close a few seconds after the
	// ring is consistent, as no longer needed: then each node keeps its
	// two ring neighbours only, and db and app, two steps apart, have no
	// link. The connection starts on that quiet ring, not while the
	// joining links close under it.
	onlyRingLinks := func() bool {
		return !slices.ContainsFunc(nw.Nodes, func(n *cluster.Node) bool { return n.UpLinks() != 2 })
	}
	if err := cluster.WaitFor(ctxFor(t, 20*time.Second), "the joining links to close", onlyRingLinks); err != nil {
		t.Fatalf("the nodes keep more links than their ring neighbours: the ring does not test what it should (%v)", err)
	}
	if linked() {
		t.Fatal("db and app keep a link: the ring does not test what it should")
	}
	server, err := db.Host.Start("iperf3", "-s", "-p", "5432")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Stop() })
	start := time.Now()
	out, err := app.Host.Run(ctxFor(t, 30*time.Second), "iperf3", "-c", db.Address.Addr().String(), "-p", "5432", "-t", "1", "--connect-timeout", "10000")
	if err != nil {
		t.Fatalf("iperf3 from app across the ring: %v\n%s", err, out)
	}
	t.Logf("iperf3 connected and ran in %v", time.Since(start).Round(10*time.Millisecond))
	if !linked() {
		t.Error("db passed app's traffic without a link to it")
	}
}

// TestAMemberCannotClaimAnothersAddress: m puts v's certified address on
// its own TAP, announces it with gratuitous ARP (arping -U) and pings n
// from it. n's kernel never hears of it: its neighbour entry for the
// address, after it pings v, is v's MAC; n counts the frames as spoofed.
func TestAMemberCannotClaimAnothersAddress(t *testing.T) {
	_, nw := newNetwork(t, 3)
	v, m, n := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2]
	v.Dial(m)
	v.Dial(n)
	m.Dial(n)
	startAll(t, nw)
	ctx := ctxFor(t, 30*time.Second)
	if err := cluster.WaitFor(ctx, "every link", func() bool { return v.UpLinks() == 2 && m.UpLinks() == 2 && n.UpLinks() == 2 }); err != nil {
		t.Fatal(err)
	}
	borrowAddress(t, ctx, m, "burrow0", v.Address.Addr(), n.Address.Addr())
	if r, err := netlab.Ping(ctx, n.Host, v.Address.Addr(), 3, 100*time.Millisecond); err != nil || r.Received == 0 {
		st, _ := n.Status()
		t.Fatalf("n cannot reach v's address: %+v %v; n's drops %v", r, err, st.Drops)
	}
	checkNeighbour(t, ctx, n.Host, "burrow0", v.Address.Addr(), macOf(t, ctx, v.Host, "burrow0"), macOf(t, ctx, m.Host, "burrow0"))
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops["spoofed"] == 0 {
		t.Errorf("n counted no spoofed frames: %v", st.Drops)
	}
	t.Logf("n dropped %d frames from m that used v's address", st.Drops["spoofed"])
}

// TestAMemberCannotUseAnothersLease: a client behind v (udhcpc in a
// container on v's bridge) gets an address by DHCP over the overlay, and n
// pings it. m puts the leased address on its own bridge, announces it with
// gratuitous ARP (arping -U) and pings n from it: n's neighbour entry for
// the address stays the client's MAC, the client keeps answering, and n
// counts m's frames as spoofed. m then takes an address of the DHCP range
// that no lease gives, and n drops its frames as unheld; r, whose
// certificate has group router, gets through from another such address.
func TestAMemberCannotUseAnothersLease(t *testing.T) {
	_, nw := newServicesNetwork(t, 4)
	v, m, n, r := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2], nw.Nodes[3]
	setGroups(t, map[*cluster.Node]string{r: node.RouterGroup})
	startRing(t, nw)
	ctx := ctxFor(t, 90*time.Second)
	client, err := v.Host.AddContainer("lease-holder", "br0")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := client.Run(ctx, "udhcpc", "-i", "eth0", "-n", "-q", "-t", "10", "-T", "2", "-s", "/etc/udhcpc/default.script"); err != nil {
		t.Fatalf("udhcpc behind v: %v\n%s", err, out)
	}
	out, _ := client.Run(ctx, "ip", "-4", "addr", "show", "dev", "eth0")
	match := leasedAddr.FindSubmatch(out)
	if match == nil {
		t.Fatalf("the client got no address:\n%s", out)
	}
	leased := netip.MustParseAddr(string(match[1]))
	// n looks the lease's holder up at the first frame from the address.
	reachable := func(from *netlab.Host, to netip.Addr) bool {
		r, err := netlab.Ping(ctx, from, to, 3, 200*time.Millisecond)
		return err == nil && r.Received > 0
	}
	if !reachable(n.Host, leased) {
		t.Fatalf("n cannot reach v's client at %s", leased)
	}

	borrowAddress(t, ctx, m, "br0", leased, n.Address.Addr())
	if !reachable(n.Host, leased) {
		st, _ := n.Status()
		t.Fatalf("n cannot reach v's client at %s after m took its address; n's drops %v", leased, st.Drops)
	}
	checkNeighbour(t, ctx, n.Host, "br0", leased, macOf(t, ctx, client, "eth0"), macOf(t, ctx, m.Host, "br0"))
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops["spoofed"] == 0 {
		t.Errorf("n counted no spoofed frames: %v", st.Drops)
	}
	t.Logf("n dropped %d frames from m that used the address %s leased behind v", st.Drops["spoofed"], leased)

	// Addresses of the range (10.99.0.100-199) that no lease gives: the
	// gratuitous ARP has n look them up, then only the router's pass.
	// The lease above is drawn from the same range: skip its address.
	var free []netip.Addr
	for a := netip.MustParseAddr("10.99.0.198"); len(free) < 2; a = a.Prev() {
		if a != leased {
			free = append(free, a)
		}
	}
	unleased := map[*cluster.Node]netip.Addr{m: free[0], r: free[1]}
	for who, a := range unleased {
		if out, err := who.Host.Run(ctx, "ip", "addr", "add", a.String()+"/32", "dev", "br0"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		who.Host.Run(ctx, "arping", "-U", "-c", "2", "-i", "br0", "-S", a.String(), a.String())
	}
	pingFrom := func(who *cluster.Node) bool {
		_, err := who.Host.Run(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-I", unleased[who].String(), n.Address.Addr().String())
		return err == nil
	}
	if pingFrom(m) {
		t.Errorf("m reached n from %s, an address no lease gives it", unleased[m])
	}
	if !pingFrom(r) {
		st, _ := n.Status()
		t.Errorf("r, a router, cannot reach n from %s; n's drops %v", unleased[r], st.Drops)
	}
	if st, err = n.Status(); err != nil {
		t.Fatal(err)
	}
	if st.Drops["unheld"] == 0 {
		t.Errorf("n counted no unheld frames: %v", st.Drops)
	}
	t.Logf("n dropped %d frames from m on an address no lease gives", st.Drops["unheld"])
	log, _ := os.ReadFile(n.Process.LogPath())
	for _, want := range []string{"counted as spoofed", "burrow cert sign --router"} {
		if !bytes.Contains(log, []byte(want)) || !bytes.Contains(log, []byte("from="+m.Name)) {
			t.Errorf("n's log does not say it drops m's frames (%q):\n%s", want, log)
		}
	}
}

// TestADHCPClientMovesWithItsLease: a client behind v (udhcpc in a
// container on v's bridge) leases an address by DHCP and pings n. It is
// then carried to m's bridge (same MAC, new cable) and either asks m's
// DHCP server for its address back, or keeps it and only announces itself
// with gratuitous ARP, as a virtual machine migrated live does: v finds it
// gone from its own bridge and lets the lease go, m takes it over, and the
// client's pings reach n again within seconds, no frame of it dropped for
// long as another member's.
func TestADHCPClientMovesWithItsLease(t *testing.T) {
	for _, asks := range []bool{true, false} {
		name := map[bool]string{true: "asking m's DHCP server", false: "announced by gratuitous ARP"}[asks]
		t.Run(name, func(t *testing.T) { clientMovesWithItsLease(t, asks) })
	}
}

func clientMovesWithItsLease(t *testing.T, asksDHCP bool) {
	_, nw := newServicesNetwork(t, 3)
	v, m, n := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2]
	startRing(t, nw)
	ctx := ctxFor(t, 90*time.Second)
	client, err := v.Host.AddContainer("mover", "br0")
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) []byte {
		t.Helper()
		out, err := client.Run(ctx, name, args...)
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return out
	}
	dhcp := func(args ...string) netip.Addr {
		t.Helper()
		run("udhcpc", append([]string{"-i", "eth0", "-n", "-q", "-t", "10", "-T", "2", "-s", "/etc/udhcpc/default.script"}, args...)...)
		out := run("ip", "-4", "addr", "show", "dev", "eth0")
		match := leasedAddr.FindSubmatch(out)
		if match == nil {
			t.Fatalf("the client got no address:\n%s", out)
		}
		return netip.MustParseAddr(string(match[1]))
	}
	reaches := func(count int) bool {
		r, err := netlab.Ping(ctx, client, n.Address.Addr(), count, 200*time.Millisecond)
		return err == nil && r.Received > 0
	}
	leased := dhcp()
	if !reaches(3) {
		t.Fatalf("the client at %s behind v cannot reach n", leased)
	}

	if err := client.MoveContainer(m.Host, "br0"); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	if asksDHCP {
		if again := dhcp("-r", leased.String()); again != leased {
			t.Fatalf("behind m the client got %s, want its lease %s back", again, leased)
		}
		t.Logf("the client had its address back from m %v after the move", time.Since(moved).Round(10*time.Millisecond))
	} else {
		// The new cable came without the address: put it back, as the
		// migrated machine still has it, and announce it.
		run("ip", "addr", "add", leased.String()+"/24", "dev", "eth0")
		if out, err := client.Run(ctx, "arping", "-U", "-c", "1", "-i", "eth0", "-S", leased.String(), leased.String()); err != nil {
			t.Logf("arping -U (no reply is expected): %v: %s", err, out)
		}
	}
	if err := cluster.WaitFor(ctx, "the client behind m to reach n", func() bool { return reaches(1) }); err != nil {
		st, _ := n.Status()
		t.Fatalf("%v; n's drops %v", err, st.Drops)
	}
	t.Logf("the client reached n %v after the move", time.Since(moved).Round(10*time.Millisecond))
	for who, want := range map[*cluster.Node]string{v: "its lease went with it", m: "took over the lease of a client that moved here"} {
		log, _ := os.ReadFile(who.Process.LogPath())
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("%s's log does not say %q:\n%s", who.Name, want, log)
		}
	}
}

// borrowAddress does what a member does to take over an address of
// another: m puts addr on its device dev, announces it with gratuitous ARP
// (arping -U) and pings target from it. No answer is expected.
func borrowAddress(t *testing.T, ctx context.Context, m *cluster.Node, dev string, addr, target netip.Addr) {
	t.Helper()
	if out, err := m.Host.Run(ctx, "ip", "addr", "add", addr.String()+"/32", "dev", dev); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := m.Host.Run(ctx, "arping", "-U", "-c", "3", "-i", dev, "-S", addr.String(), addr.String()); err != nil {
		t.Logf("arping -U (no replies are expected): %v: %s", err, out)
	}
	m.Host.Run(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-I", addr.String(), target.String())
}

// macOf is the MAC of a host's device.
func macOf(t *testing.T, ctx context.Context, h *netlab.Host, dev string) string {
	t.Helper()
	out, err := h.Run(ctx, "cat", "/sys/class/net/"+dev+"/address")
	if err != nil {
		t.Fatalf("the MAC of %s on %s: %v: %s", dev, h.Name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkNeighbour fails t unless h's neighbour entry for addr on dev is
// the holder's MAC, not the borrower's.
func checkNeighbour(t *testing.T, ctx context.Context, h *netlab.Host, dev string, addr netip.Addr, holder, borrower string) {
	t.Helper()
	neigh, err := h.Run(ctx, "ip", "neigh", "show", addr.String(), "dev", dev)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(neigh), borrower) || !strings.Contains(string(neigh), holder) {
		t.Errorf("%s's neighbour entry for %s is %q; want the holder's MAC %s, not the borrower's %s", h.Name, addr, strings.TrimSpace(string(neigh)), holder, borrower)
	}
}
