package e2e

import (
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
	"burrow/runtime"
)

// netcheck runs `burrow netcheck --json` on node's host with node's
// configuration, its daemon not running, and parses the report.
func netcheck(t *testing.T, node *cluster.Node) runtime.NetcheckReport {
	t.Helper()
	data, err := yaml.Marshal(&node.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(node.ConfigPath(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := node.Host.Command(ctxFor(t, 30*time.Second), burrowBin, "netcheck", "--json", "-c", node.ConfigPath())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var r runtime.NetcheckReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("burrow netcheck on %s: %v, output %q (%v: %s)", node.Name, err, out, runErr, stderr.String())
	}
	t.Logf("netcheck on %s: udp=%v mapping=%s allocation=%s public=%v nearest=%+v mappings=%+v", node.Name, r.UDP, r.Mapping,
		r.PortAllocation, r.PublicAddresses, r.NearestBeacon, r.Mappings)
	if runErr != nil {
		t.Errorf("burrow netcheck on %s: %v: %s", node.Name, runErr, stderr.String())
	}
	return r
}

// TestNetcheckReportsTheNAT: burrow netcheck, run from the configuration
// alone (no daemon on the member), asks two beacons at different addresses
// from several sockets: an endpoint-independent NAT keeps one mapping per
// socket, at the socket's own port; a symmetric NAT maps every server to a
// new random port; a site that lets only TCP 443 out has no UDP and
// reaches the beacon over WebSocket; a public host has no NAT; and with a
// single beacon the mapping is honestly unknown.
func TestNetcheckReportsTheNAT(t *testing.T) {
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "netcheck", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	var beacons []config.BeaconRef
	for i, name := range []string{"beacon1", "beacon2"} {
		h, err := lab.AddHost(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := nw.AddNode(h, name, virtual(i))
		if err != nil {
			t.Fatal(err)
		}
		b.Config.Beacon.Enabled = true
		ref := configBeacon(b)
		if i == 0 {
			ws := netip.AddrPortFrom(h.Addr, 443)
			b.Config.Beacon.WebSocket.Listen = ws.String()
			ref.WebSocket = "ws://" + ws.String() + "/burrow"
		}
		beacons = append(beacons, ref)
	}
	startAll(t, nw) // the beacons only: members are added after
	for _, b := range nw.Nodes {
		if err := b.Host.WaitListening(ctxFor(t, 20*time.Second), "udp", cluster.Port); err != nil {
			t.Fatal(err)
		}
	}
	if err := nw.Nodes[0].Host.WaitListening(ctxFor(t, 20*time.Second), "tcp", 443); err != nil {
		t.Fatal(err)
	}
	member := func(name string, nat netlab.NAT, beacons []config.BeaconRef) *cluster.Node {
		t.Helper()
		node := addMember(t, lab, nw, name, nat, len(nw.Nodes))
		node.Config.Beacons = beacons
		return node
	}

	// Linux's connection tracking lets in only answers from the address
	// and port a mapping sent to: so do both NAT kinds of the lab.
	ei := netcheck(t, member("ei", netlab.EndpointIndependent, beacons))
	if !ei.UDP || ei.Mapping != "endpoint-independent" || ei.PortAllocation != "preserved" || len(ei.PublicAddresses) < 4 ||
		ei.Filtering != "address-and-port-dependent" ||
		ei.NearestBeacon == nil || ei.NearestBeacon.Via != "udp" {
		t.Errorf("endpoint-independent site: %+v", ei)
	}
	for _, s := range ei.Servers {
		if !s.Answered || s.RTTms <= 0 {
			t.Errorf("endpoint-independent site: %s did not answer: %+v", s.Address, s)
		}
	}

	sym := netcheck(t, member("sym", netlab.Symmetric, beacons))
	if !sym.UDP || sym.Mapping != "address-and-port-dependent" || sym.PortAllocation != "random" || len(sym.PublicAddresses) != len(sym.Mappings) ||
		sym.Filtering != "address-and-port-dependent" {
		t.Errorf("symmetric site: %+v", sym)
	}

	blk := netcheck(t, member("blk", netlab.UDPBlocked, beacons))
	if blk.UDP || blk.Mapping != "unknown" || len(blk.WebSockets) != 1 || !blk.WebSockets[0].OK ||
		blk.NearestBeacon == nil || blk.NearestBeacon.Via != "websocket" {
		t.Errorf("UDP-blocked site: %+v", blk)
	}

	pub := netcheck(t, member("pub", netlab.NoNAT, beacons))
	if !pub.UDP || pub.Mapping != "none" || pub.Filtering != "none" {
		t.Errorf("public host: %+v", pub)
	}

	one := netcheck(t, member("one", netlab.EndpointIndependent, beacons[:1]))
	if !one.UDP || one.Mapping != "unknown" || one.PortAllocation != "preserved" {
		t.Errorf("endpoint-independent site with one beacon: %+v", one)
	}
	// One beacon, asked at its two ports, tells a NAT that maps every
	// destination anew.
	oneSym := netcheck(t, member("onesym", netlab.Symmetric, beacons[:1]))
	if !oneSym.UDP || oneSym.Mapping != "address-and-port-dependent" || len(oneSym.Servers) != 2 || !oneSym.Servers[1].Answered {
		t.Errorf("symmetric site with one beacon: %+v", oneSym)
	}

	// A TURN server on the first beacon's address, at a third port.
	if _, err := exec.LookPath("turnserver"); err != nil {
		t.Log("not telling the two dependent mappings apart: coturn's turnserver is not installed (apt-get install coturn)")
	} else {
		bh := nw.Nodes[0].Host
		addr := bh.Addr.String()
		if _, err := bh.Start("turnserver", "-n", "--listening-ip="+addr, "--relay-ip="+addr, "--listening-port=3478",
			"--lt-cred-mech", "--user=burrow:secret", "--realm=burrow", "--no-tls", "--no-dtls", "--no-cli",
			"--pidfile="+filepath.Join(lab.LogDir(), "turn.pid"), "--log-file=stdout", "--simple-log"); err != nil {
			t.Fatal(err)
		}
		if err := bh.WaitListening(ctxFor(t, 10*time.Second), "udp", 3478); err != nil {
			t.Fatal(err)
		}
		turn := &config.TURN{Server: addr + ":3478", Username: "burrow", Password: "secret"}
		withTURN := func(name string, nat netlab.NAT) runtime.NetcheckReport {
			node := member(name, nat, beacons)
			node.Config.TURN = turn
			return netcheck(t, node)
		}
		if r := withTURN("symt", netlab.Symmetric); r.Mapping != "address-and-port-dependent" || len(r.Servers) != 5 || !r.Servers[4].Answered {
			t.Errorf("symmetric site, two beacons and a TURN server: %+v", r)
		}
		if r := withTURN("eit", netlab.EndpointIndependent); r.Mapping != "endpoint-independent" || !r.Servers[4].Answered {
			t.Errorf("endpoint-independent site, two beacons and a TURN server: %+v", r)
		}
	}

	text, err := nw.Nodes[2].Host.Run(ctxFor(t, 30*time.Second), burrowBin, "netcheck", "-c", nw.Nodes[2].ConfigPath())
	if err != nil || !strings.Contains(string(text), "mapping          endpoint-independent") {
		t.Errorf("burrow netcheck's text on ei: %v\n%s", err, text)
	}
	t.Logf("burrow netcheck on ei:\n%s", text)
}
