package bench

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
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
	subnet := virtualSubnet(len(allPeers))
	off := false
	var nodes []*cluster.Node
	for i, h := range []*netlab.Host{b.a, b.b, c} {
		node, err := nw.AddNode(h, "chain-"+h.Name, hostAddr(subnet, i+1))
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
	var toB, toC []time.Duration
	for range chainRounds {
		for _, target := range []struct {
			rtts *[]time.Duration
			addr netip.Addr
		}{{&toB, nodeB.Address.Addr()}, {&toC, nodeC.Address.Addr()}} {
			rtts, err := pingRTTs(ctx, nodeA.Host, target.addr, chainPings, chainInterval)
			if err != nil {
				return nil, t, err
			}
			*target.rtts = append(*target.rtts, rtts...)
		}
	}
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

// replyTime matches the round-trip time of one reply in ping's output.
var replyTime = regexp.MustCompile(`time=([0-9.]+) ms`)

// parseReplyTimes returns the round-trip time of every reply ping printed.
func parseReplyTimes(out string) []time.Duration {
	var rtts []time.Duration
	for _, m := range replyTime.FindAllStringSubmatch(out, -1) {
		ms, err := strconv.ParseFloat(m[1], 64)
		if err == nil {
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

func mean(ds []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total / time.Duration(len(ds))
}

// number is what median and spread summarize: durations, byte counts,
// CPU shares.
type number interface {
	~int | ~int64 | ~uint64 | ~float64
}

func median[T number](xs []T) T {
	sorted := slices.Sorted(slices.Values(xs))
	middle := len(sorted) / 2
	if len(sorted)%2 == 0 {
		return (sorted[middle-1] + sorted[middle]) / 2
	}
	return sorted[middle]
}
