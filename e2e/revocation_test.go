package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/node"
	"burrow/runtime"
)

// revocationDeadline is how long every member may take to cut a revoked
// member off (the target: 5 s in a 16-node network). CI machines
// are slower than the one the target was set on; the test logs the time.
const revocationDeadline = 10 * time.Second

// TestARevokedMemberIsCutOffEverywhereAndCannotComeBack: in a ring of 16,
// `burrow cert revoke --push` hands a revocation of one member to another;
// every member then drops its links to the revoked one, keeps the
// revocation in its state directory, and refuses the revoked member when
// it restarts. A member that was away while the revocation spread learns
// it from its first link back.
func TestARevokedMemberIsCutOffEverywhereAndCannotComeBack(t *testing.T) {
	_, nw := newJoiningRing(t, 16)
	startRing(t, nw)
	ring := byRing(nw)
	revoked, handedTo, away := ring[3], ring[10], ring[7]
	if revoked.UpLinks() < 1 {
		t.Fatal("the member to revoke has no links")
	}
	if err := away.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := exec.Command(burrowBin, "cert", "revoke", "--ca", filepath.Join(nw.Dir, "ca"), revoked.ID.String(),
		"--push", "--socket", handedTo.Config.ControlSocket).CombinedOutput()
	if err != nil {
		t.Fatalf("burrow cert revoke: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	var others []*cluster.Node
	for _, n := range nw.Nodes {
		if n != revoked && n != away {
			others = append(others, n)
		}
	}
	err = cluster.WaitFor(ctxFor(t, revocationDeadline), "every member to cut the revoked one off", func() bool {
		for _, n := range others {
			if !cutOff(n, revoked) {
				return false
			}
		}
		return revoked.UpLinks() == 0
	})
	if err != nil {
		for _, n := range others {
			if !cutOff(n, revoked) {
				t.Logf("%s has not cut %s off", n.Name, revoked.Name)
			}
		}
		t.Fatal(err)
	}
	t.Logf("all %d members cut %s off %v after the revocation was handed to %s (by their status); the last log says so %v after",
		len(others), revoked.Name, time.Since(start).Round(10*time.Millisecond), handedTo.Name, lastRevocationLog(t, others).Sub(start).Round(time.Millisecond))
	for _, n := range others {
		kept := filepath.Join(n.Config.StateDir, runtime.RevokedDir, revoked.ID.String()+".rev")
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s did not keep the revocation: %v", n.Name, err)
		}
	}

	if err := away.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor(ctxFor(t, 30*time.Second), away.Name+", back, to learn the revocation", func() bool {
		return cutOff(away, revoked)
	}); err != nil {
		t.Error(err)
	}

	if err := revoked.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := revoked.Start(); err != nil {
		t.Fatal(err)
	}
	watch := time.Now()
	for time.Since(watch) < 10*time.Second {
		if links := revoked.UpLinks(); links > 0 {
			t.Fatalf("the revoked member, restarted, has %d links up", links)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r, err := netlab.Ping(ctxFor(t, 5*time.Second), revoked.Host, handedTo.Address.Addr(), 3, 200*time.Millisecond); err == nil && r.Received > 0 {
		t.Errorf("the revoked member pings %s: %d replies", handedTo.Name, r.Received)
	}
	pingAll(t, others[:4], 20*time.Second)
}

// lastRevocationLog is when the last of nodes logged that it cut a
// revoked member off.
func lastRevocationLog(t *testing.T, nodes []*cluster.Node) time.Time {
	var last time.Time
	for _, n := range nodes {
		data, err := os.ReadFile(n.Process.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			if !strings.Contains(line, revokedLogLine) {
				continue
			}
			stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
			if at.After(last) {
				last = at
			}
		}
	}
	return last
}

// revokedLogLine is what a node logs when it learns a revocation.
const revokedLogLine = "member revoked by the CA: cutting it off"

// cutOff says n knows revoked is revoked and has no link up to it.
func cutOff(n, revoked *cluster.Node) bool {
	st, err := n.Status()
	if err != nil {
		return false
	}
	if !slices.ContainsFunc(st.Revoked, func(r node.RevokedNode) bool { return r.ID == revoked.ID }) {
		return false
	}
	for _, l := range st.Links {
		if l.NodeID == revoked.ID.String() && l.State == "up" {
			return false
		}
	}
	return true
}

// TestARevokedMemberCannotComeBackOverWebSocketOrARelay: a member behind a
// site that lets only TCP 443 out reaches the others over WebSocket to the
// beacon and the beacon's relay. Revoked, it loses every link; restarted,
// the beacon refuses it over WebSocket and no member takes it through the
// relay.
func TestARevokedMemberCannotComeBackOverWebSocketOrARelay(t *testing.T) {
	n := newWebSocketNetwork(t)
	startAll(t, n.net)
	d, a := n.nodes["d"], n.nodes["a"]
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "d linked over WebSocket and through the relay", func() bool {
		return d.PathTo(n.beacon) == "websocket" && d.PathTo(a) == "relay"
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := exec.Command(burrowBin, "cert", "revoke", "--ca", filepath.Join(n.net.Dir, "ca"), d.ID.String(),
		"--push", "--socket", a.Config.ControlSocket).CombinedOutput()
	if err != nil {
		t.Fatalf("burrow cert revoke: %v\n%s", err, out)
	}
	if err := cluster.WaitFor(ctxFor(t, revocationDeadline), "the beacon and a to cut d off", func() bool {
		return cutOff(n.beacon, d) && cutOff(a, d)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the beacon and a cut d off %v after the revocation was handed to a", time.Since(start).Round(10*time.Millisecond))
	if err := d.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	for watch := time.Now(); time.Since(watch) < 10*time.Second; time.Sleep(200 * time.Millisecond) {
		if links := d.UpLinks(); links > 0 {
			t.Fatalf("the revoked d, restarted behind its UDP-blocking site, has %d links up (to the beacon: %q)", links, d.PathTo(n.beacon))
		}
	}
	if r, err := netlab.Ping(ctxFor(t, 5*time.Second), d.Host, a.Address.Addr(), 3, 200*time.Millisecond); err == nil && r.Received > 0 {
		t.Errorf("the revoked d pings a: %d replies", r.Received)
	}
}
