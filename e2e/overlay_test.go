package e2e

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
)

// TestSixteenNodesOrganizeFromOneBootstrap: each node knows one address;
// they build the ring with successor and long-distance links, every pair
// pings, two nodes die and the rest repair, they come back and rejoin.
func TestSixteenNodesOrganizeFromOneBootstrap(t *testing.T) {
	_, nw := newJoiningRing(t, 16)
	first := nw.Nodes[0]
	start := time.Now()
	startRing(t, nw)
	t.Logf("ring of 16 consistent %v after start", time.Since(start).Round(100*time.Millisecond))
	err := cluster.WaitFor(ctxFor(t, 30*time.Second), "long-distance links", func() bool {
		withLD := 0
		for _, n := range nw.Nodes {
			st, err := n.Status()
			if err != nil {
				return false
			}
			for _, l := range st.Overlay.Links {
				if slices.Contains(l.Local, "long-distance") {
					withLD++
					break
				}
			}
		}
		return withLD >= len(nw.Nodes)/2
	})
	if err != nil {
		t.Error(err)
	}
	pingAll(t, nw.Nodes, 60*time.Second)
	if t.Failed() {
		return
	}

	// One victim is the node everybody bootstrapped from: it has no
	// bootstrap of its own and must find the ring from the peers it
	// remembered before it died.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	victims := []*cluster.Node{first, nw.Nodes[1+rng.IntN(len(nw.Nodes)-1)]}
	if err := cluster.WaitFor(ctxFor(t, 10*time.Second), "the bootstrap node to save its peers", func() bool {
		_, err := os.Stat(filepath.Join(first.Dir, "peers.json"))
		return err == nil
	}); err != nil {
		t.Fatal(err)
	}
	var survivors []*cluster.Node
	for _, n := range nw.Nodes {
		if !slices.Contains(victims, n) {
			survivors = append(survivors, n)
		}
	}
	for _, v := range victims {
		t.Logf("killing %s", v.Name)
		if err := v.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "the survivors' ring", func() bool { return cluster.RingConsistent(survivors) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("survivors' ring consistent %v after the kills", time.Since(killed).Round(100*time.Millisecond))
	pingAll(t, survivors, 60*time.Second)

	for _, v := range victims {
		if err := v.Start(); err != nil {
			t.Fatal(err)
		}
	}
	restarted := time.Now()
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "the full ring again", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted nodes rejoined %v after restart", time.Since(restarted).Round(100*time.Millisecond))
	pingAll(t, nw.Nodes, 60*time.Second)
}

// TestTheBootstrapNodeStoppedAtOnceFindsItsRingAgain: the node everybody
// bootstrapped from has none of its own. Stopped (SIGTERM) as soon as the
// ring formed, before its periodic save of the peers it knows, it keeps
// them as it stops, and, started again, finds its ring from them: no
// member would dial it, as it said goodbye.
func TestTheBootstrapNodeStoppedAtOnceFindsItsRingAgain(t *testing.T) {
	_, nw := newJoiningRing(t, 4)
	first := nw.Nodes[0]
	startRing(t, nw)
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(first.Dir, "peers.json")); err != nil {
		t.Fatalf("the stopped bootstrap node kept no peers: %v", err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := cluster.WaitFor(ctxFor(t, 30*time.Second), "the full ring again", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("the bootstrap node rejoined %v after its restart", time.Since(restarted).Round(100*time.Millisecond))
}

// TestHeavyFlowMovesToAnOnDemandLink: on a bare ring (one successor, no
// long-distance links) a TCP flow between opposite nodes crosses bridges;
// above the threshold the ends open a direct link and the flow moves onto
// it without the connection breaking; once quiet, the link goes again.
func TestHeavyFlowMovesToAnOnDemandLink(t *testing.T) {
	_, nw := newJoiningRing(t, 8)
	for _, n := range nw.Nodes {
		n.Config.Overlay.Successors = 1
		n.Config.Overlay.LongDistance = "0"
		n.Config.Overlay.OnDemand = config.OnDemand{Threshold: 1e6, Window: time.Second, Idle: 3 * time.Second}
	}
	startRing(t, nw)
	ring := byRing(nw)
	a, b := ring[0], ring[len(ring)/2]
	onDemand := func() (bool, uint64) {
		st, err := a.Status()
		if err != nil {
			return false, 0
		}
		for _, l := range st.Links {
			if l.NodeID != b.ID.String() {
				continue
			}
			for _, ol := range st.Overlay.Links {
				if ol.Peer == l.NodeID && slices.Contains(ol.Local, "on-demand") {
					return true, l.TxBytes
				}
			}
		}
		return false, 0
	}
	if up, _ := onDemand(); up {
		t.Fatal("an on-demand link before any traffic")
	}
	if _, err := netlab.StartIperf3Server(b.Host); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		res, err := netlab.Iperf3(ctxFor(t, 30*time.Second), a.Host, b.Address.Addr(), 8)
		t.Logf("iperf3: %.0f Mbit/s, %d retransmits", res.BitsPerSecond/1e6, res.Retransmits)
		done <- err
	}()
	if err := cluster.WaitFor(ctxFor(t, 8*time.Second), "an on-demand link under load", func() bool { up, _ := onDemand(); return up }); err != nil {
		t.Fatal(err)
	}
	t.Logf("on-demand link up %v after the flow started", time.Since(start).Round(100*time.Millisecond))
	_, before := onDemand()
	if err := <-done; err != nil {
		t.Fatalf("the TCP flow broke while moving to the on-demand link: %v", err)
	}
	// The flow's bytes went over the direct link once it was up.
	up, after := onDemand()
	if !up || after-before < 10<<20 {
		t.Fatalf("the flow did not move onto the on-demand link: up %v, %d bytes on it during the rest of the flow", up, after-before)
	}
	t.Logf("%d MiB went over the on-demand link", (after-before)>>20)
	quiet := time.Now()
	if err := cluster.WaitFor(ctxFor(t, 20*time.Second), "the on-demand link to close when quiet", func() bool { up, _ := onDemand(); return !up }); err != nil {
		t.Fatal(err)
	}
	t.Logf("on-demand link closed %v after the flow ended", time.Since(quiet).Round(100*time.Millisecond))
}
