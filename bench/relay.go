package bench

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
)

// RelayOptions configures `burrow bench relay`.
type RelayOptions struct {
	// Seconds is the length of each iperf3 test.
	Seconds int
	// Rounds is how many times the direct and the relayed test run, in
	// turn.
	Rounds int
	// MaxRate is the public members' relay.max_rate in bytes per second;
	// zero for relayBenchRate, far above what the machine carries.
	MaxRate float64
	// Burrow is the burrow executable to measure.
	Burrow string
	// Progress receives a line per step as the run goes.
	Progress io.Writer
}

// relayBenchRate is the public members' relay.max_rate in the run: far
// above what the machine can carry, so that the relay path is measured
// and not the cap.
const relayBenchRate = 1 << 30

// targetRelayShare is the target: relayed throughput at least half
// of direct throughput on the same machine.
const targetRelayShare = 0.5

// RelayReport is the outcome of a relay run.
type RelayReport struct {
	Started time.Time
	Seconds int
	MaxRate float64
	// Relay is the public member that relayed c1–c2.
	Relay  string
	Rounds []relayRound
	// LoadBefore and LoadAfter are the one-minute load averages.
	LoadBefore, LoadAfter string
}

// relayRound is one direct test and one relayed test.
type relayRound struct {
	Direct, Relayed throughput
	// RelayCPUSeconds is the relaying member's CPU time during the
	// relayed test.
	RelayCPUSeconds float64
	// Queued and Dropped are the relayed datagrams that waited for the
	// pair's share and those dropped past its queue, during the test.
	Queued, Dropped uint64
}

func (r relayRound) share() float64 { return r.Relayed.BitsPerSecond / r.Direct.BitsPerSecond }

// relayLab is the relay run's lab: a beacon, public members p1 and p2
// that relay, and c1 and c2 behind symmetric NATs.
type relayLab struct {
	beacon, p1, p2, c1, c2 *cluster.Node
}

