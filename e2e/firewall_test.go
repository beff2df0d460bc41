package e2e

import (
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

// groupRing is newJoiningRing whose members' certificates name groups.
func groupRing(t *testing.T, groups map[string][]string, names ...string) *cluster.Network {
	t.Helper()
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "e2e", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		host, err := lab.AddHost(fmt.Sprintf("h%d", i))
		if err != nil {
			t.Fatal(err)
		}
		node, err := nw.AddMember(host, name, virtual(i), groups[name])
		if err != nil {
			t.Fatal(err)
		}
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 2 * time.Second
		node.Config.Overlay.Stabilize = time.Second
		if i > 0 {
			node.Config.Overlay.Bootstrap = []string{nw.Nodes[0].Endpoint().String()}
		}
	}
	return nw
}

// TestGroupFirewall: db's firewall lets TCP 5432 in from group app only
// (and pings from anyone). iperf3 from app reaches it, replies included;
// from web it gets nowhere. `burrow firewall check` says why. After the
// rule is widened to group web and db gets SIGHUP, web gets through, with
// every link of db's still up from before.
func TestGroupFirewall(t *testing.T) {
	nw := groupRing(t, map[string][]string{"db": {"db"}, "app": {"app"}, "web": {"web"}}, "db", "app", "web")
	db, app, web := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2]
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
	check := func(from, to string) (string, error) {
		out, err := exec.Command(burrowBin, "firewall", "check", from, to, "tcp", "5432", "--socket", db.Config.ControlSocket).CombinedOutput()
		return string(out), err
	}
	if out, err := check("app", "db"); err != nil || !strings.Contains(out, "ALLOWED") || !strings.Contains(out, "group app") {
		t.Errorf("firewall check app db: %v\n%s", err, out)
	}
	if out, err := check("web", "db"); err == nil || !strings.Contains(out, "DROPPED") || !strings.Contains(out, "no inbound rule matches") {
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
