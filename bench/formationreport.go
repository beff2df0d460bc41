package bench

import (
	"fmt"
	"slices"
	"strings"

	"burrow/netlab/cluster"
)

// detailLines caps each list of nodes in the report's details; the
// progress output has them all.
const detailLines = 20

// Markdown renders the formation report as a dated section of
// docs/benchmarks.md.
func (r *FormationReport) Markdown(m Machine) string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "## Formation run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(machineLines(m, r.LoadBefore, r.LoadAfter))
	fmt.Fprintf(&b, "- lab: each size on a lab of its own, that many hosts on one bridge (no NAT), one `burrow up` each "+
		"with every setting at its default, as a new user has them, "+
		"every node but n0 given n0 as its only overlay.bootstrap contact; all started at once; limit %v per size\n", o.Limit)
	fmt.Fprintf(&b, "- joined: `joined` is true in the `overlay` part of the node's `burrow status --json`; placed: joined, and its first of `successors` and its `predecessor` there "+
		"are its true neighbours by node ID; the ring is consistent when every node is placed. "+
		"Times run from starting the first daemon to the reading of the status that showed it; "+
		"every daemon's status is read, %d at a time, at most every %v, so a time is late by up to one reading (last column)\n\n",
		cluster.StatusReaders, snapshotEvery)
	b.WriteString(formationTable(r.Results))
	if phases := phasesTable(r.Results); phases != "" {
		b.WriteString("\nWhere each join spent its time, by the daemons' own clocks (the `formation` part of `overlay` in `burrow status --json`, read after the quiet window below): " +
			"seconds from each daemon's start to its first link up, to joined (its link to its first successor up), to settled (its successor names it as predecessor " +
			"and its link to its predecessor is up) and to all its long-distance links up:\n\n")
		b.WriteString(phases)
	}
	if quiet := idleTable(r.Results); quiet != "" {
		fmt.Fprintf(&b, "\nOnce formed, after %v untouched (no status reads, no traffic): RSS = VmRSS at the end, peak = VmHWM; "+
			"idle CPU = utime + stime over the %v; PSS = proportional set size, pages shared among the daemons (the binary's) divided among them, so that they add up; "+
			"MemAvailable fell by = from before the lab was built: the daemons, their namespaces, links and TAPs, and whatever the machine's other programs took or gave back meanwhile:\n\n", o.Quiet, o.Quiet)
		b.WriteString(quiet)
	}
	if bc := broadcastTable(r.Results); bc != "" {
		fmt.Fprintf(&b, "\nBroadcast: the node in the middle of the start order runs `arping -c %d` for %s, an address no node has, "+
			"while tcpdump on the watched TAPs (all others, or at most %d spread evenly around the ring) notes each arriving request; "+
			"a copy belongs to the last request that left the sender's TAP before it. Bounded Flood promises exactly once everywhere:\n\n",
			broadcastRequests, absentAddress, o.Sample)
		b.WriteString(bc)
	}
	if churn := formationChurnTable(r.Results); churn != "" {
		fmt.Fprintf(&b, "\nChurn: %.0f %% of the daemons, picked at random, killed at once (SIGKILL) and started again %v later "+
			"(RestartSec of the packaged systemd unit); times from the restart:\n\n", churnShare*100, restartPause)
		b.WriteString(churn)
	}
	if soak := soakTable(r.Results); soak != "" {
		fmt.Fprintf(&b, "\nSoak: for %v, one of the churned daemons killed every %v, in turn, and started again %v later; "+
			"the ring read every %v meanwhile. Long-lived daemons (never killed) are flagged when their open files grew by more than %d "+
			"or their RSS by more than %.0f %% and %d MiB:\n\n",
			o.Soak, o.SoakEvery, restartPause, snapshotEvery, filesGrowthAllowed, rssGrowthShare*100, rssGrowthFloor>>20)
		b.WriteString(soak)
	}
	for _, res := range r.Results {
		b.WriteString(formationDetails(res))
	}
	return b.String()
}

// formationTable has one row per size: how its ring formed.
func formationTable(results []*FormationResult) string {
	var rows [][]string
	for _, res := range results {
		c := res.Formation
		if c == nil {
			continue
		}
		rows = append(rows, []string{
			fmt.Sprint(res.Nodes), seconds(res.StartedWithin), joinedSpread(c), allJoined(c), consistentAfter(c),
			dropList(c.Drops), spread(c.SnapshotTimes, seconds),
		})
	}
	if len(rows) == 0 {
		return "No size ran.\n"
	}
	return markdownTable([]string{"nodes", "all started within (s)", "joined (s) min / median / max", "all joined (s)",
		"ring consistent (s)", "joined count went down", "one reading (s) min / median / max"}, rows)
}