// RunRelay measures TCP throughput through a member relay against direct
// throughput between two public members, in the same run: with the beacon
// stopped, c1 and c2 (both behind symmetric NATs) reach each other only
// through p1 or p2; p1 and p2 link directly. The direct and the relayed
// iperf3 tests alternate, Rounds times.
func RunRelay(ctx context.Context, opts RelayOptions) (*RelayReport, error) {
	if opts.Seconds < 1 {
		return nil, fmt.Errorf("bench: seconds must be at least 1, not %d", opts.Seconds)
	}
	if opts.Rounds < 1 {
		return nil, fmt.Errorf("bench: rounds must be at least 1, not %d", opts.Rounds)
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	lab, err := newLab("burrow-bench-relay-", opts.Progress)
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	if opts.MaxRate <= 0 {
		opts.MaxRate = relayBenchRate
	}
	l, err := buildRelayLab(lab, opts.Burrow, opts.MaxRate)
	if err != nil {
		return nil, err
	}
	report := &RelayReport{Started: time.Now(), Seconds: opts.Seconds, MaxRate: opts.MaxRate, LoadBefore: loadAverage()}
	for _, n := range []*cluster.Node{l.beacon, l.p1, l.p2, l.c1, l.c2} {
		if err := n.Start(); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(opts.Progress, "== waiting for c1–c2 to be relayed and p1–p2 direct\n")
	if err := cluster.WaitFor(ctxTimeout(ctx, convergeTimeout), "c1–c2 relayed, p1–p2 direct", func() bool {
		return l.c1.PathTo(l.c2) == "relay" && l.c2.PathTo(l.c1) == "relay" && l.p1.PathTo(l.p2) == "direct"
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Progress, "== stopping the beacon\n")
	if err := l.beacon.Stop(); err != nil {
		return nil, err
	}
	var relay *cluster.Node
	if err := cluster.WaitFor(ctxTimeout(ctx, convergeTimeout), "c1–c2 relayed by p1 or p2", func() bool {
		relay = l.memberRelay()
		return relay != nil
	}); err != nil {
		return nil, err
	}
	report.Relay = relay.Name
	fmt.Fprintf(opts.Progress, "   c1–c2 relayed by %s\n", relay.Name)
	servers := map[*cluster.Node]*netlab.Process{}
	for _, n := range []*cluster.Node{l.p2, l.c2} {
		s, err := netlab.StartIperf3Server(n.Host)
		if err != nil {
			return nil, fmt.Errorf("iperf3 server on %s: %w", n.Name, err)
		}
		defer s.Stop()
		servers[n] = s
	}
	for round := 1; round <= opts.Rounds; round++ {
		var rr relayRound
		fmt.Fprintf(opts.Progress, "== round %d of %d\n", round, opts.Rounds)
		if rr.Direct, err = runIperf3(ctx, l.p1.Host, l.p2.Address.Addr(), opts.Seconds, 1); err != nil {
			return nil, fmt.Errorf("direct p1 → p2: %w", err)
		}
		cpuBefore, err := cpuSeconds(relay.Process.Pid())
		if err != nil {
			return nil, err
		}
		before, err := relay.Status()
		if err != nil {
			return nil, err
		}
		if rr.Relayed, err = runIperf3(ctx, l.c1.Host, l.c2.Address.Addr(), opts.Seconds, 1); err != nil {
			return nil, fmt.Errorf("relayed c1 → c2: %w", err)
		}
		cpuAfter, err := cpuSeconds(relay.Process.Pid())
		if err != nil {
			return nil, err
		}
		after, err := relay.Status()
		if err != nil {
			return nil, err
		}
		rr.RelayCPUSeconds = cpuAfter - cpuBefore
		rr.Queued, rr.Dropped = after.RelayQueued-before.RelayQueued, after.Drops["relay_limit"]-before.Drops["relay_limit"]
		if now := l.memberRelay(); now != relay {
			return nil, fmt.Errorf("c1–c2 left %s's relay during round %d", relay.Name, round)
		}
		fmt.Fprintf(opts.Progress, "   direct %.0f Mbit/s, relayed %.0f Mbit/s (%.0f %%)\n",
			rr.Direct.BitsPerSecond/1e6, rr.Relayed.BitsPerSecond/1e6, 100*rr.share())
		report.Rounds = append(report.Rounds, rr)
	}
	report.LoadAfter = loadAverage()
	return report, ctx.Err()
}

func buildRelayLab(lab *netlab.Lab, burrow string, maxRate float64) (*relayLab, error) {
	nw, err := cluster.New(lab, "relay", burrow)
	if err != nil {
		return nil, err
	}
	subnet := netip.MustParsePrefix("10.79.0.0/24")
	l := &relayLab{}
	on := true
	for i, spec := range []struct {
		name string
		nat  netlab.NAT
		node **cluster.Node
	}{{"beacon", netlab.NoNAT, &l.beacon}, {"p1", netlab.NoNAT, &l.p1}, {"p2", netlab.NoNAT, &l.p2},
		{"c1", netlab.Symmetric, &l.c1}, {"c2", netlab.Symmetric, &l.c2}} {
		var host *netlab.Host
		if spec.nat == netlab.NoNAT {
			host, err = lab.AddHost(spec.name)
		} else {
			var site *netlab.Site
			if site, err = lab.AddSite(spec.name+"-router", spec.nat); err != nil {
				return nil, err
			}
			host, err = site.AddHost(spec.name)
		}
		if err != nil {
			return nil, err
		}
		if *spec.node, err = nw.AddNode(host, spec.name, hostAddr(subnet, i+1)); err != nil {
			return nil, err
		}
	}
	l.beacon.Config.Beacon.Enabled = true
	for _, n := range nw.Nodes {
		n.Config.Log.Level = "info"
		n.Config.Links.Keepalive = pathsKeepalive
		n.Config.Links.DeadAfter = pathsDeadAfter
		n.Config.Overlay.Stabilize = pathsStabilize
		n.Config.Overlay.Successors = len(nw.Nodes) - 1 // a full mesh
		if n != l.beacon {
			n.Config.Beacons = []config.BeaconRef{{Address: l.beacon.Endpoint().String()}}
		}
	}
	for _, p := range []*cluster.Node{l.p1, l.p2} {
		p.Config.Relay.Enabled, p.Config.Relay.MaxRate = &on, maxRate
	}
	return l, nil
}

// memberRelay is p1 or p2 when both c1 and c2 say their link goes
// through it, nil otherwise.
func (l *relayLab) memberRelay() *cluster.Node {
	e1, e2 := l.c1.EndpointTo(l.c2), l.c2.EndpointTo(l.c1)
	for _, p := range []*cluster.Node{l.p1, l.p2} {
		if via := "relay:" + p.ID.Short(); e1 == via && e2 == via {
			return p
		}
	}
	return nil
}

func ctxTimeout(ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d)
	context.AfterFunc(ctx, cancel)
	return ctx
}

// Markdown renders the relay report as a dated section of
// docs/benchmarks.md.
func (r *RelayReport) Markdown(m Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Member relay run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(machineLines(m, r.LoadBefore, r.LoadAfter))
	rate := "far above what this machine carries, so the path is measured and not the cap"
	if r.MaxRate < relayBenchRate {
		rate = fmt.Sprintf("%.0f Mbit/s, so the cap is measured: what the relay paces and drops", r.MaxRate*8/1e6)
	}
	fmt.Fprintf(&b, "- lab: a beacon, public members p1 and p2 (relay.max_rate %.0f MiB/s, %s; the default for members is %.0f MiB/s), "+
		"c1 and c2 behind symmetric NATs; every member configured with just the beacon, a full mesh; the beacon stopped once the network formed, so c1–c2 is relayed by a member (%s)\n",
		r.MaxRate/(1<<20), rate, float64(config.DefaultRelayRate)/(1<<20), r.Relay)
	fmt.Fprintf(&b, "- each round: one iperf3 TCP stream for %d s p1 → p2 (direct), then c1 → c2 (through %s); rounds alternate on the same machine\n\n", r.Seconds, r.Relay)
	b.WriteString("| round | direct p1 → p2 (Mbit/s) | relayed c1 → c2 (Mbit/s) | relayed / direct | retransmits (direct / relayed) | relay CPU-s | datagrams paced / dropped by the relay |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	var shares []float64
	for i, rr := range r.Rounds {
		shares = append(shares, rr.share())
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.0f %% | %d / %d | %.2f | %d / %d |\n", i+1, rr.Direct.BitsPerSecond/1e6, rr.Relayed.BitsPerSecond/1e6,
			100*rr.share(), rr.Direct.Retransmits, rr.Relayed.Retransmits, rr.RelayCPUSeconds, rr.Queued, rr.Dropped)
	}
	switch {
	case len(shares) == 0:
	case r.MaxRate < relayBenchRate:
		var relayed []float64
		for _, rr := range r.Rounds {
			relayed = append(relayed, rr.Relayed.BitsPerSecond)
		}
		fmt.Fprintf(&b, "\nMedian relayed: %.0f Mbit/s, %.0f %% of relay.max_rate (the target of half the direct throughput is for an uncapped relay).\n",
			median(relayed)/1e6, 100*median(relayed)/(r.MaxRate*8))
	default:
		verdict := "met"
		if median(shares) < targetRelayShare {
			verdict = "not met"
		}
		fmt.Fprintf(&b, "\nMedian relayed / direct: %.0f %% (target ≥ %.0f %%: %s).\n", 100*median(shares), 100*targetRelayShare, verdict)
	}
	return b.String()
}
