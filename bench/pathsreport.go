package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"burrow/netlab"
)

// targetDirectSetup is burrow's target for a direct link's set-up time in
// the lab; the EdgeVPN paper's E11 measured 2.4 s on average.
const targetDirectSetup = 500 * time.Millisecond

// Markdown renders the paths report as a dated section of
// docs/benchmarks.md.
func (r *PathsReport) Markdown(m Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Paths run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(machineLines(m, r.LoadBefore, r.LoadAfter))
	fmt.Fprintf(&b, "- lab: a beacon on the lab's internet (burrow UDP port and plain ws:// on port %d); "+
		"a and b behind endpoint-independent NATs, c1 and c2 behind symmetric NATs, d behind a router that lets only TCP 443 out; "+
		"every member configured with just the beacon (address and WebSocket URL), overlay.successors %d (a full mesh); "+
		"links.keepalive %v, links.dead_after %v, overlay.stabilize_every %v, as in the e2e NAT tests; "+
		"the beacon relays at most %.0f MiB/s, %.0f Mbit/s (relay.max_rate, its default)\n",
		beaconWebSocketPort, len(pathSites), pathsKeepalive, pathsDeadAfter, pathsStabilize, r.BeaconRelayRate/(1<<20), r.BeaconRelayRate*8/1e6)
	fmt.Fprintf(&b, "- every pair linked on its path, at both ends, %s s after starting the six nodes\n\n", seconds(r.ConvergedAfter))

	fmt.Fprintf(&b, "### Link set-up after a restart\n\n")
	fmt.Fprintf(&b, "In each of %d rounds, %s were stopped and started again in turn, keeping key and state directory and knowing only the beacon, "+
		"each twice: once with the NAT routers' state kept, as after a quick restart (the routers still hold the node's mappings, and the holes its peers punched toward it), "+
		"and once with it cleared (every router's connection tracking entries for the node deleted before the start), as for a node the routers have not seen lately. "+
		"Each restart waited until the others had dropped their links to the node. "+
		"Up = from starting the process to the link's `since` in its `burrow status`; "+
		"on path = until the link was on the path of its row (the same unless it came up on another path first, then timed by polling status every %v); "+
		"handshake RTT = the link's `rtt_ms` once on that path.\n\n",
		r.Rounds, joinNames(restartedNodes), statusPoll)
	for _, cleared := range []bool{false, true} {
		fmt.Fprintf(&b, "NAT state %s:\n\n", natStateTitles[cleared])
		b.WriteString(setupTable(restartsWith(r.Restarts, cleared)))
		b.WriteString("\n")
	}
	b.WriteString(restartTable(r.Restarts, natOfNode))
	b.WriteString("\n")
	b.WriteString(setupTargets(r.Restarts))

	fmt.Fprintf(&b, "\n### Throughput and RTT by path\n\n")
	fmt.Fprintf(&b, "Each pair's path checked at both ends in `burrow status` before and after; then %d pings at %v and one iperf3 TCP stream for %d s from the first to the second. "+
		"Beacon CPU = its utime + stime during the iperf3 run; relayed = datagrams its relay carried between the two, both ways, meanwhile.\n\n",
		pingCount, pingInterval, r.Seconds)
	b.WriteString(pairTable(r.Pairs, r.BeaconRelayRate))
	fmt.Fprintf(&b, "\nBeacon peak RSS over the whole run: %.1f MiB.\n", mib(r.BeaconPeakRSS))
	b.WriteString(pathsFailures(r))
	return b.String()
}

// natOfNode is the NAT kind of a restarted node, for the report.
func natOfNode(name string) netlab.NAT {
	for _, s := range pathSites {
		if s.name == name {
			return s.nat
		}
	}
	return netlab.NoNAT
}

// restartsWith returns the restarts with the NAT state cleared, or kept.
func restartsWith(restarts []*restartResult, clearedNAT bool) []*restartResult {
	var out []*restartResult
	for _, res := range restarts {
		if res.ClearedNAT == clearedNAT {
			out = append(out, res)
		}
	}
	return out
}

// setupTable has one row per path class: how long links of that class
// took to come up after their node started.
func setupTable(restarts []*restartResult) string {
	byClass := map[pathClass][]*linkSetup{}
	for _, res := range restarts {
		for _, l := range res.Links {
			byClass[l.Class] = append(byClass[l.Class], l)
		}
	}
	if len(byClass) == 0 {
		return "No link came up after a restart.\n"
	}
	var b strings.Builder
	b.WriteString("| path | links | up (s) min / median / max | on path (s) min / median / max | handshake RTT (ms) median / max | came up on another path first |\n")
	b.WriteString("| --- | ---: | --- | --- | --- | --- |\n")
	for _, class := range slices.Sorted(maps.Keys(byClass)) {
		links := byClass[class]
		var up, onPath, rtts []time.Duration
		firstPaths := map[string]int{}
		for _, l := range links {
			up = append(up, l.UpAfter)
			if l.OnPathAfter > 0 {
				onPath = append(onPath, l.OnPathAfter)
				rtts = append(rtts, l.RTT)
			}
			if l.FirstPath != class.statusPath() {
				firstPaths[l.FirstPath]++
			}
		}
		moved := "none"
		if len(firstPaths) > 0 {
			moved = countList(firstPaths)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n",
			class, len(links), spread(up, seconds), spread(onPath, seconds), medianMax(rtts), moved)
	}
	return b.String()
}

