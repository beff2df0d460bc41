package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"burrow/netlab"
)

// pairResult is the throughput and RTT between two nodes.
type pairResult struct {
	From, To string
	Class    pathClass
	// Failed says why there are no numbers: most often, the pair was not
	// on its class's path.
	Failed   string
	RTT      time.Duration
	PingLost int
	throughput
	// BeaconCPUSeconds is the beacon's CPU time during the iperf3 test;
	// RelayedDatagrams what the beacon's relay carried between the two,
	// both ways, during it.
	BeaconCPUSeconds float64
	RelayedDatagrams uint64
}

// beaconCPUPerGB is the beacon's CPU time per 10^9 bytes received.
func (p *pairResult) beaconCPUPerGB() float64 {
	return p.BeaconCPUSeconds / (float64(p.Bytes) / 1e9)
}

// measurePair checks that from and to are linked on their class's path,
// then pings and runs iperf3 from one to the other, timing the beacon's
// CPU and counting what its relay carries for them; a path that changed
// meanwhile voids the numbers.
func (r *pathsRun) measurePair(ctx context.Context, from, to *pathNode) *pairResult {
	p := &pairResult{From: from.Name, To: to.Name, Class: classify(from.nat, to.nat)}
	fmt.Fprintf(r.progress, "== %s → %s (%s)\n", from.Name, to.Name, p.Class)
	fail := func(format string, args ...any) *pairResult {
		p.Failed = fmt.Sprintf(format, args...)
		fmt.Fprintf(r.progress, "   failed: %s\n", p.Failed)
		return p
	}
	want := p.Class.statusPath()
	if err := r.checkPath(from, to, want); err != nil {
		return fail("%v", err)
	}
	target := to.Address.Addr()
	if err := r.waitUntil(ctx, upTimeout, "a ping through the link", func() bool {
		res, err := netlab.Ping(ctx, from.Host, target, 1, 200*time.Millisecond)
		return err == nil && res.Received == 1
	}); err != nil {
		return fail("%v", err)
	}
	ping, err := netlab.Ping(ctx, from.Host, target, pingCount, pingInterval)
	if err != nil || ping.Received == 0 {
		return fail("ping: %d of %d replies, %v", ping.Received, ping.Transmitted, err)
	}
	p.RTT, p.PingLost = ping.AvgRTT, ping.Transmitted-ping.Received

	server, err := netlab.StartIperf3Server(to.Host)
	if err != nil {
		return fail("iperf3 server: %v", err)
	}
	defer server.Stop()
	relayedBefore, err := r.relayedBetween(from, to)
	if err != nil {
		return fail("beacon status: %v", err)
	}
	cpuBefore, err := cpuSeconds(r.beacon.Process.Pid())
	if err != nil {
		return fail("beacon CPU time: %v", err)
	}
	tp, err := runIperf3(ctx, from.Host, target, r.opts.Seconds, 1)
	cpuAfter, cpuErr := cpuSeconds(r.beacon.Process.Pid())
	relayedAfter, relayErr := r.relayedBetween(from, to)
	if err := errors.Join(err, cpuErr, relayErr); err != nil {
		return fail("iperf3: %v", err)
	}
	if err := r.checkPath(from, to, want); err != nil {
		return fail("after iperf3: %v", err)
	}
	p.throughput = tp
	p.BeaconCPUSeconds = cpuAfter - cpuBefore
	p.RelayedDatagrams = relayedAfter - relayedBefore
	fmt.Fprintf(r.progress, "   ping %s ms; iperf3 %.0f Mbit/s, %d retransmits; beacon %.2f CPU-s, relayed %d datagrams\n",
		millis(p.RTT), tp.BitsPerSecond/1e6, tp.Retransmits, p.BeaconCPUSeconds, p.RelayedDatagrams)
	return p
}

// checkPath fails unless both ends report their link up on path want.
func (r *pathsRun) checkPath(x, y *pathNode, want string) error {
	if gx, gy := x.upPath(y), y.upPath(x); gx != want || gy != want {
		return fmt.Errorf("not on the %s path: %s says %q, %s says %q", want, x.Name, gx, y.Name, gy)
	}
	return nil
}

// relayedBetween is how many datagrams the beacon relayed between x and
// y, both ways, so far.
func (r *pathsRun) relayedBetween(x, y *pathNode) (uint64, error) {
	st, err := r.beacon.Status()
	if err != nil {
		return 0, err
	}
	ids := []string{x.ID.String(), y.ID.String()}
	var n uint64
	for _, p := range st.RelayPairs {
		if slices.Contains(ids, p.From) && slices.Contains(ids, p.To) {
			n += p.Datagrams
		}
	}
	return n, nil
}
