package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"burrow/netlab/cluster"
)

// RingOptions configures `burrow bench ring`.
type RingOptions struct {
	// Nodes is the size of the ring, at least 2 × Hops.
	Nodes int
	// Hops is the farthest target, in hops from the source.
	Hops int
	// Rounds rounds of Pings pings to each target in turn give the RTTs.
	Rounds, Pings int
	// Arpings is how many ARP requests the source sends to the farthest
	// node.
	Arpings int
	// Burrow is the burrow executable to measure.
	Burrow string
	// Progress receives a line per step as the run goes.
	Progress io.Writer
}

// The ring's measurements.
const (
	ringPingInterval = 5 * time.Millisecond
	arpingInterval   = 20 * time.Millisecond
	// The path check: pathPings pings of pathPayload bytes every
	// pathInterval to a target, while the links' byte counters over
	// pathWindow tell which nodes forward them: each forwards about
	// 150 KB in the window, the ring's upkeep a few hundred bytes.
	pathPings    = 300
	pathPayload  = 1000
	pathInterval = 2 * time.Millisecond
	pathWindow   = 400 * time.Millisecond
	pathMinBytes = 50_000
)

// plainRingShape is a plain ring: each node linked to its successor and
// its predecessor only, and ARP answered by the node that has the address,
// not by the asker's node from its table, so that ARP requests cross the
// ring.
var plainRingShape = ringShape{name: "ring", successors: 1, arpAnswer: false}

// RingReport is the outcome of `burrow bench ring`.
type RingReport struct {
	Started time.Time
	Options RingOptions
	// SettledAfter is how long the ring took to settle from the start.
	SettledAfter time.Duration
	// Source is the node the pings and ARP requests come from.
	Source string
	// Targets are the nodes 1 to Hops hops from the source.
	Targets []*ringTarget
	// PerHop fits the targets' mean one-way latency against their
	// intermediate nodes, MedianPerHop their median; slopes in ms.
	PerHop, MedianPerHop line
	ARP                  *arpResult
	// LinksAfter, when set, says how the ring's links differed from a
	// plain ring after the measurements.
	LinksAfter string
	// Failed says why there are no numbers.
	Failed string
	// LoadBefore and LoadAfter are the one-minute load averages.
	LoadBefore, LoadAfter string
}

// ringTarget is one node the source pings.
type ringTarget struct {
	// Hops is how far it is from the source along the ring; Hops − 1
	// nodes lie in between.
	Hops int
	Node string
	// Crossed are the ring positions of the nodes that forwarded the
	// path check's pings, both ways.
	Crossed []int
	// Replies are the RTTs of the pings answered, of Sent.
	Sent    int
	Replies []time.Duration
}

// forwarders renders the positions that forwarded the path check's
// pings, "none" for none.
func (t *ringTarget) forwarders() string {
	if len(t.Crossed) == 0 {
		return "none"
	}
	return "positions " + positionList(t.Crossed)
}

// Intermediate is how many nodes lie between the source and the target.
func (t *ringTarget) Intermediate() int { return t.Hops - 1 }

// PathAsExpected says the pings crossed exactly the nodes between the
// source and the target along the ring, positions 1 to Hops − 1.
func (t *ringTarget) PathAsExpected() bool {
	want := make([]int, 0, t.Hops-1)
	for p := 1; p < t.Hops; p++ {
		want = append(want, p)
	}
	return slices.Equal(t.Crossed, want)
}

// arpResult is the time ARP requests took to be answered across the ring.
type arpResult struct {
	Target string
	Hops   int
	Sent   int
	// Replies are the reply times arping printed.
	Replies []time.Duration
}

func (o *RingOptions) validate() error {
	switch {
	case o.Hops < 2:
		return fmt.Errorf("bench: hops must be at least 2, for a slope, not %d", o.Hops)
	case o.Nodes < 2*o.Hops:
		return fmt.Errorf("bench: a ring of %d has no node %d hops away either way: nodes must be at least %d", o.Nodes, o.Hops, 2*o.Hops)
	case o.Nodes > 250:
		return fmt.Errorf("bench: at most 250 nodes fit in %s, not %d", ringSubnet, o.Nodes)
	case o.Rounds < 1 || o.Pings < 1 || o.Arpings < 1:
		return fmt.Errorf("bench: rounds, pings and arpings must be at least 1, not %d, %d, %d", o.Rounds, o.Pings, o.Arpings)
	}
	return nil
}

// RunRing builds a plain ring of burrow daemons and measures from its
// first node, in ring order: the RTT to the nodes 1 to Hops hops along
// the ring, the cost of each intermediate node as the slope of the
// one-way latency, and the time ARP takes across the ring. The error is
// for a lab that could not be built or a cancelled ctx; a ring that
// failed is reported as such.
func RunRing(ctx context.Context, opts RingOptions) (*RingReport, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	build, err := newFailoverBuild("burrow", opts.Burrow)
	if err != nil {
		return nil, err
	}
	report := &RingReport{Started: time.Now(), Options: opts, LoadBefore: loadAverage()}
	report.Options.Progress = nil
	start := time.Now()
	ring, err := startRing(ctx, build, plainRingShape, opts.Nodes, opts.Progress)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		report.Failed = err.Error()
		report.LoadAfter = loadAverage()
		return report, nil
	}
	report.SettledAfter = time.Since(start)
	err = ring.measure(ctx, report)
	err = errors.Join(err, ring.close())
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		report.Failed = err.Error()
		fmt.Fprintf(opts.Progress, "   failed: %s\n", report.Failed)
	}
	report.LoadAfter = loadAverage()
	return report, nil
}

