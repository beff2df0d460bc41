package bench

import (
	"fmt"
	"slices"
	"strings"
)

// profileText renders where the daemons' CPU time went: each side's top
// functions, then the shares by Go package.
func profileText(p *ProfileResult) string {
	if p.Failed != "" {
		return fmt.Sprintf("Profile of the burrow daemons: failed: %s\n", p.Failed)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Where the burrow daemons' CPU time goes: `perf record -e cpu-clock -F %d -g -p PID` on each daemon "+
		"during one more single-stream iperf3 test of %d s in round %d, after the measured ones (%s Mbit/s meanwhile). "+
		"burrow up serves no pprof, and the daemon needs none: perf samples it from outside, kernel included (the cpu-clock event needs no hardware counters). "+
		"Flat %% = share of the daemon's samples taken in the function itself; inclusive %% = in it or in what it called; [k] marks the kernel, the daemon's system calls (TAP and UDP I/O). "+
		"A timer event cannot interrupt code that runs with interrupts off, so that time lands where they come back on "+
		"(finish_task_switch when a thread is switched back in after sleeping, _raw_spin_unlock_irqrestore, handle_softirqs): the inclusive list shows who got there. "+
		"The recordings (perf report -i FILE) and full reports with call graphs are in %s.\n\n",
		perfFrequency, p.Seconds, p.Round, mbitsText(p.Stream.BitsPerSecond), p.Dir)
	for _, side := range p.Sides {
		fmt.Fprintf(&b, "%s (%s), %d samples:\n\n", capitalize(side.Role), side.Label, side.Samples)
		var rows [][]string
		for _, e := range side.Entries[:min(profileTop, len(side.Entries))] {
			rows = append(rows, []string{fmt.Sprintf("%.2f", e.Percent), symbolCell(e.Kernel, e.Symbol)})
		}
		b.WriteString(markdownTable([]string{"flat %", "function"}, rows))
		rows = nil
		for _, e := range side.Inclusive {
			if len(rows) == profileInclusiveTop || e.Children < profileInclusiveMin {
				break
			}
			rows = append(rows, []string{fmt.Sprintf("%.2f", e.Children), fmt.Sprintf("%.2f", e.Self), symbolCell(e.Kernel, e.Symbol)})
		}
		fmt.Fprintf(&b, "\n%s (%s), inclusive, the first %d at %.0f %% or more:\n\n", capitalize(side.Role), side.Label, profileInclusiveTop, profileInclusiveMin)
		b.WriteString(markdownTable([]string{"inclusive %", "flat %", "function"}, rows))
		b.WriteString("\n")
	}
	b.WriteString("By area (flat % summed by Go package; the kernel as one):\n\n")
	b.WriteString(areaTable(p.Sides))
	return b.String()
}

// areaTable puts the sides' shares by area side by side: the areas that
// are among the largest of either side, then the rest.
func areaTable(sides []*profileSide) string {
	shares := make([]map[string]float64, len(sides))
	var shown []string
	for i, side := range sides {
		shares[i] = map[string]float64{}
		for j, a := range areas(side.Entries) {
			shares[i][a.Area] = a.Percent
			if j < profileAreas && !slices.Contains(shown, a.Area) {
				shown = append(shown, a.Area)
			}
		}
	}
	header := []string{"area"}
	for _, side := range sides {
		header = append(header, fmt.Sprintf("%s (%s) %%", side.Role, side.Label))
	}
	var rows [][]string
	rest := make([]float64, len(sides))
	for i := range sides {
		rest[i] = 100
	}
	for _, area := range shown {
		row := []string{area}
		for i := range sides {
			row = append(row, fmt.Sprintf("%.1f", shares[i][area]))
			rest[i] -= shares[i][area]
		}
		rows = append(rows, row)
	}
	row := []string{"everything else"}
	for i := range sides {
		row = append(row, fmt.Sprintf("%.1f", max(rest[i], 0)))
	}
	return markdownTable(header, append(rows, row))
}

// symbolCell renders a function of a profile, a kernel one marked [k].
func symbolCell(kernel bool, symbol string) string {
	if kernel {
		return "[k] " + symbol
	}
	return symbol
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
