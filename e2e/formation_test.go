package e2e

import (
	"net/netip"
	"testing"
	"time"

	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// TestFormationOfManyStartedAtOnce is the hard case for joins: 32 daemons
// started at once, every setting at its default, each knowing only the
// first node. Their ring must become consistent — every node joined, with
// its true successor and predecessor — and then an ARP broadcast must
// reach every TAP exactly once and never come back to its sender (a
// second one may, when the machine dropped the first for overload). The
// bound is generous for a loaded CI machine; `burrow bench formation`
// measures the real figures.
func TestFormationOfManyStartedAtOnce(t *testing.T) {
	const (
		size  = 32
		bound = 120 * time.Second
	)
	subnet := netip.MustParsePrefix("10.99.0.0/24")
	absent := netip.MustParseAddr("10.99.0.254") // no node has it: nobody answers in its place
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "e2e", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := nw.AddJoiningRing(size, subnet)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	startAll(t, nw)
	// Every status twice a second, as the benchmark reads them: reading
	// them as fast as they answer would compete with the joins.
	for ring := cluster.TakeRingSnapshot(nodes); !ring.Consistent(); ring = cluster.TakeRingSnapshot(nodes) {
		if time.Since(start) > bound {
			for _, p := range ring.Misplaced() {
				t.Log(ring.Describe(p))
			}
			t.Fatalf("the ring is not consistent after %v: %d of %d nodes joined, %d placed", bound, ring.Joined(), size, ring.Placed())
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("ring of %d consistent %v after the start", size, time.Since(start).Round(100*time.Millisecond))

	// A request lost to a machine too busy to keep up (a queue that
	// overflowed, in a daemon or a kernel) is lost as on any Ethernet;
	// the next one must then reach everyone. A request the flood lost, or
	// delivered twice, fails at once.
	for attempt := 1; ; attempt++ {
		before := cluster.ReadDrops(ctxFor(t, 30*time.Second), nodes)
		b, err := cluster.CountARPBroadcast(ctxFor(t, time.Minute), nodes[0], nodes, absent, 1)
		if err != nil {
			t.Fatal(err)
		}
		if b.Exact() {
			return
		}
		dropped := cluster.ReadDrops(ctxFor(t, 30*time.Second), nodes).Since(before)
		never, once, more := b.Tally(0)
		t.Logf("the ARP request reached %d TAPs once, %d never and %d more than once (%s); %d copies came back to the sender; dropped meanwhile: %s",
			once, never, more, b.Off(), b.Echoes, cluster.DescribeDrops(dropped.Total()))
		for _, n := range b.Missed() {
			t.Logf("%s dropped: %s", n.Label(), cluster.DescribeDrops(dropped[n]))
		}
		if more > 0 || b.Echoes > 0 || !dropped.Overloaded() || attempt == 2 {
			t.Fatal("the broadcast did not reach every TAP exactly once")
		}
	}
}