// phasesTable has one row per size whose phases were read.
func phasesTable(results []*FormationResult) string {
	var rows [][]string
	for _, res := range results {
		p := res.Phases
		if p == nil {
			continue
		}
		phase := func(xs []float64) string {
			if len(xs) == 0 {
				return fmt.Sprintf("none of %d", p.Read)
			}
			s := fmt.Sprintf("%.2f / %.2f / %.2f", percentile(xs, 50), percentile(xs, 90), slices.Max(xs))
			if len(xs) < p.Read {
				s += fmt.Sprintf(" (%d of %d)", len(xs), p.Read)
			}
			return s
		}
		rows = append(rows, []string{fmt.Sprint(res.Nodes), fmt.Sprint(p.Read),
			phase(p.FirstLink), phase(p.Joined), phase(p.Settled), phase(p.LongLinks), fmt.Sprint(p.Unjoins)})
	}
	if len(rows) == 0 {
		return ""
	}
	return markdownTable([]string{"nodes", "statuses read", "first link (s) median / p90 / max", "joined (s) median / p90 / max",
		"settled (s) median / p90 / max", "all long links (s) median / p90 / max", "unjoins, all daemons"}, rows)
}

// idleTable has one row per size that idled.
func idleTable(results []*FormationResult) string {
	var rows [][]string
	for _, res := range results {
		q := res.Idle
		if q == nil {
			continue
		}
		rows = append(rows, []string{
			fmt.Sprint(res.Nodes), spread(q.RSS, mibText), mibText(slices.Max(q.PeakRSS)),
			spread(q.cpuPercents(), percent), percent(sum(q.cpuPercents())), yesNo(q.StillConsistent),
			fmt.Sprintf("%.2f", gib(sum(q.PSS))), fmt.Sprintf("%.2f", gib(res.MemoryUsed)),
		})
	}
	if len(rows) == 0 {
		return ""
	}
	return markdownTable([]string{"nodes", "RSS (MiB) min / median / max", "peak RSS (MiB) max",
		"idle CPU per daemon (% of a core) min / median / max", "all daemons (% of a core)", "ring still consistent",
		"all daemons' PSS (GiB)", "MemAvailable fell by (GiB)"}, rows)
}

// broadcastTable has one row per size and request.
func broadcastTable(results []*FormationResult) string {
	var rows [][]string
	for _, res := range results {
		bc := res.Broadcast
		if bc == nil {
			continue
		}
		for i := range bc.Sent {
			never, once, more := bc.Tally(i)
			rows = append(rows, []string{fmt.Sprint(res.Nodes), bc.Sender.Name, fmt.Sprint(len(bc.Seen)), fmt.Sprint(i + 1),
				fmt.Sprint(never), fmt.Sprint(once), fmt.Sprint(more), fmt.Sprint(bc.Echoes)})
		}
	}
	if len(rows) == 0 {
		return ""
	}
	return markdownTable([]string{"nodes", "sender", "TAPs watched", "request", "seen never", "seen once", "seen more than once",
		"copies back at the sender (all requests)"}, rows)
}

// formationChurnTable has one row per size that churned.
func formationChurnTable(results []*FormationResult) string {
	var rows [][]string
	for _, res := range results {
		ch := res.Churn
		if ch == nil {
			continue
		}
		c := ch.Reconvergence
		rows = append(rows, []string{fmt.Sprint(res.Nodes), fmt.Sprint(len(ch.Victims)), joinedSpread(c), allJoined(c),
			consistentAfter(c), dropList(c.Drops)})
	}
	if len(rows) == 0 {
		return ""
	}
	return markdownTable([]string{"nodes", "killed", "the killed joined again (s) min / median / max", "all joined (s)",
		"ring consistent again (s)", "joined count went down"}, rows)
}

// soakTable has one row per size that soaked.
func soakTable(results []*FormationResult) string {
	var rows [][]string
	for _, res := range results {
		s := res.Soak
		if s == nil {
			continue
		}
		var rssStart, rssEnd []uint64
		var filesStart, filesEnd []int
		flagged := 0
		for _, d := range s.Daemons {
			if d.Restarted {
				continue
			}
			rssStart, rssEnd = append(rssStart, d.RSSStart), append(rssEnd, d.RSSEnd)
			filesStart, filesEnd = append(filesStart, d.FilesStart), append(filesEnd, d.FilesEnd)
			if d.grew() {
				flagged++
			}
		}
		rows = append(rows, []string{
			fmt.Sprint(res.Nodes), fmt.Sprint(s.Kills), fmt.Sprintf("%d of %d", s.Consistent, s.Readings), fmt.Sprint(s.MinJoined),
			spread(s.BackAfter, seconds), fmt.Sprint(s.NotBack), consistentAfter(s.Final),
			fmt.Sprintf("%d: %s → %s", len(rssStart), spread(rssStart, mibText), spread(rssEnd, mibText)),
			fmt.Sprintf("%s → %s", spread(filesStart, fileCount), spread(filesEnd, fileCount)), fmt.Sprint(flagged),
		})
	}
	if len(rows) == 0 {
		return ""
	}
	return markdownTable([]string{"nodes", "kills", "readings that found the ring consistent (none can while a daemon is down)", "fewest joined", "consistent again before the next kill (s after the restart)",
		"not before the next kill", "consistent after the last restart (s)", "long-lived daemons: RSS (MiB) at the start → at the end, min / median / max",
		"their open files, start → end", "flagged"}, rows)
}

