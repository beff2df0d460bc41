package bench

import (
	"fmt"
	"strings"
)

// Markdown renders the report as a dated section of docs/benchmarks.md.
func (r *ContainersReport) Markdown(m Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Containers run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(machineLines(m, r.LoadBefore, r.LoadAfter))
	fmt.Fprintf(&b, "- two burrow members behind endpoint-independent NATs, linked directly (hole-punched), and a beacon; "+
		"%d paired rounds, in each one single-stream TCP iperf3 test of %d s per path, in turn, from a to b: "+
		"%s (TAP address to TAP address); %s (a container on each node's bridge, added by burrow-cni's ADD, addressed from the node's subnet, MTU %d); "+
		"%s (a kernel VXLAN device, VNI %d, UDP %d, over each node's TAP with a static forwarding entry to the other's TAP address, "+
		"bridged with a container; MTU %d)\n\n",
		len(r.Rounds), r.Options.Seconds, hostToHost, containerToContainer, r.TAPMTU,
		containerOverVXLAN, vxlanID, vxlanPort, r.TAPMTU-vxlanOverhead)
	var rows [][]string
	perPath := make([][]float64, len(containerPathTitles))
	ratios := make([][]float64, len(containerPathTitles))
	for i, round := range r.Rounds {
		for path, t := range round {
			ratio := t.BitsPerSecond / round[hostToHost].BitsPerSecond
			perPath[path] = append(perPath[path], t.BitsPerSecond)
			ratios[path] = append(ratios[path], ratio)
			rows = append(rows, []string{fmt.Sprint(i + 1), containerPath(path).String(), mbitsText(t.BitsPerSecond),
				fmt.Sprint(t.Retransmits), fmt.Sprintf("%.2f", ratio)})
		}
	}
	b.WriteString(markdownTable([]string{"round", "path", "1 stream (Mbit/s)", "retransmits", "÷ host to host, same round"}, rows))
	b.WriteString("\n")
	rows = nil
	for path := range perPath {
		rows = append(rows, []string{containerPath(path).String(), mbitsText(median(perPath[path])), fmt.Sprintf("%.2f", median(ratios[path]))})
	}
	b.WriteString(markdownTable([]string{"path", "median (Mbit/s)", "median ÷ host to host"}, rows))
	return b.String()
}
