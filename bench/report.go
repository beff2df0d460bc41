package bench

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Standing targets burrow is measured against (see docs/benchmarks.md).
const (
	targetThroughputRatio = 1.2 // × upstream wireguard-go, single TCP stream
	targetCPUPerGB        = 5.0 // CPU-seconds per GB, both ends together
	targetRSSMiB          = 20  // per node under load
	targetPerHop          = 50 * time.Microsecond
)

// The targets of issue 14, "Fast path: flat latency under load, twice
// upstream wireguard-go on every run".
const (
	// targetLoadedP99 bounds the 99th percentile ping under a saturating
	// TCP stream.
	targetLoadedP99 = 2 * time.Millisecond
	// A single TCP stream carries at least targetRoundRatio × upstream
	// wireguard-go's in every paired round, and targetMedianRatio × as
	// the median of at least targetMedianRounds rounds.
	targetRoundRatio   = 2.0
	targetMedianRatio  = 2.5
	targetMedianRounds = 3
	// targetCPURatio bounds burrow's CPU per GB against wireguard-go's.
	targetCPURatio = 0.4
	// targetRingSize is the plain ring the per-hop target is set on, with
	// targetRingHops hops at the most.
	targetRingSize = 8
	targetRingHops = 4
)

// Machine describes where and how a run happened, for the report header.
type Machine struct {
	CommandLine string
	Kernel      string
	CPUModel    string
	CPUs        int
	// Commit is the commit the measured binary was built from, as its
	// build information says, else the commit of the work tree the run
	// started in; empty when neither says. Modified says the binary was
	// built from (or the work tree holds) changes not committed.
	Commit   string
	Modified bool
	Burrow   string
}

// DescribeMachine gathers the header facts of the machine and of the
// burrow binary measured.
func DescribeMachine(commandLine, burrow string) Machine {
	m := Machine{CommandLine: commandLine, Burrow: burrow, CPUs: runtime.NumCPU()}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(string(data))
	}
	m.Commit, m.Modified = builtFrom(burrow)
	if m.Commit != "" {
		return m
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

// builtFrom is the commit a Go binary was built from and whether its
// work tree had changes, from the build information Go writes into it;
// an empty commit when the binary has none (built outside a work tree, or
// with -buildvcs=false).
func builtFrom(binary string) (commit string, modified bool) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value[:min(len(s.Value), 7)]
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return commit, modified
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
	names := vpnNames(r.Results)
	var titles []string
	for _, name := range names {
		res := firstOf(r.Results, name)
		titles = append(titles, res.Title)
		if res.Version != "" {
			fmt.Fprintf(&b, "- %s: %s\n", res.Title, res.Version)
		}
	}
	fmt.Fprintf(&b, "- %s; in each, every VPN in turn (%s) is brought up on the same two namespaces, measured and stopped. "+
		"Up in = from its first process's start to the first ping through the tunnel; idle RTT = mean of %d pings at %v; "+
		"then iperf3 TCP from a to b for %d s, with 1 stream and with %d in parallel: Mbit/s received, the sender's retransmits, "+
		"CPU-s/GB = CPU time (utime + stime) of the VPN's processes on both ends during the test per 10^9 bytes received (each process's share in brackets); "+
		"machine CPU-s/GB = busy time of all the machine's CPUs during the test (user, nice, system, irq, softirq and steal of /proc/stat) per 10^9 bytes received: "+
		"iperf3 and the kernel on both ends, the VPN, softirq work no process is charged for (a kernel path's), and whatever else the machine ran meanwhile; "+
		"under load = %d pings at %v (ping -i %.2f) from a to b through the tunnel from %v after the start of another %d s single stream, "+
		"p50 and p99 of the per-reply times; peak RSS = each process's VmHWM at the end of its round\n\n",
		plural(r.Rounds, "paired round"), strings.Join(titles, "; "), pingCount, pingInterval, r.Seconds, multiStreams,
		loadPings(r.Seconds), loadPingInterval, loadPingInterval.Seconds(), loadRampUp, r.Seconds)
	b.WriteString(roundTable(r.Results))
	b.WriteString("\nMedians over the rounds:\n\n")
	b.WriteString(medianTable(r.Results))
	b.WriteString("\n")
	if busy := machineBusyText(r.Results, r.Seconds, m.CPUs); busy != "" {
		b.WriteString(busy + "\n")
	}
	b.WriteString(ratioTable(r.Results, r.Rounds))
	if kernel := kernelPathTable(r.Results, r.Rounds); kernel != "" {
		b.WriteString("\n")
		b.WriteString(kernel)
	}
	if targets := issueTargets(r); targets != "" {
		b.WriteString("\nburrow against the targets of issue 14:\n\n")
		b.WriteString(targets)
	}
	if targets := targetList(r); targets != "" {
		b.WriteString("\nburrow against the standing targets (medians of the rounds):\n\n")
		b.WriteString(targets)
	}
	if r.Profile != nil {
		b.WriteString("\n")
		b.WriteString(profileText(r.Profile))
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
		commit += " with uncommitted changes"
	}
	return fmt.Sprintf("- command: `%s`\n"+
		"- kernel %s; CPU: %d × %s; one-minute load average %s at the start, %s at the end\n"+
		"- burrow commit %s, binary %s\n",
		m.CommandLine, m.Kernel, m.CPUs, m.CPUModel, loadBefore, loadAfter, commit, m.Burrow)
}

// targetList checks burrow's medians against the standing targets.
func targetList(r *Report) string {
	var b strings.Builder
	if burrow := measuredRounds(r.Results, burrowPeer.name); len(burrow) > 0 {
		if ratios := roundRatios(r.Results, burrowPeer.name, singleRate); len(ratios) > 0 {
			ratio := median(valuesOf(ratios))
			fmt.Fprintf(&b, "- throughput %.2f× upstream wireguard-go (target ≥ %.1f×): %s\n",
				ratio, targetThroughputRatio, verdict(ratio >= targetThroughputRatio))
		}
		cpu := median(figures(burrow, singleCPUPerGB))
		fmt.Fprintf(&b, "- %.2f CPU-s/GB (target ≤ %.0f): %s\n", cpu, targetCPUPerGB, verdict(cpu <= targetCPUPerGB))
		peak := slices.Max(figures(burrow, largestRSS))
		fmt.Fprintf(&b, "- peak RSS %.1f MiB per node, the largest of every round (target ≤ %d MiB): %s\n",
			peak, targetRSSMiB, verdict(peak <= targetRSSMiB))
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
			fmt.Fprintf(&b, "- %s failed in round %d: %s\n", r.Title, r.Round, r.Failed)
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

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

func mib(bytes uint64) float64 { return float64(bytes) / (1 << 20) }