// formationDetails lists, for one size, what the tables only count: the
// nodes misplaced at the limit, the falls from joined, the TAPs that did
// not see a request exactly once, the flagged daemons, a failure.
func formationDetails(res *FormationResult) string {
	var b strings.Builder
	item := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(&b, "- %s:\n", title)
		for _, l := range lines[:min(len(lines), detailLines)] {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
		if len(lines) > detailLines {
			fmt.Fprintf(&b, "  - and %d more\n", len(lines)-detailLines)
		}
	}
	if res.Skipped != "" {
		fmt.Fprintf(&b, "- skipped: %s\n", res.Skipped)
	}
	if res.Failed != "" {
		fmt.Fprintf(&b, "- failed: %s\n", res.Failed)
	}
	if c := res.Formation; c != nil {
		item(fmt.Sprintf("misplaced %v after the start", c.Limit), c.Misplaced)
		item("said joined, later not joined (while forming)", c.Unjoined)
	}
	if q := res.Idle; q != nil && !q.StillConsistent {
		item("misplaced after the quiet window", q.Misplaced)
	}
	if bc := res.Broadcast; bc != nil && bc.Off() != "" {
		item("TAPs that did not see each request exactly once (copies of request 1, 2, …)", strings.Split(bc.Off(), "; "))
		lines := []string{"all nodes: " + cluster.DescribeDrops(res.BroadcastDrops.Total())}
		for _, n := range bc.Missed() {
			lines = append(lines, n.Name+": "+cluster.DescribeDrops(res.BroadcastDrops[n]))
		}
		item("dropped while the requests spread (the daemons' drops and queues, and the kernel's UDP errors in their namespaces)", lines)
	}
	if ch := res.Churn; ch != nil {
		item("churn killed", []string{strings.Join(ch.Victims, ", ")})
		item(fmt.Sprintf("misplaced %v after the churn's restart", ch.Reconvergence.Limit), ch.Reconvergence.Misplaced)
		item("said joined, later not joined (after the churn's restart)", ch.Reconvergence.Unjoined)
	}
	if s := res.Soak; s != nil {
		var flagged []string
		for _, d := range s.Daemons {
			if d.grew() {
				flagged = append(flagged, fmt.Sprintf("%s: RSS %s → %s MiB, open files %d → %d", d.Name, mibText(d.RSSStart), mibText(d.RSSEnd), d.FilesStart, d.FilesEnd))
			}
		}
		item("grew during the soak", flagged)
		item(fmt.Sprintf("misplaced %v after the soak's last restart", s.Final.Limit), s.Final.Misplaced)
	}
	if b.Len() == 0 {
		return ""
	}
	return fmt.Sprintf("\n%d daemons:\n\n%s", res.Nodes, b.String())
}

// joinedSpread renders when the nodes joined, and how many did not.
func joinedSpread(c *convergence) string {
	s := spread(c.JoinedAfter, seconds)
	if len(c.JoinedAfter) < c.Newcomers {
		s += fmt.Sprintf(" (%d of %d joined)", len(c.JoinedAfter), c.Newcomers)
	}
	return s
}

func allJoined(c *convergence) string {
	if c.AllJoinedAfter == 0 {
		return fmt.Sprintf("not all within %v", c.Limit)
	}
	return seconds(c.AllJoinedAfter)
}

func consistentAfter(c *convergence) string {
	if c.ConsistentAfter == 0 {
		return fmt.Sprintf("**not consistent after %v** (%d misplaced)", c.Limit, len(c.Misplaced))
	}
	return seconds(c.ConsistentAfter)
}

// dropList renders the falls of the joined count, the first few.
func dropList(drops []joinedDrop) string {
	if len(drops) == 0 {
		return "never"
	}
	var parts []string
	for _, d := range drops[:min(len(drops), 5)] {
		parts = append(parts, fmt.Sprintf("%d → %d at %s s", d.From, d.To, seconds(d.At)))
	}
	if len(drops) > 5 {
		parts = append(parts, fmt.Sprintf("and %d more", len(drops)-5))
	}
	times := fmt.Sprintf("%d times", len(drops))
	if len(drops) == 1 {
		times = "once"
	}
	return times + ": " + strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func fileCount(n int) string { return fmt.Sprint(n) }

func sum[T number](xs []T) T {
	var total T
	for _, x := range xs {
		total += x
	}
	return total
}
