package bench

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// The chain's pings: chainRounds rounds, each chainPings pings at
// chainInterval to B and then to C. Alternating spreads the load of the
// other programs on the machine evenly over both paths.
const (
	chainRounds   = 5
	chainPings    = 100
	chainInterval = 5 * time.Millisecond
)

// ChainResult is the latency one burrow node adds as a switching hop.
type ChainResult struct {
	// Failed says what went wrong; the other fields are then unset.
	Failed string
	// Pings is how many pings each mean is made of.
	Pings int
	// RTTToB and RTTToC are A's mean round-trip times to its neighbour B
	// and, through B, to C.
	RTTToB, RTTToC time.Duration
	// PerHop is the one-way time B adds: (RTTToC - RTTToB) / 2.
	PerHop time.Duration
	// DirectLinks is set when A ended with more links than the one to B:
	// then part of its traffic may have bypassed B.
	DirectLinks bool
}

// runChain starts burrow nodes A, B, C on hosts a, b and a new host c,
// linked A—B—C only, and compares A's round-trip times to B and to C.
func (b *bencher) runChain(ctx context.Context) *ChainResult {
	fmt.Fprintf(b.progress, "== burrow chain A—B—C\n")
	r, t, err := b.chain(ctx)
	if err != nil {
		r = &ChainResult{Failed: err.Error()}
		fmt.Fprintf(b.progress, "   failed: %v\n%s", err, t.logTail(logTailLines))
	} else {
		fmt.Fprintf(b.progress, "   RTT A→B %s ms, A→C %s ms, per hop %s ms\n",
			millis(r.RTTToB), millis(r.RTTToC), millis(r.PerHop))
	}
	if err := t.stop(); err != nil {
		fmt.Fprintf(b.progress, "   stopping: %v\n", err)
	}
	return r
}

func (b *bencher) chain(ctx context.Context) (*ChainResult, *tunnel, error) {
	t := &tunnel{}
	c, err := b.lab.AddHost("c")
	if err != nil {
		return nil, t, err
	}
	nw, err := cluster.New(b.lab, "chain", b.opts.Burrow)
	if err != nil {
		return nil, t, err
	}
	subnet := virtualSubnet(len(allPeers))
	var nodes []*cluster.Node
	for i, h := range []*netlab.Host{b.a, b.b, c} {
		node, err := nw.AddNode(h, fmt.Sprintf("chain-%c", 'a'+i), hostAddr(subnet, i+1))
		if err != nil {
			return nil, t, err
		}
		node.Config.Log.Level = "info"
		nodes = append(nodes, node)
	}
	nodeA, nodeB, nodeC := nodes[0], nodes[1], nodes[2]
	nodeA.Dial(nodeB)
	nodeB.Dial(nodeC)
	for _, node := range nodes {
		if err := node.Start(); err != nil {
			return nil, t, err
		}
		t.add(node.Name, node.Process)
	}
	upCtx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	if err := t.waitFor(upCtx, "links A—B and B—C", func() bool {
		return nodeA.UpLinks() >= 1 && nodeB.UpLinks() >= 2 && nodeC.UpLinks() >= 1
	}); err != nil {
		return nil, t, err
	}
	// The first ping floods the ARP request and teaches the path.
	if err := t.waitFor(upCtx, "a ping from A to C", func() bool {
		res, err := netlab.Ping(upCtx, b.a, nodeC.Address.Addr(), 1, 200*time.Millisecond)
		return err == nil && res.Received == 1
	}); err != nil {
		return nil, t, err
	}
	var toB, toC meanRTT
	for range chainRounds {
		for _, target := range []struct {
			mean *meanRTT
			addr netip.Addr
		}{{&toB, nodeB.Address.Addr()}, {&toC, nodeC.Address.Addr()}} {
			res, err := netlab.Ping(ctx, b.a, target.addr, chainPings, chainInterval)
			if err != nil {
				return nil, t, err
			}
			target.mean.add(res)
		}
	}
	if toB.received == 0 || toC.received == 0 {
		return nil, t, fmt.Errorf("no replies: %d from B, %d from C", toB.received, toC.received)
	}
	r := &ChainResult{
		Pings:       chainRounds * chainPings,
		RTTToB:      toB.mean(),
		RTTToC:      toC.mean(),
		DirectLinks: nodeA.UpLinks() > 1,
	}
	r.PerHop = (r.RTTToC - r.RTTToB) / 2
	return r, t, nil
}

// meanRTT combines the means of several ping runs, weighted by replies.
type meanRTT struct {
	total    time.Duration
	received int
}

func (m *meanRTT) add(r netlab.PingResult) {
	m.total += r.AvgRTT * time.Duration(r.Received)
	m.received += r.Received
}

func (m *meanRTT) mean() time.Duration { return m.total / time.Duration(m.received) }
