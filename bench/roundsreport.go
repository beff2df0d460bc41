package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// figure is one number of a result, for medians and ratios.
type figure func(*Result) float64

func singleRate(r *Result) float64     { return r.Single.BitsPerSecond }
func multiRate(r *Result) float64      { return r.Multi.BitsPerSecond }
func singleCPUPerGB(r *Result) float64 { return r.Single.CPUPerGB() }
func multiCPUPerGB(r *Result) float64  { return r.Multi.CPUPerGB() }

func singleMachineCPUPerGB(r *Result) float64 { return r.Single.MachineCPUPerGB() }
func multiMachineCPUPerGB(r *Result) float64  { return r.Multi.MachineCPUPerGB() }

// scaling is how much more the parallel streams carried than one.
func scaling(r *Result) float64 { return r.Multi.BitsPerSecond / r.Single.BitsPerSecond }

// loadedP99 is the 99th percentile ping under load, in milliseconds.
func loadedP99(r *Result) float64 { return msFloat(r.Loaded.P99()) }

// largestRSS is the peak RSS of the VPN's largest process, in MiB.
func largestRSS(r *Result) float64 {
	var peak uint64
	for _, p := range r.RSS {
		peak = max(peak, p.Bytes)
	}
	return mib(peak)
}

func msFloat(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// vpnNames lists the VPNs of the results in the order they first appear.
func vpnNames(results []*Result) []string {
	var names []string
	for _, r := range results {
		if !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	return names
}

func firstOf(results []*Result, name string) *Result {
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// measuredRounds returns the VPN's results that hold numbers, by round.
func measuredRounds(results []*Result, name string) []*Result {
	var out []*Result
	for _, r := range results {
		if r.Name == name && r.measured() {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(x, y *Result) int { return x.Round - y.Round })
	return out
}

// measuredIn returns the VPN's result of the round if it holds numbers.
func measuredIn(results []*Result, name string, round int) *Result {
	for _, r := range results {
		if r.Name == name && r.Round == round && r.measured() {
			return r
		}
	}
	return nil
}

// figures returns the figure of each result.
func figures(results []*Result, f figure) []float64 {
	out := make([]float64, len(results))
	for i, r := range results {
		out[i] = f(r)
	}
	return out
}

// roundValue is a number of one round: a figure, or a VPN's figure
// divided by upstream wireguard-go's in the same round.
type roundValue struct {
	Round int
	Value float64
}

// roundRatios pairs the VPN's rounds with upstream wireguard-go's: one
// ratio for every round in which both were measured.
func roundRatios(results []*Result, name string, f figure) []roundValue {
	return pairedRounds(results, name, upstreamWireguardPeer.name, f, ratio)
}

// pairedRounds pairs the VPN's rounds with those of the reference ref:
// combine of the two figures for every round in which both were measured
// and combine gives a value.
func pairedRounds(results []*Result, name, ref string, f figure, combine func(v, ref float64) (float64, bool)) []roundValue {
	var out []roundValue
	for _, r := range measuredRounds(results, name) {
		if other := measuredIn(results, ref, r.Round); other != nil {
			if v, ok := combine(f(r), f(other)); ok {
				out = append(out, roundValue{Round: r.Round, Value: v})
			}
		}
	}
	return out
}

// ratio divides a figure by the reference's, which must not be zero.
func ratio(v, ref float64) (float64, bool) { return v / ref, ref > 0 }

func valuesOf(ratios []roundValue) []float64 {
	out := make([]float64, len(ratios))
	for i, r := range ratios {
		out[i] = r.Value
	}
	return out
}

// roundTable has a row for every VPN in every round it was measured.
func roundTable(results []*Result) string {
	var rows [][]string
	for _, r := range results {
		if !r.measured() {
			continue
		}
		up := "–"
		if r.HasProcesses {
			up = fmt.Sprintf("%.1f", r.UpAfter.Seconds())
		}
		rtt := millis(r.RTT)
		if r.PingLost > 0 {
			rtt += fmt.Sprintf(" (%d lost)", r.PingLost)
		}
		rows = append(rows, []string{
			fmt.Sprint(r.Round), r.Title, up, rtt,
			mbitsText(r.Single.BitsPerSecond), fmt.Sprint(r.Single.Retransmits), cpuCell(r, r.Single), perGBText(r.Single.MachineCPUPerGB()),
			mbitsText(r.Multi.BitsPerSecond), fmt.Sprint(r.Multi.Retransmits), cpuCell(r, r.Multi), perGBText(r.Multi.MachineCPUPerGB()),
			millis(r.Loaded.P50()) + " / " + millis(r.Loaded.P99()),
			fmt.Sprintf("%d of %d", r.Loaded.Lost(), r.Loaded.Sent),
			mbitsText(r.Loaded.Stream.BitsPerSecond), rssCell(r.RSS),
		})
	}
	if len(rows) == 0 {
		return "Nothing was measured.\n"
	}
	return markdownTable([]string{"round", "VPN", "up in (s)", "idle RTT (ms)",
		"1 stream (Mbit/s)", "retransmits", "CPU-s/GB", "machine CPU-s/GB",
		fmt.Sprintf("%d streams (Mbit/s)", multiStreams), "retransmits", "CPU-s/GB", "machine CPU-s/GB",
		"under load p50 / p99 (ms)", "pings lost under load", "the stream meanwhile (Mbit/s)", "peak RSS (MiB) per process"}, rows)
}

// medianTable has a row per VPN: the median of each figure over the
// rounds it was measured in; peak RSS is the largest instead.
func medianTable(results []*Result) string {
	var rows [][]string
	for _, name := range vpnNames(results) {
		rs := measuredRounds(results, name)
		if len(rs) == 0 {
			continue
		}
		var rtts, p50s, p99s []time.Duration
		var retransmits, multiRetransmits, lost []int
		for _, r := range rs {
			rtts, p50s, p99s = append(rtts, r.RTT), append(p50s, r.Loaded.P50()), append(p99s, r.Loaded.P99())
			retransmits, multiRetransmits = append(retransmits, r.Single.Retransmits), append(multiRetransmits, r.Multi.Retransmits)
			lost = append(lost, r.Loaded.Lost())
		}
		single, multi := "–", "–"
		if rs[0].HasProcesses {
			single = medianCPUCell(rs, func(r *Result) streamTest { return r.Single })
			multi = medianCPUCell(rs, func(r *Result) streamTest { return r.Multi })
		}
		rows = append(rows, []string{
			rs[0].Title, fmt.Sprint(len(rs)), millis(median(rtts)),
			mbitsText(median(figures(rs, singleRate))), fmt.Sprint(median(retransmits)), single,
			perGBText(median(figures(rs, singleMachineCPUPerGB))),
			mbitsText(median(figures(rs, multiRate))), fmt.Sprint(median(multiRetransmits)), multi,
			perGBText(median(figures(rs, multiMachineCPUPerGB))),
			fmt.Sprintf("%.2f", median(figures(rs, scaling))),
			millis(median(p50s)) + " / " + millis(median(p99s)), fmt.Sprint(median(lost)),
			peakRSSCell(rs),
		})
	}
	if len(rows) == 0 {
		return "Nothing was measured.\n"
	}
	return markdownTable([]string{"VPN", "rounds", "idle RTT (ms)",
		"1 stream (Mbit/s)", "retransmits", "CPU-s/GB", "machine CPU-s/GB",
		fmt.Sprintf("%d streams (Mbit/s)", multiStreams), "retransmits", "CPU-s/GB", "machine CPU-s/GB",
		fmt.Sprintf("%d streams ÷ 1", multiStreams),
		"under load p50 / p99 (ms)", "pings lost under load", "peak RSS (MiB) per process, largest of the rounds"}, rows)
}

// ratioTable gives every VPN's throughput and CPU per GB against upstream
// wireguard-go's of the same round, and the median of those ratios.
func ratioTable(results []*Result, rounds int) string {
	if len(measuredRounds(results, upstreamWireguardPeer.name)) == 0 {
		return "No ratios: upstream wireguard-go was not measured.\n"
	}
	figuresShown := []struct {
		title string
		f     figure
		cpu   bool // of the VPN's processes, which the baseline has none of
	}{
		{"throughput, 1 stream", singleRate, false},
		{fmt.Sprintf("throughput, %d streams", multiStreams), multiRate, false},
		{"CPU-s/GB, 1 stream", singleCPUPerGB, true},
		{fmt.Sprintf("CPU-s/GB, %d streams", multiStreams), multiCPUPerGB, true},
		{"machine CPU-s/GB, 1 stream", singleMachineCPUPerGB, false},
		{fmt.Sprintf("machine CPU-s/GB, %d streams", multiStreams), multiMachineCPUPerGB, false},
	}
	var rows [][]string
	for _, name := range vpnNames(results) {
		rs := measuredRounds(results, name)
		if name == upstreamWireguardPeer.name || len(rs) == 0 {
			continue
		}
		for _, fig := range figuresShown {
			if fig.cpu && !rs[0].HasProcesses {
				continue
			}
			rows = append(rows, append([]string{rs[0].Title, fig.title}, roundCells(roundRatios(results, name, fig.f), rounds, "%.2f")...))
		}
	}
	if len(rows) == 0 {
		return ""
	}
	return "Ratios to upstream wireguard-go in the same round (above 1 means more throughput, or more CPU per GB):\n\n" +
		markdownTable(roundHeader([]string{"VPN", "÷ upstream wireguard-go"}, rounds), rows)
}

// roundHeader appends a column per round and one for the median.
func roundHeader(header []string, rounds int) []string {
	for round := 1; round <= rounds; round++ {
		header = append(header, fmt.Sprintf("round %d", round))
	}
	return append(header, "median")
}

// roundCells renders values as the cells of roundHeader's columns: one
// per round ("–" where there is none) and their median in bold.
func roundCells(values []roundValue, rounds int, format string) []string {
	var cells []string
	for round := 1; round <= rounds; round++ {
		cell := "–"
		if i := slices.IndexFunc(values, func(r roundValue) bool { return r.Round == round }); i >= 0 {
			cell = fmt.Sprintf(format, values[i].Value)
		}
		cells = append(cells, cell)
	}
	med := "–"
	if len(values) > 0 {
		med = "**" + fmt.Sprintf(format, median(valuesOf(values))) + "**"
	}
	return append(cells, med)
}

// saturatedShare is the share of the machine's CPUs busy in every stream
// test above which the report calls them all busy.
const saturatedShare = 0.95

// machineBusyText says how many of the machine's cpus were busy, on
// average, during the stream tests of seconds each. Where that is all of
// them, the machine's CPU per GB is the CPUs over the throughput and says
// nothing the throughput does not.
func machineBusyText(results []*Result, seconds, cpus int) string {
	var busy []float64
	for _, r := range results {
		if r.measured() {
			busy = append(busy, r.Single.MachineCPU/float64(seconds), r.Multi.MachineCPU/float64(seconds))
		}
	}
	if len(busy) == 0 || cpus < 1 {
		return ""
	}
	lo := slices.Min(busy)
	text := fmt.Sprintf("The machine's CPUs were busy %.2f to %.2f of %d, on average, during the stream tests", lo, slices.Max(busy), cpus)
	if lo >= saturatedShare*float64(cpus) {
		text += fmt.Sprintf(": all of them in every test, so machine CPU-s/GB is %d CPUs ÷ the throughput and tells no more than the throughput; "+
			"it shows what a path costs only where the CPUs have time to spare", cpus)
	}
	return text + ".\n"
}

// warrensCorePerGbit is the receive cost of the Warrens paper's kernel
// tunnels: about 3 % of a core per Gbit/s.
const warrensCorePerGbit = 3.0

// corePercentPerGbit converts CPU-seconds per 10^9 bytes into percent of
// one core per Gbit/s: a Gbit/s is 0.125 GB each second.
func corePercentPerGbit(cpuPerGB float64) float64 { return cpuPerGB * 0.125 * 100 }

// kernelPathTable sets burrow's kernel path against its encrypted path,
// round by round (issue 14, item 4): throughput and the machine's CPU per
// GB against the encrypted path's, and what each path costs the machine
// beyond the bare underlay, in percent of a core per Gbit/s. The
// processes' CPU cannot compare them: the kernel path's work is softirq
// work no process is charged for.
func kernelPathTable(results []*Result, rounds int) string {
	if len(measuredRounds(results, burrowKernelPeer.name)) == 0 {
		return ""
	}
	overUnderlay := func(v, ref float64) (float64, bool) { return corePercentPerGbit(v - ref), true }
	var rows [][]string
	add := func(title, format string, values []roundValue) {
		rows = append(rows, append([]string{title}, roundCells(values, rounds, format)...))
	}
	kernel, encrypted := burrowKernelPeer.name, burrowPeer.name
	for _, f := range []struct {
		streams          string
		rate, machineCPU figure
	}{
		{"1 stream", singleRate, singleMachineCPUPerGB},
		{fmt.Sprintf("%d streams", multiStreams), multiRate, multiMachineCPUPerGB},
	} {
		add("throughput, "+f.streams+", ÷ the encrypted path's", "%.2f", pairedRounds(results, kernel, encrypted, f.rate, ratio))
		add("machine CPU-s/GB, "+f.streams+", ÷ the encrypted path's", "%.2f", pairedRounds(results, kernel, encrypted, f.machineCPU, ratio))
		add("kernel path, "+f.streams+": machine CPU above the underlay's, % of a core per Gbit/s", "%.1f",
			pairedRounds(results, kernel, baselinePeer.name, f.machineCPU, overUnderlay))
		add("encrypted path, "+f.streams+": machine CPU above the underlay's, % of a core per Gbit/s", "%.1f",
			pairedRounds(results, encrypted, baselinePeer.name, f.machineCPU, overUnderlay))
	}
	for _, label := range []string{receivingProgram, sendingProgram} {
		var share, perRun []roundValue
		for _, r := range measuredRounds(results, kernel) {
			if p, ok := r.Single.Program(label); ok && p.Runs > 0 && r.Single.Bytes > 0 {
				share = append(share, roundValue{Round: r.Round, Value: 100 * p.Seconds / (float64(r.Single.Bytes) * 8 / 1e9)})
				perRun = append(perRun, roundValue{Round: r.Round, Value: p.Seconds / float64(p.Runs) * 1e9})
			}
		}
		if len(share) > 0 {
			add("kernel path, 1 stream: "+label+", its own run time, % of a core per Gbit/s", "%.2f", share)
			add("kernel path, 1 stream: "+label+", ns per run (a packet)", "%.0f", perRun)
		}
	}
	return fmt.Sprintf("burrow's kernel path against its encrypted path (issue 14, item 4), each round against the same round's encrypted path "+
		"or underlay. Above the underlay's = (machine CPU-s/GB − the underlay's) × 12.5: the CPU the path adds per Gbit/s on both ends, "+
		"sending and receiving, beyond what iperf3 and the kernel's TCP cost anyway. A program's own run time is what the kernel counts "+
		"for the eBPF program alone (kernel.bpf_stats_enabled), not the kernel's work on the packets it redirects: the figure the Warrens paper "+
		"gives, about %.0f %% of a core per Gbit/s for its receiving program:\n\n",
		warrensCorePerGbit) + markdownTable(roundHeader([]string{"figure"}, rounds), rows)
}

// issueTargets checks burrow against the targets of issue 14.
func issueTargets(r *Report) string {
	burrow := measuredRounds(r.Results, burrowPeer.name)
	if len(burrow) == 0 {
		return ""
	}
	var b strings.Builder
	p99s := roundFigures(burrow, loadedP99)
	p99 := median(valuesOf(p99s))
	limit := msFloat(targetLoadedP99)
	fmt.Fprintf(&b, "- ping p99 under a saturating TCP stream ≤ %s ms: %s, median %.3f ms%s: %s\n",
		millis(targetLoadedP99), roundList(p99s, "%.3f", " ms"), p99, referenceP99s(r.Results),
		roundsVerdict(p99s, p99 <= limit, func(v float64) bool { return v <= limit }))

	ratios := roundRatios(r.Results, burrowPeer.name, singleRate)
	if len(ratios) == 0 {
		b.WriteString("- throughput against upstream wireguard-go: not measured, no round has both\n")
	} else {
		ratio := median(valuesOf(ratios))
		fmt.Fprintf(&b, "- single TCP stream ≥ %.1f× upstream wireguard-go in every paired round: %s: %s\n",
			targetRoundRatio, roundList(ratios, "%.2f", "×"),
			roundsVerdict(ratios, true, func(v float64) bool { return v >= targetRoundRatio }))
		enough := ""
		if len(ratios) < targetMedianRounds {
			enough = fmt.Sprintf(", but of fewer than %d rounds", targetMedianRounds)
		}
		fmt.Fprintf(&b, "- single TCP stream ≥ %.1f× upstream wireguard-go as the median of ≥ %d rounds: median %.2f× of %s: %s%s\n",
			targetMedianRatio, targetMedianRounds, ratio, plural(len(ratios), "paired round"),
			verdict(ratio >= targetMedianRatio && len(ratios) >= targetMedianRounds), enough)
	}

	if cpu := roundRatios(r.Results, burrowPeer.name, singleCPUPerGB); len(cpu) > 0 {
		ratio := median(valuesOf(cpu))
		multi := median(valuesOf(roundRatios(r.Results, burrowPeer.name, multiCPUPerGB)))
		fmt.Fprintf(&b, "- daemon CPU per GB ≤ %.1f× upstream wireguard-go's (1 stream, both ends): %s, median %.2f× (with %d streams median %.2f×): %s\n",
			targetCPURatio, roundList(cpu, "%.2f", "×"), ratio, multiStreams, multi,
			roundsVerdict(cpu, ratio <= targetCPURatio, func(v float64) bool { return v <= targetCPURatio }))
	}

	scale := fmt.Sprintf("burrow's %d streams carry %.2f× its single stream (median of the rounds)", multiStreams, median(figures(burrow, scaling)))
	if wg := measuredRounds(r.Results, upstreamWireguardPeer.name); len(wg) > 0 {
		scale += fmt.Sprintf(", upstream wireguard-go's %.2f×; with %d streams burrow carries %.2f× upstream wireguard-go's",
			median(figures(wg, scaling)), multiStreams, median(valuesOf(roundRatios(r.Results, burrowPeer.name, multiRate))))
	}
	fmt.Fprintf(&b, "- multi-stream scaling (the issue sets no figure): %s\n", scale)

	fmt.Fprintf(&b, "- switching cost ≤ %s ms one way per intermediate hop on a plain ring of %d (1–%d hops), beside ARP time across the ring: measured by `burrow bench ring`, a section of its own",
		millis(targetPerHop), targetRingSize, targetRingHops)
	if c := r.Chain; c != nil && c.Failed == "" {
		fmt.Fprintf(&b, "; the chain below gives %s ms per hop from the means, %s ms from the medians", millis(c.PerHop), millis(c.MedianPerHop))
	}
	b.WriteString("\n")
	return b.String()
}

// roundFigures is a figure of each result, tagged with its round.
func roundFigures(results []*Result, f figure) []roundValue {
	out := make([]roundValue, len(results))
	for i, r := range results {
		out[i] = roundValue{Round: r.Round, Value: f(r)}
	}
	return out
}

// referenceP99s names the p99 under load of upstream wireguard-go and the
// underlay, for comparison: " (upstream wireguard-go: median 3.2 ms; ...)".
func referenceP99s(results []*Result) string {
	var parts []string
	for _, p := range []*peer{upstreamWireguardPeer, baselinePeer} {
		if rs := measuredRounds(results, p.name); len(rs) > 0 {
			parts = append(parts, fmt.Sprintf("%s: median %.3f ms", p.title, median(figures(rs, loadedP99))))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// roundList renders values by round, each with its unit: "2.31×, 1.95×,
// 2.60× in rounds 1–3" or, when rounds are missing, "2.31× (round 1),
// 2.60× (round 3)".
func roundList(values []roundValue, format, unit string) string {
	var parts []string
	consecutive := true
	for i, v := range values {
		parts = append(parts, fmt.Sprintf(format, v.Value)+unit)
		consecutive = consecutive && v.Round == i+1
	}
	if consecutive {
		if len(values) == 1 {
			return parts[0] + " in round 1"
		}
		return fmt.Sprintf("%s in rounds 1–%d", strings.Join(parts, ", "), len(values))
	}
	for i, v := range values {
		parts[i] += fmt.Sprintf(" (round %d)", v.Round)
	}
	return strings.Join(parts, ", ")
}

// roundsVerdict says whether a target held in every round, and if not,
// whether its median did and in which rounds it was missed.
func roundsVerdict(values []roundValue, medianMet bool, met func(float64) bool) string {
	var missed []string
	for _, v := range values {
		if !met(v.Value) {
			missed = append(missed, fmt.Sprint(v.Round))
		}
	}
	switch {
	case len(missed) == 0:
		return "met in every round"
	case len(missed) == len(values):
		return "missed in every round"
	case medianMet:
		return "met by the median, missed in round " + strings.Join(missed, ", ")
	default:
		return "missed by the median, and in round " + strings.Join(missed, ", ")
	}
}

// cpuCell renders a test's CPU per GB, each process's share in brackets.
func cpuCell(r *Result, test streamTest) string {
	if !r.HasProcesses {
		return "–"
	}
	var parts []string
	for _, p := range test.CPU {
		parts = append(parts, fmt.Sprintf("%s %.2f", p.Label, perGB(p.Seconds, test.Bytes)))
	}
	return fmt.Sprintf("%.2f (%s)", test.CPUPerGB(), strings.Join(parts, ", "))
}

// medianCPUCell renders the median CPU per GB over the rounds, each
// process's median in brackets.
func medianCPUCell(rs []*Result, test func(*Result) streamTest) string {
	var total []float64
	byLabel := map[string][]float64{}
	var labels []string
	for _, r := range rs {
		t := test(r)
		total = append(total, t.CPUPerGB())
		for _, p := range t.CPU {
			if !slices.Contains(labels, p.Label) {
				labels = append(labels, p.Label)
			}
			byLabel[p.Label] = append(byLabel[p.Label], perGB(p.Seconds, t.Bytes))
		}
	}
	var parts []string
	for _, label := range labels {
		parts = append(parts, fmt.Sprintf("%s %.2f", label, median(byLabel[label])))
	}
	return fmt.Sprintf("%.2f (%s)", median(total), strings.Join(parts, ", "))
}

// rssCell renders each process's peak RSS.
func rssCell(rss []processRSS) string {
	if len(rss) == 0 {
		return "–"
	}
	var parts []string
	for _, p := range rss {
		parts = append(parts, fmt.Sprintf("%s %.1f", p.Label, mib(p.Bytes)))
	}
	return strings.Join(parts, ", ")
}

// peakRSSCell renders each process's largest peak RSS over the rounds.
func peakRSSCell(rs []*Result) string {
	var peaks []processRSS
	for _, r := range rs {
		for _, p := range r.RSS {
			i := slices.IndexFunc(peaks, func(q processRSS) bool { return q.Label == p.Label })
			if i < 0 {
				peaks = append(peaks, p)
			} else {
				peaks[i].Bytes = max(peaks[i].Bytes, p.Bytes)
			}
		}
	}
	return rssCell(peaks)
}

func mbitsText(bps float64) string { return fmt.Sprintf("%.0f", bps/1e6) }

func perGBText(cpuPerGB float64) string { return fmt.Sprintf("%.2f", cpuPerGB) }

// plural renders a count with its noun: "1 paired round", "3 paired rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
