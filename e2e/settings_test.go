package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/node"
)

// TestNetworkSettingsSetOnceReadEverywhere: a member whose certificate
// carries the settings group sets the MTU and a static route with `burrow
// network set`, behind an endpoint-independent NAT; every node, behind
// NATs of three kinds, shows them in its status within a poll period or
// two, and a DHCP client of a node behind a symmetric NAT gets them from
// that node's server. A member without the group is refused, and so is a bad
// value, each with an error naming what is wrong.
func TestNetworkSettingsSetOnceReadEverywhere(t *testing.T) {
	if _, err := exec.LookPath("udhcpc"); err != nil {
		t.Skip("skipping: udhcpc is not installed (apt-get install udhcpc)")
	}
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent, "c1": netlab.Symmetric})
	for _, node := range n.net.Nodes {
		node.Config.TAP.Addresses = []string{node.Address.String()}
		node.Config.TAP.Bridge = "br0"
		node.Config.Services.Network = "10.99.0.0/24"
		node.Config.Services.DHCP.Enabled = true
		node.Config.Services.DHCP.Range = "10.99.0.100-10.99.0.199"
	}
	admin, member := n.nodes["a"], n.nodes["b"]
	if err := admin.SetGroups(node.SettingsGroup); err != nil {
		t.Fatal(err)
	}
	startAll(t, n.net)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(n.net.Nodes) }); err != nil {
		t.Fatal(err)
	}
	network := func(ctx context.Context, on *cluster.Node, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, burrowBin, append(append([]string{"network"}, args...), "--socket", on.Config.ControlSocket)...).CombinedOutput()
		return string(out), err
	}
	if out, err := network(ctxFor(t, 20*time.Second), member, "set", "mtu", "1400"); err == nil || !strings.Contains(out, node.SettingsGroup) {
		t.Fatalf("a member without %s set the MTU: %v\n%s", node.SettingsGroup, err, out)
	}
	if out, err := network(ctxFor(t, 20*time.Second), admin, "set", "mtu", "90000"); err == nil || !strings.Contains(out, "mtu:") {
		t.Fatalf("an MTU of 90000 was taken: %v\n%s", err, out)
	}
	for _, set := range [][]string{{"mtu", "1400"}, {"route:10.20.0.0/16", "10.99.0.1"}} {
		// A node that just joined may not reach the key's primary yet.
		var out string
		if err := cluster.WaitFor(ctxFor(t, 30*time.Second), "burrow network set "+strings.Join(set, " "), func() bool {
			var err error
			out, err = network(ctxFor(t, 20*time.Second), admin, append([]string{"set"}, set...)...)
			return err == nil
		}); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	start := time.Now()
	for _, nd := range n.net.Nodes {
		// A poll period, and as much again for a read that fails.
		if err := cluster.WaitFor(ctxFor(t, 60*time.Second), nd.Name+" to read the settings", func() bool {
			st, err := nd.Status()
			return err == nil && st.Settings != nil && st.Settings.MTU == 1400 && st.Settings.Routes["10.20.0.0/16"] == "10.99.0.1" &&
				st.Settings.SetBy == admin.ID.String()
		}); err != nil {
			st, serr := nd.Status()
			t.Fatalf("%v; its settings %+v, its DHT %+v (status: %v)", err, st.Settings, st.Services.DHT, serr)
		}
	}
	t.Logf("every node shows the settings %v after they were set", time.Since(start).Round(100*time.Millisecond))
	if out, err := network(ctxFor(t, 10*time.Second), n.nodes["c1"], "show"); err != nil || !strings.Contains(out, "mtu 1400") || !strings.Contains(out, "route:10.20.0.0/16 10.99.0.1") {
		t.Fatalf("burrow network show on c1: %v\n%s", err, out)
	}

	client, err := n.nodes["c1"].Host.AddContainer("client-c1", "br0")
	if err != nil {
		t.Fatal(err)
	}
	// udhcpc hands the options it got to its script in the environment;
	// this one writes down the two asked for.
	got := filepath.Join(t.TempDir(), "options")
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && echo \"mtu=$mtu staticroutes=$staticroutes\" > "+got+"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Run(ctxFor(t, 60*time.Second), "udhcpc", "-i", "eth0", "-n", "-q", "-t", "10", "-T", "2",
		"-O", "mtu", "-O", "staticroutes", "-s", script); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, out)
	}
	options, err := os.ReadFile(got)
	if err != nil || !strings.Contains(string(options), "mtu=1400") || !strings.Contains(string(options), "staticroutes=10.20.0.0/16 10.99.0.1") {
		t.Errorf("the DHCP client got %q (%v), want the MTU and the route", options, err)
	} else {
		t.Logf("c1's DHCP client got %s", strings.TrimSpace(string(options)))
	}
}
