package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
	"burrow/runtime"
)

// pingReport is what `burrow ping --json` prints.
type pingReport struct {
	Target   string       `json:"target"`
	NodeID   string       `json:"node_id"`
	Pings    []pingAnswer `json:"pings"`
	Sent     int          `json:"sent"`
	Answered int          `json:"answered"`
	DirectAt int          `json:"direct_at_ping"`
}

type pingAnswer struct {
	Answered bool    `json:"answered"`
	RTTms    float64 `json:"rtt_ms"`
	Path     string  `json:"path"`
	Endpoint string  `json:"endpoint"`
	Via      string  `json:"via"`
	ViaPath  string  `json:"via_path"`
	Hops     int     `json:"hops"`
}

// burrowPing runs `burrow ping --json` on from's node and parses its
// report; the exit status is returned, not judged.
func burrowPing(t *testing.T, from *cluster.Node, target string, args ...string) (pingReport, error) {
	t.Helper()
	cmd := exec.Command(burrowBin, append(append([]string{"ping", "--json", "--socket", from.Config.ControlSocket}, args...), target)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var r pingReport
	if err := json.Unmarshal(out, &r); err != nil {
		var known []string
		if resp, err := runtime.Query(from.Config.ControlSocket, runtime.Request{Command: "topology"}); err == nil {
			for _, n := range resp.Topology.Nodes {
				known = append(known, fmt.Sprintf("%s=%q seen=%v", n.ID[:8], n.Name, n.Seen))
			}
		}
		t.Fatalf("burrow ping %s from %s: %v, output %q (%v: %s); the crawl knows %v", target, from.Name, err, out, runErr, stderr.String(), known)
	}
	t.Logf("burrow ping %s from %s: %s", target, from.Name, r.paths())
	return r, runErr
}

// paths lists each ping's path, for logs and failures.
func (r pingReport) paths() string {
	var s []string
	for _, p := range r.Pings {
		switch {
		case !p.Answered:
			s = append(s, "timeout")
		case p.Via != "":
			s = append(s, fmt.Sprintf("%s(%s %s, %d hops) %.2fms", p.Path, p.Via, p.ViaPath, p.Hops, p.RTTms))
		default:
			s = append(s, fmt.Sprintf("%s %s %.2fms", p.Path, p.Endpoint, p.RTTms))
		}
	}
	return strings.Join(s, ", ")
}

// TestPingShowsThePath: burrow ping names the path each answer took — a
// member with no link answers across the overlay (or a relay) first and
// turns direct once the on-demand link it asks for is punched; an
// endpoint-independent NAT node and a public node answer directly; a node
// on a UDP-blocked site is answered through the beacon's relay, which it
// reaches over WebSocket.
func TestPingShowsThePath(t *testing.T) {
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "ping", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	bh, err := lab.AddHost("beacon")
	if err != nil {
		t.Fatal(err)
	}
	beacon, err := nw.AddNode(bh, "beacon", virtual(0))
	if err != nil {
		t.Fatal(err)
	}
	beacon.Config.Beacon.Enabled = true
	ws := netip.AddrPortFrom(bh.Addr, 443)
	beacon.Config.Beacon.WebSocket.Listen = ws.String()
	nodes := map[string]*cluster.Node{}
	for i, spec := range []struct {
		name string
		nat  netlab.NAT
	}{{"pub1", netlab.NoNAT}, {"pub2", netlab.NoNAT}, {"ei1", netlab.EndpointIndependent},
		{"ei2", netlab.EndpointIndependent}, {"blk", netlab.UDPBlocked}} {
		nodes[spec.name] = addMember(t, lab, nw, spec.name, spec.nat, i+1)
	}
	for _, node := range nw.Nodes {
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		// One successor and no long-distance links: most pairs have no
		// link of their own until a ping asks for one.
		node.Config.Overlay.Successors = 1
		node.Config.Overlay.LongDistance = "0"
		node.Config.Overlay.Stabilize = time.Second
		if node != beacon {
			node.Config.Beacons = []config.BeaconRef{{Address: beacon.Endpoint().String(), WebSocket: "ws://" + ws.String() + "/burrow"}}
		}
	}
	startAll(t, nw)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}

	// Pairs that can go direct but have no link yet, those of an
	// endpoint-independent node and a public one first.
	var unlinked [][2]*cluster.Node
	direct := []string{"ei1", "ei2", "pub1", "pub2"}
	for _, a := range direct {
		for _, b := range direct {
			x, y := nodes[a], nodes[b]
			if x != y && x.PathTo(y) == "" && y.PathTo(x) == "" {
				unlinked = append(unlinked, [2]*cluster.Node{x, y})
			}
		}
	}
	sort.SliceStable(unlinked, func(i, j int) bool {
		eiToPub := func(p [2]*cluster.Node) bool {
			return strings.HasPrefix(p[0].Name, "ei") && strings.HasPrefix(p[1].Name, "pub")
		}
		return eiToPub(unlinked[i]) && !eiToPub(unlinked[j])
	})
	if len(unlinked) == 0 {
		t.Fatal("the ring linked every pair of ei1, ei2, pub1 and pub2: nothing to show turning direct")
	}
	from, to := unlinked[0][0], unlinked[0][1]
	r, err := burrowPing(t, from, to.Name, "--until-direct", "-c", "40", "--interval", "250ms")
	if err != nil {
		t.Fatalf("burrow ping --until-direct %s from %s: %v (%s)", to.Name, from.Name, err, r.paths())
	}
	// The first ping may go unanswered: sent as the ring turns
	// consistent, it can meet a neighbour whose link to the next node is
	// still being made. The first answer must come the long way round.
	first := slices.IndexFunc(r.Pings, func(p pingAnswer) bool { return p.Answered })
	if first < 0 || r.Pings[first].Path != "multi-hop" && r.Pings[first].Path != "relay" {
		t.Errorf("first answer from %s without a link: %s, want multi-hop or relay", to.Name, r.paths())
	}
	if last := r.Pings[len(r.Pings)-1]; last.Path != "direct" || r.DirectAt != len(r.Pings) || r.DirectAt < 2 {
		t.Errorf("%s to %s did not turn direct: %s", from.Name, to.Name, r.paths())
	}
	if r.NodeID != to.ID.String() || r.Target != to.Name {
		t.Errorf("pinged %s (%s), want %s (%s)", r.Target, r.NodeID, to.Name, to.ID)
	}

	// The same as people read it, on another pair still without a link.
	for _, p := range unlinked[1:] {
		if p[0].PathTo(p[1]) != "" || p[0] == from && p[1] == to || p[0] == to && p[1] == from {
			continue
		}
		out, err := exec.Command(burrowBin, "ping", "--socket", p[0].Config.ControlSocket, "--until-direct", "-c", "40", "--interval", "250ms", p[1].Name).CombinedOutput()
		t.Logf("burrow ping --until-direct %s on %s:\n%s", p[1].Name, p[0].Name, out)
		if text := string(out); err != nil || !strings.Contains(text, "via multi-hop") && !strings.Contains(text, "via relay") || !strings.Contains(text, "via direct") {
			t.Errorf("burrow ping --until-direct %s on %s: %v, want multi-hop or relay, then direct", p[1].Name, p[0].Name, err)
		}
		break
	}

	// An endpoint-independent NAT node and a public node: direct, at the
	// public node's own address; by name, by address inside the network
	// and by node ID prefix.
	ei, pub := nodes["ei1"], nodes["pub1"]
	if r, err := burrowPing(t, ei, pub.Name, "--until-direct", "-c", "40", "--interval", "250ms"); err != nil {
		t.Fatalf("ei1 to pub1 never direct: %v (%s)", err, r.paths())
	}
	for _, target := range []string{pub.Name, pub.Address.Addr().String(), pub.ID.String()[:8]} {
		r, err := burrowPing(t, ei, target, "-c", "3", "--interval", "100ms")
		if err != nil || r.Answered != 3 {
			t.Fatalf("ei1 to pub1 as %q: %v, %d of 3 answered", target, err, r.Answered)
		}
		for _, p := range r.Pings {
			if p.Path != "direct" || p.Endpoint != pub.Endpoint().String() || p.RTTms <= 0 {
				t.Errorf("ei1 to pub1 as %q: %s, want direct at %s", target, r.paths(), pub.Endpoint())
			}
		}
	}
	out, err := exec.Command(burrowBin, "ping", "--socket", ei.Config.ControlSocket, "-c", "2", "--interval", "100ms", pub.Name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pong from pub1 ("+pub.ID.String()[:8]+") via direct "+pub.Endpoint().String()) {
		t.Errorf("burrow ping's text: %v\n%s", err, out)
	}
	t.Logf("burrow ping pub1 on ei1:\n%s", out)

	// The UDP-blocked node: never direct; once its on-demand link to pub1
	// is up, relayed by the beacon, which it reaches over WebSocket.
	blk := nodes["blk"]
	r, err = burrowPing(t, blk, pub.Name, "-c", "12", "--interval", "250ms")
	if err != nil || r.Answered != 12 {
		t.Fatalf("blk to pub1: %v, %d of 12 answered (%s)", err, r.Answered, r.paths())
	}
	for _, p := range r.Pings {
		// Before the on-demand link, answers cross a neighbour, itself
		// reached through the beacon.
		if p.Path != "relay" && p.Path != "multi-hop" || p.ViaPath != "websocket" && p.ViaPath != "relay" {
			t.Errorf("blk to pub1: %s, want every answer relayed", r.paths())
			break
		}
	}
	if last := r.Pings[len(r.Pings)-1]; last.Path != "relay" || last.Via != beacon.Name || last.ViaPath != "websocket" {
		t.Errorf("blk to pub1 ends on %s, want the on-demand link relayed by the beacon over websocket (%s)", last.Path, r.paths())
	}
	out, _ = exec.Command(burrowBin, "ping", "--socket", blk.Config.ControlSocket, "-c", "2", "--interval", "100ms", pub.Name).CombinedOutput()
	t.Logf("burrow ping pub1 on blk:\n%s", out)

	// A member with no link, by its address inside the network: found
	// through the DHT's address records and the bridges' learned MACs.
	found := false
	for _, a := range nw.Nodes[1:] {
		for _, b := range nw.Nodes[1:] {
			if found || a == b || a.PathTo(b) != "" || b.PathTo(a) != "" {
				continue
			}
			found = true
			r, err := burrowPing(t, a, b.Address.Addr().String(), "-c", "3", "--interval", "100ms")
			if err != nil || r.Answered == 0 || r.NodeID != b.ID.String() {
				t.Errorf("%s to %s at %s without a link: %v, %d answered, node %s", a.Name, b.Name, b.Address.Addr(), err, r.Answered, r.NodeID)
			}
		}
	}
	if !found {
		t.Log("every pair has a link by now: the lookup of an address without one is not shown")
	}

	// Nothing answers: a member that stopped. Exit status 1.
	if err := nodes["pub2"].Stop(); err != nil {
		t.Fatal(err)
	}
	r, err = burrowPing(t, pub, nodes["pub2"].ID.String(), "-c", "2", "--timeout", "500ms", "--interval", "0")
	if err == nil || r.Answered != 0 || len(r.Pings) != 2 || r.Pings[0].Answered {
		t.Errorf("ping of a stopped member: %v, %d answered (%s), want exit status 1 and timeouts", err, r.Answered, r.paths())
	}
}
