package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// TestTwoNodesPingAndIperf3 is the smallest network: two nodes, one link,
// ping and a 5-second iperf3 over the virtual addresses.
func TestTwoNodesPingAndIperf3(t *testing.T) {
	_, nw := newNetwork(t, 2)
	a, b := nw.Nodes[0], nw.Nodes[1]
	a.Dial(b)
	startAll(t, nw)
	if err := nw.WaitLinks(ctxFor(t, 10*time.Second), map[*cluster.Node]int{a: 1, b: 1}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	r, err := netlab.Ping(ctx, a.Host, b.Address.Addr(), 5, 100*time.Millisecond)
	if err != nil || r.Received != 5 {
		t.Fatalf("ping: %+v %v", r, err)
	}
	t.Logf("ping rtt %v", r.AvgRTT)
	if _, err := netlab.StartIperf3Server(b.Host); err != nil {
		t.Fatal(err)
	}
	res, err := netlab.Iperf3(ctx, a.Host, b.Address.Addr(), 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iperf3: %.0f Mbit/s, %d retransmits", res.BitsPerSecond/1e6, res.Retransmits)
	// A floor far below what the machine does, to catch a broken data path
	// (e.g. offload metadata mangled, segments dropped) rather than to
	// measure: the benchmark does that.
	if res.BitsPerSecond < 100e6 {
		t.Fatalf("iperf3 through burrow: %.1f Mbit/s; the data path is broken", res.BitsPerSecond/1e6)
	}
}

// ringWithChords starts 8 nodes linked to their ring successors plus two
// chords, and waits for every link.
func ringWithChords(t *testing.T) (*netlab.Lab, *cluster.Network, []*cluster.Node) {
	lab, nw := newNetwork(t, 8)
	ring := byRing(nw)
	want := map[*cluster.Node]int{}
	for i, node := range ring {
		next := ring[(i+1)%len(ring)]
		node.Dial(next)
		want[node]++
		want[next]++
	}
	for _, c := range [][2]int{{0, 4}, {2, 6}} {
		ring[c[0]].Dial(ring[c[1]])
		want[ring[c[0]]]++
		want[ring[c[1]]]++
	}
	startAll(t, nw)
	if err := nw.WaitLinks(ctxFor(t, 20*time.Second), want); err != nil {
		t.Fatal(err)
	}
	return lab, nw, ring
}

// TestArpingReachesEveryNodeOnce is the seed's E1 on a ring with chords:
// every other node's TAP sees the ARP request exactly once, and the
// initiator gets its reply.
func TestArpingReachesEveryNodeOnce(t *testing.T) {
	_, _, ring := ringWithChords(t)
	src, dst := ring[0], ring[5]
	var captures []*netlab.Process
	var files []string
	for _, node := range ring {
		f := filepath.Join(node.Dir, "arp.txt")
		// Count requests for the target address only: the kernel's own
		// chatter (IPv6 router solicitations and the like) must not count.
		p, err := node.Host.Start("sh", "-c", fmt.Sprintf(
			"exec tcpdump --immediate-mode -i burrow0 -n -l -Q in 'arp[6:2] == 1 and arp[24:4] == 0x%08x' > %s 2>/dev/null",
			ipHex(dst), f))
		if err != nil {
			t.Fatal(err)
		}
		captures = append(captures, p)
		files = append(files, f)
	}
	time.Sleep(time.Second) // tcpdump needs a moment to attach
	out, err := src.Host.Run(ctxFor(t, 10*time.Second), "arping", "-c", "1", "-w", "3000000", "-i", "burrow0", dst.Address.Addr().String())
	if err != nil {
		t.Fatalf("arping got no reply: %v", err)
	}
	if !bytes.Contains(out, []byte("1 packets received")) && !bytes.Contains(out, []byte("1 packet received")) {
		t.Fatalf("arping output shows no reply:\n%s", out)
	}
	time.Sleep(500 * time.Millisecond)
	for _, p := range captures {
		p.Stop()
	}
	for i, node := range ring {
		data, _ := os.ReadFile(files[i])
		got := strings.Count(string(data), "Request who-has")
		want := 1
		if node == src {
			want = 0
		}
		if got != want {
			t.Errorf("%s's TAP saw the ARP request %d times, want %d:\n%s", node.Name, got, want, data)
		}
	}
}

func ipHex(n *cluster.Node) uint32 {
	a := n.Address.Addr().As4()
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

// TestEveryPairPingsAndSurvivesAKilledNode: all pairs ping on the ring
// with chords; then one node dies without a word (SIGKILL) and the
// survivors reach each other again once the dead peer is detected.
func TestEveryPairPingsAndSurvivesAKilledNode(t *testing.T) {
	_, _, ring := ringWithChords(t)
	pingAll(t, ring, 30*time.Second)
	if t.Failed() {
		return
	}
	victim := ring[3]
	if err := syscall.Kill(victim.Process.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	survivors := append(append([]*cluster.Node(nil), ring[:3]...), ring[4:]...)
	pingAll(t, survivors, 30*time.Second)
	t.Logf("all %d survivors reach each other %v after the kill", len(survivors), time.Since(start).Round(100*time.Millisecond))
}