// measure takes the ring's numbers from its first node.
func (r *daemonRing) measure(ctx context.Context, report *RingReport) error {
	opts := report.Options
	source := r.nodes[0]
	report.Source = r.describe(source)
	var addrs []netip.Addr
	for hops := 1; hops <= opts.Hops; hops++ {
		target := r.nodes[hops]
		if err := r.waitReachable(ctx, source, target); err != nil {
			return err
		}
		crossed, err := r.crossing(ctx, source, target)
		if err != nil {
			return err
		}
		t := &ringTarget{Hops: hops, Node: r.describe(target), Crossed: crossed, Sent: opts.Rounds * opts.Pings}
		fmt.Fprintf(r.progress, "   pings to %s forwarded by %s\n", t.Node, t.forwarders())
		report.Targets = append(report.Targets, t)
		addrs = append(addrs, target.Address.Addr())
	}
	fmt.Fprintf(r.progress, "   %d rounds of %d pings at %v to each of %d targets\n", opts.Rounds, opts.Pings, ringPingInterval, len(addrs))
	replies, err := interleavedRTTs(ctx, source.Host, addrs, opts.Rounds, opts.Pings, ringPingInterval)
	if err != nil {
		return err
	}
	for i, t := range report.Targets {
		if t.Replies = replies[i]; len(t.Replies) == 0 {
			return fmt.Errorf("no replies from %s", t.Node)
		}
		fmt.Fprintf(r.progress, "   %d hops: %d replies, mean %s ms, median %s ms\n", t.Hops, len(t.Replies), millis(mean(t.Replies)), millis(median(t.Replies)))
	}
	report.PerHop = fitPerHop(report.Targets, mean)
	report.MedianPerHop = fitPerHop(report.Targets, median[time.Duration])
	fmt.Fprintf(r.progress, "   per intermediate hop: %.3f ms from the means, %.3f ms from the medians\n", report.PerHop.Slope, report.MedianPerHop.Slope)

	far := r.nodes[len(r.nodes)/2]
	if report.ARP, err = r.arping(ctx, source, far, opts.Arpings); err != nil {
		return err
	}
	report.ARP.Hops = len(r.nodes) / 2
	fmt.Fprintf(r.progress, "   ARP to %s: %d of %d answered, p50 %s ms\n", report.ARP.Target, len(report.ARP.Replies), report.ARP.Sent, millis(median(report.ARP.Replies)))
	if err := cluster.RingLinked(r.nodes, r.shape.successors); err != nil {
		report.LinksAfter = err.Error()
	}
	return nil
}

// fitPerHop fits the one-way latency (half the RTT, as summarized) in
// milliseconds against the intermediate nodes.
func fitPerHop(targets []*ringTarget, summarize func([]time.Duration) time.Duration) line {
	var xs, ys []float64
	for _, t := range targets {
		xs = append(xs, float64(t.Intermediate()))
		ys = append(ys, msFloat(summarize(t.Replies))/2)
	}
	return fitLine(xs, ys)
}

// crossing pings the target in a burst and returns the ring positions of
// the nodes that forwarded the pings meanwhile.
func (r *daemonRing) crossing(ctx context.Context, source, target *cluster.Node) ([]int, error) {
	done := make(chan error, 1)
	go func() {
		_, err := source.Host.Run(ctx, "ping", "-n", "-q", "-c", strconv.Itoa(pathPings), "-s", strconv.Itoa(pathPayload),
			"-i", strconv.FormatFloat(pathInterval.Seconds(), 'f', 3, 64), "-W", "1", target.Address.Addr().String())
		done <- err
	}()
	forwarding := cluster.Forwarding(ctx, r.nodes, pathWindow, pathMinBytes, source, target)
	if err := <-done; err != nil {
		return nil, fmt.Errorf("path check to %s: %w", target.Name, err)
	}
	var positions []int
	for _, n := range forwarding {
		positions = append(positions, r.position(n))
	}
	slices.Sort(positions)
	return positions, nil
}

// arping sends ARP requests for the target's address from the source's
// TAP, each a broadcast that crosses the ring, and times the answers.
func (r *daemonRing) arping(ctx context.Context, source, target *cluster.Node, count int) (*arpResult, error) {
	deadline := time.Duration(count)*arpingInterval + 3*time.Second
	out, err := source.Host.Run(ctx, "arping", "-c", strconv.Itoa(count),
		"-W", strconv.FormatFloat(arpingInterval.Seconds(), 'f', 3, 64),
		"-w", strconv.Itoa(int(deadline.Seconds())), "-i", source.Config.TAP.Name, target.Address.Addr().String())
	res := &arpResult{Target: r.describe(target), Sent: count, Replies: parseArpingTimes(string(out))}
	if len(res.Replies) == 0 {
		return nil, fmt.Errorf("arping %s from %s: no replies: %v", target.Name, source.Name, err)
	}
	return res, nil
}

// arpingTime matches a reply in the output of Habets' arping:
// "42 bytes from 8a:b7:77:87:e7:42 (10.79.0.5): index=0 time=8.465 usec".
var arpingTime = regexp.MustCompile(`time=([0-9.]+) (nsec|usec|msec|sec)\b`)

// parseArpingTimes returns the reply times arping printed.
func parseArpingTimes(out string) []time.Duration {
	units := map[string]time.Duration{"nsec": time.Nanosecond, "usec": time.Microsecond, "msec": time.Millisecond, "sec": time.Second}
	var times []time.Duration
	for line := range strings.Lines(out) {
		m := arpingTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if v, err := strconv.ParseFloat(m[1], 64); err == nil {
			times = append(times, time.Duration(v*float64(units[m[2]])))
		}
	}
	return times
}
