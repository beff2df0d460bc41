package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// natKind is one row and column of the NAT matrix.
type natKind struct {
	name string
	nat  netlab.NAT
}

var natKinds = []natKind{
	{"public", netlab.NoNAT},
	{"endpoint-independent", netlab.EndpointIndependent},
	{"symmetric", netlab.Symmetric},
	{"udp-blocked", netlab.UDPBlocked},
}

// expectedPath is what burrow must establish between two kinds.
func expectedPath(a, b string) string {
	pair := map[string]bool{a: true, b: true}
	switch {
	case pair["udp-blocked"]:
		return "relay" // over WebSocket to the beacon, relayed from there
	case a == "symmetric" && b == "symmetric":
		return "relay" // each side's mapping is unknown to the other's filter
	}
	return "direct"
}

// TestNATMatrix puts two nodes of every NAT kind (each NATed node behind
// its own router) in one network with a beacon, links every pair, and
// checks which path each pair ends up on. With BURROW_NAT_MATRIX set to a
// file, it writes the matrix there as Markdown (docs/nat-traversal.md).
func TestNATMatrix(t *testing.T) {
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "matrix", burrowBin)
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
	kindOf := map[*cluster.Node]string{}
	i := 1
	for _, k := range natKinds {
		for copy := 1; copy <= 2; copy++ {
			name := fmt.Sprintf("%s%d", strings.Split(k.name, "-")[0][:3], copy)
			kindOf[addMember(t, lab, nw, name, k.nat, i)] = k.name
			i++
		}
	}
	for _, node := range nw.Nodes {
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		node.Config.Overlay.Successors = len(nw.Nodes) - 1
		node.Config.Overlay.Stabilize = time.Second
		if node != beacon {
			node.Config.Beacons = []config.BeaconRef{{Address: beacon.Endpoint().String(), WebSocket: "ws://" + ws.String() + "/burrow"}}
		}
	}
	start := time.Now()
	startAll(t, nw)
	var members []*cluster.Node
	for n := range kindOf {
		members = append(members, n)
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })

	type result struct {
		path  string
		setup time.Duration
		// punched is a pair that birthday probing took direct: after how
		// long, and with how many datagrams of both sides.
		punched     bool
		directAfter time.Duration
		probes      uint64
		// a and b name the pair, their sides and datagrams.
		a, b string
	}
	results := map[[2]string][]result{}
	for x, a := range members {
		for _, b := range members[x+1:] {
			want := expectedPath(kindOf[a], kindOf[b])
			var r result
			err := cluster.WaitFor(ctxFor(t, 45*time.Second), fmt.Sprintf("%s-%s on a %s path", a.Name, b.Name, want), func() bool {
				ab, ba := a.LinkTo(b), b.LinkTo(a)
				if ab == nil || ba == nil || ab.State != "up" || ab.Path != want || ba.Path != want {
					return false
				}
				r = result{path: want, setup: ab.Since.Sub(start)}
				if ab.Punch != nil && ba.Punch != nil {
					r.punched, r.probes = true, ab.Punch.Probes+ba.Punch.Probes
					r.a = fmt.Sprintf("%s (%s side, %d)", a.Name, ab.Punch.Side, ab.Punch.Probes)
					r.b = fmt.Sprintf("%s (%s side, %d)", b.Name, ba.Punch.Side, ba.Punch.Probes)
					r.directAfter = time.Duration(max(ab.Punch.DirectAfter, ba.Punch.DirectAfter) * float64(time.Millisecond))
				}
				return true
			})
			if err != nil {
				t.Errorf("%v (now %q/%q)", err, a.PathTo(b), b.PathTo(a))
				continue
			}
			key := [2]string{kindOf[a], kindOf[b]}
			if key[0] > key[1] {
				key[0], key[1] = key[1], key[0]
			}
			results[key] = append(results[key], r)
		}
	}
	pingAll(t, members, 60*time.Second)

	var md strings.Builder
	fmt.Fprintf(&md, "| | %s |\n|---|%s\n", strings.Join(kindNames(), " | "), strings.Repeat("---|", len(natKinds)))
	for _, a := range natKinds {
		fmt.Fprintf(&md, "| **%s** |", a.name)
		for _, b := range natKinds {
			key := [2]string{a.name, b.name}
			if key[0] > key[1] {
				key[0], key[1] = key[1], key[0]
			}
			rs := results[key]
			if len(rs) == 0 {
				md.WriteString(" – |")
				continue
			}
			var worst, worstPunch time.Duration
			var punched int
			var probes uint64
			for _, r := range rs {
				worst = max(worst, r.setup)
				if r.punched {
					punched++
					worstPunch, probes = max(worstPunch, r.directAfter), max(probes, r.probes)
				}
			}
			fmt.Fprintf(&md, " %s (%d pairs, up ≤ %.1f s after start", rs[0].path, len(rs), worst.Seconds())
			if punched > 0 {
				fmt.Fprintf(&md, "; %d by birthday probing, direct ≤ %.2f s after it began, ≤ %d datagrams a pair", punched, worstPunch.Seconds(), probes)
			}
			md.WriteString(") |")
		}
		md.WriteString("\n")
	}
	md.WriteString("\nThe pairs birthday probing took direct (datagrams each side sent):\n\n| pair | direct after probing began | datagrams |\n|---|--:|--:|\n")
	for _, key := range slices.SortedFunc(maps.Keys(results), func(x, y [2]string) int { return strings.Compare(x[0]+x[1], y[0]+y[1]) }) {
		for _, r := range results[key] {
			if r.punched {
				fmt.Fprintf(&md, "| %s – %s | %.2f s | %d |\n", r.a, r.b, r.directAfter.Seconds(), r.probes)
			}
		}
	}
	t.Logf("NAT matrix:\n%s", md.String())
	if out := os.Getenv("BURROW_NAT_MATRIX"); out != "" {
		if err := os.WriteFile(out, []byte(md.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func kindNames() []string {
	var out []string
	for _, k := range natKinds {
		out = append(out, k.name)
	}
	return out
}
