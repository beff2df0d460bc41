package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The failover issue's targets.
const (
	targetSwitching        = 50 * time.Millisecond
	targetZeroPerKill      = 1 // seconds at zero
	targetBackAfterKill    = 2 * time.Second
	targetBackAfterRestart = time.Second
)

// ratesPerRow is how many seconds a row of per-second rates holds: one
// kill per row.
const ratesPerRow = int(churnEvery / time.Second)

// Markdown renders the failover report as a dated section of
// docs/benchmarks.md.
func (r *FailoverReport) Markdown(m Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Failover run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(machineLines(m, r.LoadBefore, r.LoadAfter))
	for _, build := range r.Builds {
		fmt.Fprintf(&b, "- %s: %s\n", build.Label, build.Binary)
	}
	fmt.Fprintf(&b, "- rings on one bridge without NAT (the lab's internet): overlay.successors %d, overlay.long_distance 0, overlay.on_demand.enabled false, "+
		"overlay.stabilize_every %v, every node joining through the first; link timers the defaults\n\n", failoverShape.successors, ringStabilize)

	fmt.Fprintf(&b, "### Protection switching\n\n")
	fmt.Fprintf(&b, "Ring of %d; a UDP stream of %d datagrams/s from position 0 to position %d; "+
		"in each round its bridge is stopped %v after the stream started. "+
		"Switching time = datagrams lost from the stop on × %v; longest gap = longest time between sending two datagrams that arrived with none in between.\n\n",
		switchRingSize, streamRate, switchRingSize/2, streamWarmup+bridgeWindow, streamInterval)
	b.WriteString(switchTable(r.Switches))
	b.WriteString("\n")
	b.WriteString(switchSummary(r.Builds, r.Switches))

	fmt.Fprintf(&b, "\n### TCP through churn\n\n")
	fmt.Fprintf(&b, "Ring of %d; one iperf3 TCP stream for %d s from position 0 to position %d; "+
		"every %v a node that forwarded a megabyte of it in the second before is killed (SIGKILL) and restarted %v later. "+
		"At zero = below %.1f Mbit/s; back = the time from the event to the start of the first second at ≥ %.0f %% of the mean before the first kill "+
		"(iperf3 reports whole seconds: 0 means the event's own second made it).\n\n",
		churnRingSize, r.Seconds, churnRingSize/2, churnEvery, restartPause, zeroRate/1e6, backShare*100)
	b.WriteString(churnTable(r.Churns))
	for _, c := range r.Churns {
		b.WriteString("\n")
		b.WriteString(churnDetail(c))
	}

	fmt.Fprintf(&b, "\n### Against the issue's targets\n\n")
	b.WriteString(failoverTargets(r.Builds, r.Switches, r.Churns))
	return b.String()
}

// switchTable has one row per protection-switching round.
func switchTable(switches []*switchResult) string {
	var b strings.Builder
	b.WriteString("| build | stop | round | bridges before (positions) | bridge stopped | sent | rate (/s) | lost | lost from the stop | switching time (ms) | longest gap (ms) | flowing again |\n")
	b.WriteString("| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, s := range switches {
		if s.Failed != "" {
			fmt.Fprintf(&b, "| %s | %s | %d | not measured: %s | | | | | | | | |\n", s.Build, s.signalName(), s.Round, s.Failed)
			continue
		}
		again := "yes"
		if !s.Recovered {
			again = fmt.Sprintf("not within %v", observeAtMost)
		}
		lost := fmt.Sprint(s.Lost)
		if s.SendErrors > 0 {
			lost += fmt.Sprintf(" (%d refused by the sender's kernel)", s.SendErrors)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d | %.0f | %s | %d | %s | %s | %s |\n",
			s.Build, s.signalName(), s.Round, positionList(s.Bridges), s.Victim, s.Sent, s.Rate, lost, s.LostFromFailure,
			millis(s.SwitchingTime()), millis(s.LongestGap), again)
	}
	return b.String()
}

// switchSummary has one row per build and kind of stop over its rounds.
func switchSummary(builds []*failoverBuild, switches []*switchResult) string {
	var b strings.Builder
	b.WriteString("| build | stop | rounds measured | switching time (ms) min / median / max | longest gap (ms) min / median / max |\n")
	b.WriteString("| --- | --- | ---: | --- | --- |\n")
	for _, graceful := range []bool{false, true} {
		for _, build := range builds {
			measured := measuredSwitches(switches, build, graceful)
			var switching, gaps []time.Duration
			for _, s := range measured {
				switching = append(switching, s.SwitchingTime())
				gaps = append(gaps, s.LongestGap)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", build, stopSignal(graceful),
				len(measured), spread(switching, millis), spread(gaps, millis))
		}
	}
	return b.String()
}

