package e2e

import (
	"fmt"
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
	// ring is consistent, as no longer needed.
	if err := cluster.WaitFor(ctxFor(t, 20*time.Second), "db's joining link to app to close", func() bool { return !linked() }); err != nil {
		t.Fatalf("db and app keep a link: the ring does not test what it should (%v)", err)
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
	vIP := v.Address.Addr().String()
	if out, err := m.Host.Run(ctx, "ip", "addr", "add", vIP+"/32", "dev", "burrow0"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := m.Host.Run(ctx, "arping", "-U", "-c", "3", "-i", "burrow0", "-S", vIP, vIP); err != nil {
		t.Logf("arping -U (no replies are expected): %v: %s", err, out)
	}
	m.Host.Run(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-I", vIP, n.Address.Addr().String())
	if r, err := netlab.Ping(ctx, n.Host, v.Address.Addr(), 3, 100*time.Millisecond); err != nil || r.Received == 0 {
		st, _ := n.Status()
		t.Fatalf("n cannot reach v's address: %+v %v; n's drops %v", r, err, st.Drops)
	}
	neigh, err := n.Host.Run(ctx, "ip", "neigh", "show", vIP, "dev", "burrow0")
	if err != nil {
		t.Fatal(err)
	}
	mst, err := m.Status()
	if err != nil {
		t.Fatal(err)
	}
	vst, err := v.Status()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(neigh), mst.TAP.MAC) || !strings.Contains(string(neigh), vst.TAP.MAC) {
		t.Errorf("n's neighbour entry for %s is %q; want v's MAC %s, not m's %s", vIP, strings.TrimSpace(string(neigh)), vst.TAP.MAC, mst.TAP.MAC)
	}
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops["spoofed"] == 0 {
		t.Errorf("n counted no spoofed frames: %v", st.Drops)
	}
	t.Logf("n dropped %d frames from m that used v's address", st.Drops["spoofed"])
}