// restartTable has one row per restarted node and NAT state: its first
// link, and all of them on their paths.
func restartTable(restarts []*restartResult, natOf func(string) netlab.NAT) string {
	if len(restarts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| restarted node | NAT state | restarts | first link up (s) min / median / max | first link to | all links on their paths (s) min / median / max |\n")
	b.WriteString("| --- | --- | ---: | --- | --- | --- |\n")
	type row struct {
		node    string
		cleared bool
	}
	var order []row
	byRow := map[row][]*restartResult{}
	for _, res := range restarts {
		key := row{res.Node, res.ClearedNAT}
		if byRow[key] == nil {
			order = append(order, key)
		}
		byRow[key] = append(byRow[key], res)
	}
	for _, key := range order {
		var first, all []time.Duration
		firstPeers := map[string]int{}
		for _, res := range byRow[key] {
			if l := res.firstLink(); l != nil {
				first = append(first, l.UpAfter)
				firstPeers[l.Peer]++
			}
			if d, ok := res.allOnPathAfter(); ok {
				all = append(all, d)
			}
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %d | %s | %s | %s |\n",
			key.node, natOf(key.node), natStateTitles[key.cleared], len(byRow[key]), spread(first, seconds), countList(firstPeers), spread(all, seconds))
	}
	return b.String()
}

// setupTargets checks direct links' set-up times against the target.
func setupTargets(restarts []*restartResult) string {
	var b strings.Builder
	for _, class := range []pathClass{directToBeacon, holePunched} {
		for _, cleared := range []bool{false, true} {
			var onPath []time.Duration
			for _, res := range restartsWith(restarts, cleared) {
				for _, l := range res.Links {
					if l.Class == class && l.OnPathAfter > 0 {
						onPath = append(onPath, l.OnPathAfter)
					}
				}
			}
			if len(onPath) == 0 {
				continue
			}
			med, worst := median(onPath), slices.Max(onPath)
			fmt.Fprintf(&b, "- %s, NAT state %s: median %s s, max %s s (target < %s s; the EdgeVPN paper's E11: 2.4 s on average): %s by the median, %s by the max\n",
				class, natStateTitles[cleared], seconds(med), seconds(worst), seconds(targetDirectSetup),
				verdict(med < targetDirectSetup), verdict(worst < targetDirectSetup))
		}
	}
	return b.String()
}

// nearRelayCap is the share of the beacon's relay cap above which a
// relayed pair's throughput is marked as limited by it rather than by
// what the beacon can carry.
const nearRelayCap = 0.9

// pairTable has one row per measured pair; relayRate is the beacon's
// relay cap in bytes per second.
func pairTable(pairs []*pairResult, relayRate float64) string {
	var b strings.Builder
	b.WriteString("| pair | path | ping RTT (ms) | TCP (Mbit/s) | retransmits | beacon CPU-s | beacon CPU-s/GB | relayed (datagrams) |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range pairs {
		if p.Failed != "" {
			fmt.Fprintf(&b, "| %s → %s | %s | not measured: %s | | | | | |\n", p.From, p.To, p.Class, p.Failed)
			continue
		}
		rtt := millis(p.RTT)
		if p.PingLost > 0 {
			rtt += fmt.Sprintf(" (%d lost)", p.PingLost)
		}
		// Per GB only where the beacon carries the pair's traffic.
		perGB := "–"
		if p.Class.statusPath() == "relay" {
			perGB = fmt.Sprintf("%.2f", p.beaconCPUPerGB())
		}
		tcp := fmt.Sprintf("%.0f", p.BitsPerSecond/1e6)
		if p.Class.statusPath() == "relay" && p.BitsPerSecond >= nearRelayCap*relayRate*8 {
			tcp += fmt.Sprintf(" (relay cap %.0f)", relayRate*8/1e6)
		}
		fmt.Fprintf(&b, "| %s → %s | %s | %s | %s | %d | %.2f | %s | %d |\n",
			p.From, p.To, p.Class, rtt, tcp, p.Retransmits, p.BeaconCPUSeconds, perGB, p.RelayedDatagrams)
	}
	return b.String()
}

// pathsFailures lists the restarts that did not settle in time.
func pathsFailures(r *PathsReport) string {
	var b strings.Builder
	for i, res := range r.Restarts {
		if res.Failed != "" {
			fmt.Fprintf(&b, "- restart %d (%s, NAT state %s): %s\n", i+1, res.Node, natStateTitles[res.ClearedNAT], res.Failed)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nRestarts that did not settle (their links that did are in the tables):\n\n" + b.String()
}

// spread renders min / median / max, or "–" without values.
func spread[T number](xs []T, format func(T) string) string {
	if len(xs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s", format(slices.Min(xs)), format(median(xs)), format(slices.Max(xs)))
}

// medianMax renders round-trip times as median / max in milliseconds.
func medianMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s", millis(median(ds)), millis(slices.Max(ds)))
}

// countList renders counts as "x ×2, y ×1", most first, then by name.
func countList(counts map[string]int) string {
	if len(counts) == 0 {
		return "–"
	}
	names := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(names, func(x, y string) int { return counts[y] - counts[x] })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s ×%d", name, counts[name])
	}
	return strings.Join(parts, ", ")
}

// joinNames renders "a, c1 and d".
func joinNames(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