// measuredSwitches are the build's rounds with numbers, of one kind.
func measuredSwitches(switches []*switchResult, build *failoverBuild, graceful bool) []*switchResult {
	var out []*switchResult
	for _, s := range switches {
		if s.Build == build && s.Graceful == graceful && s.Failed == "" {
			out = append(out, s)
		}
	}
	return out
}

// churnTable sets the builds' churn scenarios side by side.
func churnTable(churns []*churnResult) string {
	header := []string{""}
	for _, c := range churns {
		header = append(header, c.Build.String())
	}
	var rows [][]string
	row := func(title string, cell func(c *churnResult) string) {
		cells := []string{title}
		for _, c := range churns {
			// A scenario without per-second rates says why in the
			// connection row.
			if c.Failed != "" || c.Broke != "" {
				cells = append(cells, "–")
			} else {
				cells = append(cells, cell(c))
			}
		}
		rows = append(rows, cells)
	}
	row("mean before the first kill (Mbit/s)", func(c *churnResult) string { return mbits(c.PreFailure) })
	row("seconds at zero", func(c *churnResult) string { return fmt.Sprint(c.ZeroSeconds) })
	row("longest stretch at zero (s)", func(c *churnResult) string { return fmt.Sprint(c.LongestZero) })
	row("seconds at zero after each kill", func(c *churnResult) string {
		return eventList(c.kills(), func(rec recovery) string { return fmt.Sprint(rec.ZeroSeconds) })
	})
	row("lowest second (Mbit/s)", func(c *churnResult) string {
		return fmt.Sprintf("%s (second %d)", mbits(c.Lowest), c.LowestSecond)
	})
	row(fmt.Sprintf("seconds below %.0f Mbit/s", lowRate/1e6), func(c *churnResult) string { return fmt.Sprint(c.BelowLow) })
	row("back after each kill (s)", func(c *churnResult) string { return eventList(c.kills(), backAfter) })
	row("back after each restart (s)", func(c *churnResult) string { return eventList(c.restarts(), backAfter) })
	row("retransmits", func(c *churnResult) string { return fmt.Sprint(c.Retransmits) })
	connection := []string{"connection"}
	for _, c := range churns {
		switch {
		case c.Failed != "":
			connection = append(connection, "not measured: "+c.Failed)
		case c.Broke != "":
			connection = append(connection, "broke: "+c.Broke)
		default:
			connection = append(connection, "kept")
		}
	}
	return markdownTable(header, append(rows, connection))
}

