package bench

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// The chain's pings: chainRounds rounds, each chainPings pings at
// chainInterval to B and then to C. Alternating often spreads the load of
// the other programs on the machine evenly over both paths: in four
// repeats on one chain on the shared 2-core machine, 25 rounds of 20 gave
// per-hop values of 0.019 to 0.030 ms, 5 rounds of 100 0.010 to 0.042 ms.
const (
	chainRounds   = 25
	chainPings    = 20
	chainInterval = 5 * time.Millisecond
)

// ChainResult is the latency one burrow node adds as a switching hop.
type ChainResult struct {
	// Failed says what went wrong; the other fields are then unset.
	Failed string
	// Sent pings went to each of B and C, which answered RepliesFromB and
	// RepliesFromC of them.
	Sent, RepliesFromB, RepliesFromC int
	// RTTToB and RTTToC are A's mean round-trip times to its neighbour B
	// and, through B, to C; the medians are less swayed by the rare reply
	// that waited for a CPU the machine's other programs held.
	RTTToB, RTTToC       time.Duration
	MedianToB, MedianToC time.Duration
	// PerHop is the one-way time B adds, (RTTToC - RTTToB) / 2, and
	// MedianPerHop the same from the medians.
	PerHop, MedianPerHop time.Duration
	// DirectLinks is set when A ended with more links than the one to B,
	// which its configuration forbids: then part of its traffic may have
	// bypassed B.
	DirectLinks bool
}

// runChain starts burrow nodes on hosts a, b and a new host c, linked
// A—B—C only, and compares A's round-trip times to B and to C.
func (b *bencher) runChain(ctx context.Context) *ChainResult {
	fmt.Fprintf(b.progress, "== burrow chain A—B—C\n")
	r, t, err := b.chain(ctx)
	if err != nil {
		r = &ChainResult{Failed: err.Error()}
		fmt.Fprintf(b.progress, "   failed: %v\n%s", err, t.logTail(logTailLines))
	} else {
		fmt.Fprintf(b.progress, "   mean RTT A→B %s ms, A→C %s ms, per hop %s ms (from medians %s ms)\n",
			millis(r.RTTToB), millis(r.RTTToC), millis(r.PerHop), millis(r.MedianPerHop))
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
	off := false
	var nodes []*cluster.Node
	for i, h := range []*netlab.Host{b.a, b.b, c} {
		node, err := nw.AddNode(h, "chain-"+h.Name, hostAddr(chainSubnet, i+1))
		if err != nil {
			return nil, t, err
		}
		node.Config.Log.Level = "info"
		// Only the configured links: neither the ring nor an on-demand
		// link may join A and C directly.
		node.Config.Overlay.Enabled = &off
		node.Config.Overlay.OnDemand.Enabled = &off
		nodes = append(nodes, node)
	}
	// Bounded Flood relies on the ring: B forwards A's broadcasts only to
	// peers between itself and A clockwise. So the chain follows the ring,
	// A, B, C in node ID order; against it, A's ARP request for C would
	// never get past B.
	slices.SortFunc(nodes, func(x, y *cluster.Node) int { return x.ID.Compare(y.ID) })
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
		res, err := netlab.Ping(upCtx, nodeA.Host, nodeC.Address.Addr(), 1, 200*time.Millisecond)
		return err == nil && res.Received == 1
	}); err != nil {
		return nil, t, err
	}
	replies, err := interleavedRTTs(ctx, nodeA.Host, []netip.Addr{nodeB.Address.Addr(), nodeC.Address.Addr()},
		chainRounds, chainPings, chainInterval)
	if err != nil {
		return nil, t, err
	}
	toB, toC := replies[0], replies[1]
	if len(toB) == 0 || len(toC) == 0 {
		return nil, t, fmt.Errorf("no replies: %d from B, %d from C", len(toB), len(toC))
	}
	r := &ChainResult{
		Sent:         chainRounds * chainPings,
		RepliesFromB: len(toB),
		RepliesFromC: len(toC),
		RTTToB:       mean(toB),
		RTTToC:       mean(toC),
		MedianToB:    median(toB),
		MedianToC:    median(toC),
		DirectLinks:  nodeA.UpLinks() > 1,
	}
	r.PerHop = (r.RTTToC - r.RTTToB) / 2
	r.MedianPerHop = (r.MedianToC - r.MedianToB) / 2
	return r, t, nil
}

// interleavedRTTs pings each target in turn, pings at a time at interval,
// for rounds rounds, and returns the reply times of each target. Taking
// turns often spreads the load of the machine's other programs evenly
// over the targets.
func interleavedRTTs(ctx context.Context, from *netlab.Host, targets []netip.Addr, rounds, pings int, interval time.Duration) ([][]time.Duration, error) {
	replies := make([][]time.Duration, len(targets))
	for range rounds {
		for i, addr := range targets {
			rtts, err := pingRTTs(ctx, from, addr, pings, interval)
			if err != nil {
				return nil, err
			}
			replies[i] = append(replies[i], rtts...)
		}
	}
	return replies, nil
}

// replyTime matches the round-trip time of one reply in ping's output.
var replyTime = regexp.MustCompile(`time=([0-9.]+) ms`)

// parseReplyTimes returns the round-trip time of every reply ping printed,
// leaving out duplicates (a reply ping marks "DUP!"): one per request.
func parseReplyTimes(out string) []time.Duration {
	var rtts []time.Duration
	for line := range strings.Lines(out) {
		m := replyTime.FindStringSubmatch(line)
		if m == nil || strings.Contains(line, "DUP!") {
			continue
		}
		if ms, err := strconv.ParseFloat(m[1], 64); err == nil {
			rtts = append(rtts, time.Duration(ms*float64(time.Millisecond)))
		}
	}
	return rtts
}

// pingRTTs sends count pings from h to addr and returns the round-trip
// time of each reply; lost replies are no error.
func pingRTTs(ctx context.Context, h *netlab.Host, addr netip.Addr, count int, interval time.Duration) ([]time.Duration, error) {
	out, err := h.Run(ctx, "ping", "-n", "-c", strconv.Itoa(count),
		"-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "1", addr.String())
	rtts := parseReplyTimes(string(out))
	if len(rtts) == 0 && err != nil {
		return nil, err
	}
	return rtts, nil
}
