package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Markdown renders the report as a dated section of docs/benchmarks.md.
func (r *RingReport) Markdown(m Machine) string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "## Ring run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(machineLines(m, r.LoadBefore, r.LoadAfter))
	fmt.Fprintf(&b, "- a plain ring of %d burrow daemons on one bridge without NAT, in node-ID order: overlay.successors %d, overlay.long_distance 0, "+
		"overlay.on_demand.enabled false, services.arp_answer false (so that every ARP request crosses the ring: with it on, "+
		"the asking node answers from its own table after the first), overlay.stabilize_every %v, every node joining through the first; "+
		"settled (consistent, each node linked to exactly its two ring neighbours)",
		o.Nodes, plainRingShape.successors, ringStabilize)
	if r.SettledAfter > 0 {
		fmt.Fprintf(&b, " %s s after the start", seconds(r.SettledAfter))
	}
	b.WriteString("\n")
	if r.Failed != "" {
		fmt.Fprintf(&b, "\nThe ring failed: %s\n", r.Failed)
		return b.String()
	}
	fmt.Fprintf(&b, "- from %s to the nodes 1 to %d hops along the ring: %d rounds of %d pings at %v to each in turn (%d each); "+
		"before that, a burst of %d pings to each, during which the links' byte counters showed which nodes forwarded them\n\n",
		r.Source, o.Hops, o.Rounds, o.Pings, ringPingInterval, o.Rounds*o.Pings, pathPings)
	var rows [][]string
	for _, t := range r.Targets {
		crossed := t.forwarders()
		if !t.PathAsExpected() {
			crossed += " (not the nodes in between)"
		}
		rows = append(rows, []string{fmt.Sprint(t.Hops), fmt.Sprint(t.Intermediate()), t.Node, crossed,
			fmt.Sprintf("%d of %d", len(t.Replies), t.Sent),
			millis(mean(t.Replies)), millis(median(t.Replies)), millis(percentile(t.Replies, 99)),
			millis(mean(t.Replies) / 2), millis(median(t.Replies) / 2)})
	}
	b.WriteString(markdownTable([]string{"hops", "nodes in between", "target", "forwarded by", "replies",
		"mean RTT (ms)", "median RTT (ms)", "p99 RTT (ms)", "mean one way (ms)", "median one way (ms)"}, rows))
	fmt.Fprintf(&b, "\n- per intermediate node, the slope of the one-way latency (RTT / 2) against the nodes in between, least squares over 1 to %d hops: "+
		"**%.3f ms** from the means, **%.3f ms** from the medians (the EdgeVPN paper: 0.37 ms per switching node); "+
		"one way over a direct link, the fit at no node in between: %.3f ms and %.3f ms\n",
		o.Hops, r.PerHop.Slope, r.MedianPerHop.Slope, r.PerHop.Intercept, r.MedianPerHop.Intercept)
	fmt.Fprintf(&b, "- step by step, one way from the medians: %s\n", steps(r.Targets))
	if a := r.ARP; a != nil {
		fmt.Fprintf(&b, "- ARP across the ring: arping -c %d -W %.2f on %s's TAP for the address of %s, %d hops either way: "+
			"%d of %d answered, p50 **%s ms**, p90 %s ms, min %s ms, max %s ms\n",
			a.Sent, arpingInterval.Seconds(), r.Source, a.Target, a.Hops, len(a.Replies), a.Sent,
			millis(percentile(a.Replies, 50)), millis(percentile(a.Replies, 90)),
			millis(slices.Min(a.Replies)), millis(slices.Max(a.Replies)))
	}
	if r.LinksAfter != "" {
		fmt.Fprintf(&b, "- warning: after the measurements the ring's links were no longer a plain ring (%s), so some pings may have taken another path\n", r.LinksAfter)
	}
	for _, t := range r.Targets {
		if !t.PathAsExpected() {
			fmt.Fprintf(&b, "- warning: the pings to %s were forwarded by %s, not by the nodes in between: its point of the fit is off\n", t.Node, t.forwarders())
		}
	}
	fmt.Fprintf(&b, "\nAgainst issue 14's target, switching cost ≤ %s ms one way per intermediate hop on a plain ring of %d (1–%d hops): %s from the means, %s from the medians\n",
		millis(targetPerHop), targetRingSize, targetRingHops,
		verdict(r.PerHop.Slope <= msFloat(targetPerHop)), verdict(r.MedianPerHop.Slope <= msFloat(targetPerHop)))
	return b.String()
}

// steps renders the change of the median one-way latency from each hop
// count to the next: "1→2 +0.031 ms, 2→3 +0.029 ms".
func steps(targets []*ringTarget) string {
	var parts []string
	for i := 1; i < len(targets); i++ {
		d := (median(targets[i].Replies) - median(targets[i-1].Replies)) / 2
		sign := "+"
		if d < 0 {
			sign, d = "−", -d
		}
		parts = append(parts, fmt.Sprintf("%d→%d hops %s%s ms", targets[i-1].Hops, targets[i].Hops, sign, millis(d)))
	}
	return strings.Join(parts, ", ")
}