// churnDetail gives a build's per-second rates, events and notes.
func churnDetail(c *churnResult) string {
	if c.Failed != "" || c.Broke != "" {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, Mbit/s per second, %d to a row:\n\n```\n", c.Build, ratesPerRow)
	for from := 0; from < len(c.Intervals); from += ratesPerRow {
		to := min(from+ratesPerRow, len(c.Intervals))
		fmt.Fprintf(&b, "%3d–%-3d %s\n", from, to-1, compactRates(c.Intervals, from, to))
	}
	b.WriteString("```\n\n")
	var events []string
	for _, e := range c.Events {
		events = append(events, e.String())
	}
	fmt.Fprintf(&b, "Events: %s.\n", strings.Join(events, "; "))
	for _, note := range c.Notes {
		fmt.Fprintf(&b, "- %s\n", note)
	}
	return b.String()
}

// failoverTargets checks every build's numbers against the issue's
// targets, one row per target.
func failoverTargets(builds []*failoverBuild, switches []*switchResult, churns []*churnResult) string {
	header := []string{"target"}
	for _, build := range builds {
		header = append(header, build.String())
	}
	var rows [][]string
	row := func(title string, cell func(build *failoverBuild) string) {
		cells := []string{title}
		for _, build := range builds {
			cells = append(cells, cell(build))
		}
		rows = append(rows, cells)
	}
	row(fmt.Sprintf("protection switching ≤ %s ms (SIGKILL)", millis(targetSwitching)), func(build *failoverBuild) string {
		var times []time.Duration
		for _, s := range measuredSwitches(switches, build, false) {
			times = append(times, s.SwitchingTime())
		}
		if len(times) == 0 {
			return "not measured"
		}
		med, worst := median(times), slices.Max(times)
		return fmt.Sprintf("median %s ms, max %s ms: %s by the median, %s by the max",
			millis(med), millis(worst), verdict(med <= targetSwitching), verdict(worst <= targetSwitching))
	})
	row("no datagram lost on graceful leave (SIGTERM)", func(build *failoverBuild) string {
		measured := measuredSwitches(switches, build, true)
		if len(measured) == 0 {
			return "not measured"
		}
		var lost []string
		met := true
		for _, s := range measured {
			lost = append(lost, fmt.Sprint(s.LostFromFailure))
			met = met && s.LostFromFailure == 0
		}
		return fmt.Sprintf("lost %s: %s", strings.Join(lost, ", "), verdict(met))
	})
	churnRow := func(title string, check func(c *churnResult) string) {
		row(title, func(build *failoverBuild) string {
			i := slices.IndexFunc(churns, func(c *churnResult) bool { return c.Build == build })
			switch {
			case i < 0 || churns[i].Failed != "":
				return "not measured"
			case churns[i].Broke != "":
				return "connection broke: missed"
			}
			return check(churns[i])
		})
	}
	churnRow(fmt.Sprintf("at most %d s at zero per kill (aim ≤ 0.2 s: whole seconds here)", targetZeroPerKill), func(c *churnResult) string {
		most := 0
		for _, rec := range c.kills() {
			most = max(most, rec.ZeroSeconds)
		}
		return fmt.Sprintf("at most %d s: %s", most, verdict(most <= targetZeroPerKill))
	})
	churnRow(fmt.Sprintf("back to ≥ %.0f %% within %v of each kill", backShare*100, targetBackAfterKill), func(c *churnResult) string {
		return backVerdict(c.kills(), targetBackAfterKill)
	})
	churnRow(fmt.Sprintf("back to ≥ %.0f %% within %v of each restart", backShare*100, targetBackAfterRestart), func(c *churnResult) string {
		return backVerdict(c.restarts(), targetBackAfterRestart)
	})
	churnRow(fmt.Sprintf("no second below %.0f Mbit/s", lowRate/1e6), func(c *churnResult) string {
		return fmt.Sprintf("%d below: %s", c.BelowLow, verdict(c.BelowLow == 0))
	})
	churnRow("no TCP connection broken", func(c *churnResult) string { return "kept: met" })
	return markdownTable(header, rows)
}

// markdownTable renders a table of text cells under a header.
func markdownTable(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat(" --- |", len(header)) + "\n")
	for _, cells := range rows {
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// kills and restarts are the churn's recoveries after each kind of event.
func (c *churnResult) kills() []recovery    { return c.recoveriesAfter(false) }
func (c *churnResult) restarts() []recovery { return c.recoveriesAfter(true) }

func (c *churnResult) recoveriesAfter(restart bool) []recovery {
	var out []recovery
	for _, rec := range c.Recoveries {
		if rec.Event.Restart == restart {
			out = append(out, rec)
		}
	}
	return out
}

// backVerdict checks that the flow was back within limit after each event.
func backVerdict(recs []recovery, limit time.Duration) string {
	if len(recs) == 0 {
		return "no such event"
	}
	var worst time.Duration
	for _, rec := range recs {
		if !rec.Back {
			return "not back after one: missed"
		}
		worst = max(worst, rec.After)
	}
	return fmt.Sprintf("at most %.1f s: %s", worst.Seconds(), verdict(worst <= limit))
}

// backAfter renders how long one recovery took.
func backAfter(rec recovery) string {
	if !rec.Back {
		return "never"
	}
	return fmt.Sprintf("%.1f", rec.After.Seconds())
}

// eventList renders one value per event, or "–" without events.
func eventList(recs []recovery, value func(recovery) string) string {
	if len(recs) == 0 {
		return "–"
	}
	parts := make([]string, len(recs))
	for i, rec := range recs {
		parts[i] = value(rec)
	}
	return strings.Join(parts, ", ")
}

// compactRates renders the rates of seconds from to to in whole Mbit/s.
func compactRates(intervals []float64, from, to int) string {
	parts := make([]string, 0, to-from)
	for _, bps := range intervals[from:to] {
		parts = append(parts, fmt.Sprintf("%.0f", bps/1e6))
	}
	return strings.Join(parts, " ")
}

// positionList renders ring positions as "2, 6".
func positionList(positions []int) string {
	parts := make([]string, len(positions))
	for i, p := range positions {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ", ")
}

func mbits(bps float64) string { return fmt.Sprintf("%.1f", bps/1e6) }
