package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// TestMulticastReachesOnlyMembersAcrossNATs: iperf2 servers behind an
// endpoint-independent and a symmetric NAT join a multicast group; an
// iperf2 client behind another NAT sends a UDP stream to it. Both members
// receive it; a node behind a symmetric NAT whose host joined nothing
// sees none of it on its TAP (tcpdump), while pings to a group no one
// joined reach it exactly once each, like broadcast.
func TestMulticastReachesOnlyMembersAcrossNATs(t *testing.T) {
	if _, err := exec.LookPath("iperf"); err != nil {
		t.Skip("skipping: iperf (version 2) is not installed (apt-get install iperf)")
	}
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent, "c1": netlab.Symmetric, "c2": netlab.Symmetric})
	startAll(t, n.net)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(n.net.Nodes) }); err != nil {
		t.Fatal(err)
	}
	group, unjoined := netip.MustParseAddr("239.1.2.3"), netip.MustParseAddr("239.9.9.9")
	for _, node := range n.net.Nodes {
		// Multicast leaves and joins on the virtual Ethernet, not the underlay.
		if _, err := node.Host.Run(ctxFor(t, 10*time.Second), "ip", "route", "add", "224.0.0.0/4", "dev", node.Config.TAP.Name); err != nil {
			t.Fatal(err)
		}
	}
	sender, outsider := n.nodes["a"], n.nodes["c2"]
	members := []*cluster.Node{n.nodes["b"], n.nodes["c1"]}
	var servers []*netlab.Process
	for _, m := range members {
		p, err := m.Host.Start("iperf", "--server", "--udp", "--bind", group.String()+"%"+m.Config.TAP.Name, "--interval", "1")
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, p)
	}
	// Every node learns of the joins: the members' own, and the others
	// from the reports that flood to them.
	if err := cluster.WaitFor(ctxFor(t, 20*time.Second), "every node to know the group's members", func() bool {
		for _, node := range n.net.Nodes {
			st, err := node.Status()
			if err != nil || !slices.Contains(st.Groups.Reported, group.String()) ||
				slices.Contains(members, node) != slices.Contains(st.Groups.Local, group.String()) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	// A first stream lets the paths settle: links just up may still go
	// through a relay that caps what it carries for others.
	if out, err := sender.Host.Run(ctxFor(t, 30*time.Second), "iperf", "--client", group.String(), "--udp", "--ttl", "4",
		"--bandwidth", "2M", "--len", "1000", "--time", "2"); err != nil {
		t.Fatalf("iperf client: %v\n%s", err, out)
	}
	capture, err := outsider.Capture(ctxFor(t, 20*time.Second), "in", "dst host "+group.String()+" or dst host "+unjoined.String())
	if err != nil {
		t.Fatal(err)
	}
	prunedBefore := pruned(t, outsider)
	out, err := sender.Host.Run(ctxFor(t, 30*time.Second), "iperf", "--client", group.String(), "--udp", "--ttl", "4",
		"--bandwidth", "2M", "--len", "1000", "--time", "3")
	if err != nil {
		t.Fatalf("iperf client: %v\n%s", err, out)
	}
	const pings = 5
	if out, err := sender.Host.Run(ctxFor(t, 20*time.Second), "ping", "-n", "-c", strconv.Itoa(pings), "-i", "0.2", "-t", "4", "-W", "1", unjoined.String()); err != nil && !strings.Contains(string(out), fmt.Sprintf("%d packets transmitted", pings)) {
		t.Fatalf("ping %s: %v\n%s", unjoined, err, out)
	}
	time.Sleep(time.Second) // the last datagrams' way across
	capture.Stop()
	sent := lastMatch(iperfSent, string(out))
	if sent == nil {
		t.Fatalf("the iperf client does not say what it sent:\n%s", out)
	}
	for i, p := range servers {
		p.Stop()
		log, _ := os.ReadFile(p.LogPath())
		// The last report covers the whole of the second stream: lost of
		// total datagrams.
		lost := lastMatch(iperfLostTotal, string(log))
		if lost == nil || lost[1]-lost[0] < sent[0]*9/10 {
			t.Errorf("member %s received less than 90%% of the %d datagrams sent:\n%s", members[i].Name, sent[0], log)
		} else {
			t.Logf("member %s received %d of the %d datagrams sent", members[i].Name, lost[1]-lost[0], sent[0])
		}
	}
	seen, _ := os.ReadFile(capture.LogPath())
	toGroup, toUnjoined := strings.Count(string(seen), "> "+group.String()+"."), strings.Count(string(seen), "> "+unjoined.String()+":")
	if toGroup != 0 {
		t.Errorf("the outsider's TAP saw %d datagrams of the group's stream", toGroup)
	}
	if toUnjoined != pings {
		t.Errorf("the outsider's TAP saw %d of %d pings to a group no one joined", toUnjoined, pings)
	}
	if p := pruned(t, outsider) - prunedBefore; p == 0 {
		t.Error("the outsider's node counted no group frame kept from its TAP")
	} else {
		t.Logf("the outsider's node kept %d of the group's frames from its TAP", p)
	}
}

// pruned is how many group frames node kept from its TAP.
func pruned(t *testing.T, node *cluster.Node) uint64 {
	st, err := node.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st.Groups.Pruned
}

var (
	iperfLostTotal = regexp.MustCompile(` ([0-9]+)/([0-9]+) \(`)
	iperfSent      = regexp.MustCompile(`Sent ([0-9]+) datagrams`)
)

// lastMatch is the numbers re's last match in out captured, nil without one.
func lastMatch(re *regexp.Regexp, out string) []int {
	all := re.FindAllStringSubmatch(out, -1)
	if all == nil {
		return nil
	}
	var nums []int
	for _, s := range all[len(all)-1][1:] {
		v, _ := strconv.Atoi(s)
		nums = append(nums, v)
	}
	return nums
}
