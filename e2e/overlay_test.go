package e2e

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"burrow/netlab/cluster"
)

// TestSixteenNodesOrganizeFromOneBootstrap: each node knows one address;
// they build the ring with successor and long-distance links, every pair
// pings, two nodes die and the rest repair, they come back and rejoin.
func TestSixteenNodesOrganizeFromOneBootstrap(t *testing.T) {
	_, nw := newSelfOrganizing(t, 16)
	first := nw.Nodes[0]
	for _, n := range nw.Nodes {
		n.Config.Overlay.Stabilize = time.Second
		if n != first {
			n.Config.Overlay.Bootstrap = []string{first.Endpoint().String()}
		}
	}
	start := time.Now()
	startAll(t, nw)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}
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
