package e2e

import (
	"fmt"
	"net"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
	"burrow/runtime/kernelpath"
)

// kernelPathPair builds two nodes on one private LAN (a site of the lab:
// one datacenter) with the kernel path on for that LAN, linked to each
// other. It skips the test, saying why, where the kernel cannot run the
// kernel path.
func kernelPathPair(t *testing.T) (a, b *cluster.Node) {
	t.Helper()
	lab := labtest.New(t)
	if err := kernelpath.Available(); err != nil {
		t.Skipf("skipping: no kernel path on this machine: %v", err)
	}
	site, err := lab.AddSite("dc", netlab.EndpointIndependent)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := cluster.New(lab, "kp", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	off := false
	for i := range 2 {
		host, err := site.AddHost(fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		node, err := nw.AddNode(host, fmt.Sprintf("k%d", i), virtual(i))
		if err != nil {
			t.Fatal(err)
		}
		node.Config.Overlay.Enabled = &off
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 2 * time.Second
		node.Config.KernelPath = config.KernelPath{Enabled: true, Trusted: []string{site.LAN.String()}}
	}
	a, b = nw.Nodes[0], nw.Nodes[1]
	a.Dial(b)
	startAll(t, nw)
	if err := nw.WaitLinks(ctxFor(t, 10*time.Second), map[*cluster.Node]int{a: 1, b: 1}); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// kernelStats reads the counters of the kernel path attached to a node's
// TAP, and whether the programs are attached to the TAP and to eth0.
func kernelStats(t *testing.T, n *cluster.Node) (st kernelpath.Stats, tap, underlay bool) {
	t.Helper()
	err := n.Host.Do(func() error {
		tapIfc, err := net.InterfaceByName(n.Config.TAP.Name)
		if err != nil {
			return err
		}
		eth, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		if st, tap, err = kernelpath.Attached(tapIfc.Index, true); err != nil {
			return err
		}
		_, underlay, err = kernelpath.Attached(eth.Index, false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, tap, underlay
}

// linkPackets is what the daemon's own link to the peer carried: the
// encrypted path.
func linkPackets(t *testing.T, n *cluster.Node) (tx, rx uint64) {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Links {
		tx += l.TxPackets
		rx += l.RxPackets
	}
	return tx, rx
}

// TestKernelPathCarriesPingAndTCP: two nodes on a private LAN with the
// kernel path on attach its programs, and ping and a TCP stream between
// their virtual addresses travel through the kernel — its counters count
// them on both ends while the daemons' encrypted link carries little more
// than its keepalives — and stopping a node leaves nothing attached.
func TestKernelPathCarriesPingAndTCP(t *testing.T) {
	a, b := kernelPathPair(t)
	for _, n := range []*cluster.Node{a, b} {
		if _, tap, underlay := kernelStats(t, n); !tap || !underlay {
			t.Fatalf("%s: kernel path attached to the TAP %v, to eth0 %v; want both", n.Name, tap, underlay)
		}
	}

	// The first pings ride the encrypted path while the nodes probe each
	// other's kernel path; then the kernel takes over.
	ctx := ctxFor(t, 60*time.Second)
	err := cluster.WaitFor(ctx, "the kernel path to carry pings both ways", func() bool {
		netlab.Ping(ctx, a.Host, b.Address.Addr(), 1, 100*time.Millisecond)
		sa, _, _ := kernelStats(t, a)
		sb, _, _ := kernelStats(t, b)
		return sa.TxPackets > 0 && sa.RxPackets > 0 && sb.TxPackets > 0 && sb.RxPackets > 0
	})
	if err != nil {
		t.Fatal(err)
	}

	const pings = 20
	beforeA, _, _ := kernelStats(t, a)
	beforeB, _, _ := kernelStats(t, b)
	linkTx, linkRx := linkPackets(t, a)
	r, err := netlab.Ping(ctx, a.Host, b.Address.Addr(), pings, 50*time.Millisecond)
	if err != nil || r.Received != pings {
		t.Fatalf("ping over the kernel path: %+v %v", r, err)
	}
	afterA, _, _ := kernelStats(t, a)
	afterB, _, _ := kernelStats(t, b)
	tx, rx := linkPackets(t, a)
	t.Logf("%d pings: %s sent %d and received %d frames in the kernel, its encrypted link %d and %d packets; rtt %v",
		pings, a.Name, afterA.TxPackets-beforeA.TxPackets, afterA.RxPackets-beforeA.RxPackets, tx-linkTx, rx-linkRx, r.AvgRTT)
	if afterA.TxPackets-beforeA.TxPackets < pings || afterB.RxPackets-beforeB.RxPackets < pings ||
		afterB.TxPackets-beforeB.TxPackets < pings || afterA.RxPackets-beforeA.RxPackets < pings {
		t.Errorf("the kernel path did not carry every echo request and reply: %s %+v → %+v, %s %+v → %+v",
			a.Name, beforeA, afterA, b.Name, beforeB, afterB)
	}
	// 20 pings at 50 ms take a second: a few keepalives and probes of the
	// link's liveness, not 20 echo requests.
	if tx-linkTx >= pings/2 || rx-linkRx >= pings/2 {
		t.Errorf("the encrypted link carried %d and %d packets during %d pings: the frames did not take the kernel path", tx-linkTx, rx-linkRx, pings)
	}
	if afterA.RxErrors+afterB.RxErrors+afterA.TxErrors+afterB.TxErrors > 0 {
		t.Errorf("kernel path errors: %+v, %+v", afterA, afterB)
	}

	// TCP with the TAP's offloads on: GSO super-frames through the kernel.
	if _, err := netlab.StartIperf3Server(b.Host); err != nil {
		t.Fatal(err)
	}
	res, err := netlab.Iperf3(ctx, a.Host, b.Address.Addr(), 3)
	if err != nil {
		t.Fatal(err)
	}
	afterTCP, _, _ := kernelStats(t, a)
	t.Logf("iperf3 over the kernel path: %.0f Mbit/s, %d retransmits; %s's kernel path sent %d MB in %d frames",
		res.BitsPerSecond/1e6, res.Retransmits, a.Name, (afterTCP.TxBytes-afterA.TxBytes)/1e6, afterTCP.TxPackets-afterA.TxPackets)
	if res.BitsPerSecond < 100e6 {
		t.Errorf("iperf3 over the kernel path: %.1f Mbit/s; it is broken", res.BitsPerSecond/1e6)
	}
	if sent := afterTCP.TxBytes - afterA.TxBytes; float64(sent)*8 < res.BitsPerSecond*3*0.9 {
		t.Errorf("the kernel path sent %d bytes of a %.0f Mbit/s 3 s stream: the stream took another path", sent, res.BitsPerSecond/1e6)
	}

	// A stopped node takes its programs with it.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Host.Do(func() error {
		eth, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		_, attached, err := kernelpath.Attached(eth.Index, false)
		if attached {
			return fmt.Errorf("the kernel path is still attached to %s's eth0 after it stopped", b.Name)
		}
		return err
	}); err != nil {
		t.Error(err)
	}
}
