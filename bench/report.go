package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Targets burrow is measured against (see docs/benchmarks.md).
const (
	targetThroughputRatio = 1.2 // × upstream wireguard-go, single TCP stream
	targetCPUPerGB        = 5.0 // CPU-seconds per GB, both ends together
	targetRSSMiB          = 20  // per node under load
	targetPerHop          = 50 * time.Microsecond
)

// Machine describes where and how a run happened, for the report header.
type Machine struct {
	CommandLine string
	Kernel      string
	CPUModel    string
	CPUs        int
	// Commit is burrow's commit, empty outside a git work tree; Modified
	// says the work tree's tracked files differ from it.
	Commit   string
	Modified bool
	Burrow   string
}

// DescribeMachine gathers the header facts of the machine and of the
// burrow work tree in the current directory.
func DescribeMachine(commandLine, burrow string) Machine {
	m := Machine{CommandLine: commandLine, Burrow: burrow, CPUs: runtime.NumCPU()}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(string(data))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	// Without optional locks: the index lock would get in the way of
	// whoever commits meanwhile.
	if out, err := exec.Command("git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		m.Modified = len(out) > 0
	}
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel(cpuinfo string) string {
	for line := range strings.Lines(cpuinfo) {
		key, value, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

// Markdown renders the report as a dated section of docs/benchmarks.md.
func (r *Report) Markdown(m Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(machineLines(m, r.LoadBefore, r.LoadAfter))
	for _, res := range r.Results {
		if res.Version != "" {
			fmt.Fprintf(&b, "- %s: %s\n", res.Title, res.Version)
		}
	}
	fmt.Fprintf(&b, "- each VPN: up in = from its first process's start to the first ping through the tunnel; then %d pings at %v and one iperf3 TCP stream for %d s from a to b; CPU-s/GB = CPU time of all its processes on both ends during the iperf3 run per 10^9 bytes received\n\n",
		pingCount, pingInterval, r.Seconds)
	b.WriteString(resultTable(r.Results))
	b.WriteString("\n")
	b.WriteString(ratioTable(r.Results))
	if targets := targetList(r); targets != "" {
		b.WriteString("\nburrow against its targets:\n\n")
		b.WriteString(targets)
	}
	if r.Chain != nil {
		b.WriteString("\n")
		b.WriteString(chainText(r.Chain))
	}
	b.WriteString(notMeasured(r.Results))
	return b.String()
}

// machineLines is the header shared by every kind of run.
func machineLines(m Machine, loadBefore, loadAfter string) string {
	commit := m.Commit
	switch {
	case commit == "":
		commit = "unknown (not run in a git work tree)"
	case m.Modified:
		commit += " with uncommitted changes in the work tree"
	}
	return fmt.Sprintf("- command: `%s`\n"+
		"- kernel %s; CPU: %d × %s; one-minute load average %s at the start, %s at the end\n"+
		"- burrow commit %s, binary %s\n",
		m.CommandLine, m.Kernel, m.CPUs, m.CPUModel, loadBefore, loadAfter, commit, m.Burrow)
}

// resultTable is the main table: one row per VPN that ran.
func resultTable(results []*Result) string {
	if !slices.ContainsFunc(results, (*Result).measured) {
		return "Nothing was measured.\n"
	}
	var b strings.Builder
	b.WriteString("| VPN | up in (s) | ping RTT (ms) | TCP (Mbit/s) | retransmits | CPU-s/GB | peak RSS (MiB) per process |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range results {
		if !r.measured() {
			continue
		}
		rtt := millis(r.RTT)
		if r.PingLost > 0 {
			rtt += fmt.Sprintf(" (%d lost)", r.PingLost)
		}
		up, cpu, rss := "–", "–", "–"
		if r.HasProcesses {
			up = fmt.Sprintf("%.1f", r.UpAfter.Seconds())
			cpu = fmt.Sprintf("%.2f", r.CPUPerGB())
			var parts []string
			for _, p := range r.RSS {
				parts = append(parts, fmt.Sprintf("%s %.1f", p.Label, mib(p.Bytes)))
			}
			rss = strings.Join(parts, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %d | %s | %s |\n",
			r.Title, up, rtt, r.BitsPerSecond/1e6, r.Retransmits, cpu, rss)
	}
	return b.String()
}

// ratioTable compares every measured VPN with upstream wireguard-go.
func ratioTable(results []*Result) string {
	reference := find(results, upstreamWireguardPeer.name)
	if reference == nil || !reference.measured() {
		return "No ratios: upstream wireguard-go was not measured.\n"
	}
	var b strings.Builder
	b.WriteString("Ratios to upstream wireguard-go (above 1 means more throughput, or more CPU per GB):\n\n")
	b.WriteString("| VPN | throughput ratio | CPU-s/GB ratio |\n")
	b.WriteString("| --- | ---: | ---: |\n")
	for _, r := range results {
		if !r.measured() {
			continue
		}
		cpu := "–"
		if r.HasProcesses {
			cpu = fmt.Sprintf("%.2f", r.CPUPerGB()/reference.CPUPerGB())
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s |\n", r.Title, r.BitsPerSecond/reference.BitsPerSecond, cpu)
	}
	return b.String()
}

// targetList checks burrow's measured numbers against its targets.
func targetList(r *Report) string {
	var b strings.Builder
	burrow := find(r.Results, burrowPeer.name)
	if burrow != nil && burrow.measured() {
		if reference := find(r.Results, upstreamWireguardPeer.name); reference != nil && reference.measured() {
			ratio := burrow.BitsPerSecond / reference.BitsPerSecond
			fmt.Fprintf(&b, "- throughput %.2f× upstream wireguard-go (target ≥ %.1f×): %s\n",
				ratio, targetThroughputRatio, verdict(ratio >= targetThroughputRatio))
		}
		fmt.Fprintf(&b, "- %.2f CPU-s/GB (target ≤ %.0f): %s\n",
			burrow.CPUPerGB(), targetCPUPerGB, verdict(burrow.CPUPerGB() <= targetCPUPerGB))
		var peak uint64
		for _, p := range burrow.RSS {
			peak = max(peak, p.Bytes)
		}
		fmt.Fprintf(&b, "- peak RSS %.1f MiB per node (target ≤ %d MiB): %s\n",
			mib(peak), targetRSSMiB, verdict(mib(peak) <= targetRSSMiB))
	}
	if c := r.Chain; c != nil && c.Failed == "" {
		fmt.Fprintf(&b, "- %s ms per switching hop from the means, %s ms from the medians (target < %s ms): %s, %s\n",
			millis(c.PerHop), millis(c.MedianPerHop), millis(targetPerHop),
			verdict(c.PerHop < targetPerHop), verdict(c.MedianPerHop < targetPerHop))
	}
	return b.String()
}

func chainText(c *ChainResult) string {
	if c.Failed != "" {
		return fmt.Sprintf("Chain A—B—C of burrow nodes: failed: %s\n", c.Failed)
	}
	s := fmt.Sprintf("Chain A—B—C of burrow nodes (A links only to B, B only to C, in ring order), %d pings from A to each at %v, alternating in %d rounds (%d and %d replies):\n\n"+
		"- mean RTT A→B %s ms, A→C %s ms\n"+
		"- added latency per switching hop (A→C − A→B) / 2 = **%s ms** (the EdgeVPN paper: 0.37 ms)\n"+
		"- from the medians instead: A→B %s ms, A→C %s ms, %s ms per hop\n",
		c.Sent, chainInterval, chainRounds, c.RepliesFromB, c.RepliesFromC,
		millis(c.RTTToB), millis(c.RTTToC), millis(c.PerHop),
		millis(c.MedianToB), millis(c.MedianToC), millis(c.MedianPerHop))
	if c.DirectLinks {
		s += "- warning: A had more than one link up at the end, so some pings may have bypassed B\n"
	}
	return s
}

// notMeasured lists the VPNs that were skipped or failed, with why.
func notMeasured(results []*Result) string {
	var b strings.Builder
	for _, r := range results {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(&b, "- %s skipped: %s\n", r.Title, r.Skipped)
		case r.Failed != "":
			fmt.Fprintf(&b, "- %s failed: %s\n", r.Title, r.Failed)
			if r.LogTail != "" {
				fmt.Fprintf(&b, "\n  ```\n%s  ```\n", indent(r.LogTail, "  "))
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nNot measured:\n\n" + b.String()
}

func indent(text, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		b.WriteString(prefix + line)
	}
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

func find(results []*Result, name string) *Result {
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	return nil
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

func mib(bytes uint64) float64 { return float64(bytes) / (1 << 20) }
