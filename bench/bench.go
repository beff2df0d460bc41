// Package bench measures burrow against its peers and against the numbers
// of the seed papers, with real processes in network namespaces:
//
//   - the data path side by side with burrow's kernel path, other VPNs
//     (upstream and Debian's wireguard-go, tinc, nebula, n2n) and the
//     plain underlay, one after the other on the same two namespaces, in
//     paired rounds: iperf3 throughput with one stream and several, ping
//     RTT idle and under a saturating stream, CPU time per byte (the VPN's
//     processes', and the whole machine's, which counts softirq work too)
//     and peak memory, as the Warrens paper compares its tunnels with
//     WireGuard; optionally a perf profile of the burrow daemons;
//   - the latency a burrow node adds as a switching hop in a chain, the
//     EdgeVPN paper's E11 (0.37 ms a hop), and on a plain ring (RunRing),
//     with the time ARP takes across it;
//   - the paths run (RunPaths): a NAT lab in which every pair of nodes
//     settles on its kind of path — direct, hole-punched, WebSocket or
//     relayed by the beacon — with throughput and RTT over each, and the
//     set-up time of a restarted node's links against E11's 2.4 s.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"burrow/netlab"
)

// Options configures a benchmark run.
type Options struct {
	// Seconds is the length of each iperf3 test.
	Seconds int
	// Rounds is how many times every VPN is measured, the VPNs taking
	// turns within each round: paired rounds, so that each round's ratios
	// compare VPNs that met the same machine within a minute or two.
	Rounds int
	// Peers names the VPNs to run, in the order of PeerNames; empty runs
	// them all. The underlay always runs, as the reference for latency
	// under load.
	Peers []string
	// Burrow is the burrow executable to measure.
	Burrow string
	// CacheDir receives the upstream wireguard-go build; empty means
	// DefaultCacheDir.
	CacheDir string
	// ProfileDir, when set, receives a CPU profile of both burrow daemons
	// (perf record) taken during an extra single-stream iperf3 run in the
	// first round.
	ProfileDir string
	// Progress receives a line per step as the run goes.
	Progress io.Writer
}

// Timings of one VPN's run.
const (
	// upTimeout bounds starting a VPN and its first ping through the
	// tunnel; tinc's RSA handshake and n2n's supernode registration take
	// a few seconds, nothing needs more than this.
	upTimeout = 45 * time.Second
	// pingCount pings at pingInterval measure each VPN's round-trip time.
	pingCount    = 100
	pingInterval = 10 * time.Millisecond
	// multiStreams is how many parallel TCP streams the multi-stream
	// test runs (iperf3 -P).
	multiStreams = 4
	// logTailLines of each process log are reported for a VPN that failed.
	logTailLines = 15
	// minSeconds is the shortest iperf3 test that leaves room for the
	// pings under load: loadRampUp before them, loadTail after.
	minSeconds = 3
)

// Result is one VPN's measurement in one round, or why there is none.
type Result struct {
	Name  string
	Title string
	// Version is what the VPN's program says about itself.
	Version string
	// Round is the round, from 1; 0 for a VPN skipped before the rounds.
	Round int
	// Skipped says why the VPN did not run, naming where to get it.
	Skipped string
	// Failed says what went wrong once it ran; LogTail holds the end of
	// its processes' logs.
	Failed  string
	LogTail string

	// UpAfter is how long it took from starting the VPN's first process
	// to the first ping through it; zero for the baseline.
	UpAfter  time.Duration
	RTT      time.Duration
	PingLost int
	// Single and Multi are the iperf3 tests with one stream and with
	// multiStreams.
	Single, Multi streamTest
	// Loaded is the latency under a saturating single stream.
	Loaded loadedLatency
	// HasProcesses is false for the baseline.
	HasProcesses bool
	// RSS is each process's peak RSS at the end of the round.
	RSS []processRSS
}

// streamTest is one iperf3 test and the CPU time the VPN spent on it.
type streamTest struct {
	throughput
	// CPU is the CPU time each of the VPN's processes used during the
	// test; none for the baseline.
	CPU []processCPU
	// MachineCPU is the busy time of all the machine's CPUs during the
	// test, in seconds: iperf3 and the kernel's networking on both ends,
	// the VPN's processes, the softirq work no process is charged for
	// (a kernel path's), and whatever else the machine ran meanwhile.
	MachineCPU float64
	// Programs is the run time of each of a kernel path's eBPF programs
	// during the test, as the kernel counts it; none for other VPNs.
	Programs []programRunTime
}

// programRunTime is the time an eBPF program ran, and how often.
type programRunTime struct {
	Label   string
	Seconds float64
	Runs    uint64
}

// Program is the run time of the program labelled label, if measured.
func (s streamTest) Program(label string) (programRunTime, bool) {
	for _, p := range s.Programs {
		if p.Label == label {
			return p, true
		}
	}
	return programRunTime{}, false
}

// processCPU is the CPU time one process of a VPN used.
type processCPU struct {
	Label   string
	Seconds float64
}

// CPUSeconds is the CPU time of all the VPN's processes, both ends.
func (s streamTest) CPUSeconds() float64 {
	var total float64
	for _, p := range s.CPU {
		total += p.Seconds
	}
	return total
}

// CPUPerGB is the CPU time the VPN spent per 10^9 bytes received.
func (s streamTest) CPUPerGB() float64 { return perGB(s.CPUSeconds(), s.Bytes) }

// MachineCPUPerGB is the machine's busy CPU time per 10^9 bytes received.
func (s streamTest) MachineCPUPerGB() float64 { return perGB(s.MachineCPU, s.Bytes) }

func perGB(seconds float64, bytes uint64) float64 { return seconds / (float64(bytes) / 1e9) }

// measured reports whether the result holds numbers.
func (r *Result) measured() bool { return r.Skipped == "" && r.Failed == "" }

// Report is the outcome of a whole run.
type Report struct {
	Started time.Time
	Seconds int
	Rounds  int
	// Results holds the VPNs skipped before the rounds, then every VPN's
	// result round by round, in the order they ran.
	Results []*Result
	// Profile is where the burrow daemons' cycles went, with --profile.
	Profile *ProfileResult
	Chain   *ChainResult
	// LoadBefore and LoadAfter are the machine's one-minute load averages
	// at the start and the end: the other programs the VPNs shared the
	// CPUs with.
	LoadBefore, LoadAfter string
}

// bencher is one run in progress.
type bencher struct {
	opts     Options
	lab      *netlab.Lab
	a, b     *netlab.Host
	progress io.Writer
	// upstreamWireguard is the path of the upstream wireguard-go build,
	// set when its peer is prepared.
	upstreamWireguard string
	// profile is the outcome of --profile, once taken.
	profile *ProfileResult
}

// newLab builds an empty lab whose configurations and logs are kept, after
// the run, in a new temporary directory named with prefix.
func newLab(prefix string, progress io.Writer) (*netlab.Lab, error) {
	logDir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	lab, err := netlab.New(netlab.Options{LogDir: logDir})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "lab %s, configurations and logs in %s\n", lab.Prefix(), logDir)
	return lab, nil
}

// maxRounds keeps every round's VPNs in subnets of their own (see
// virtualSubnet).
var maxRounds = 254 / len(allPeers)

// validate checks the options before a lab is built.
func (o *Options) validate(peers []*peer) error {
	if o.Seconds < minSeconds {
		return fmt.Errorf("bench: seconds must be at least %d, room for the pings under load, not %d", minSeconds, o.Seconds)
	}
	if o.Rounds < 1 || o.Rounds > maxRounds {
		return fmt.Errorf("bench: rounds must be 1 to %d, not %d", maxRounds, o.Rounds)
	}
	if o.ProfileDir != "" {
		if !slices.Contains(peers, burrowPeer) {
			return errors.New("bench: --profile profiles the burrow daemons: burrow must be among the peers")
		}
		if err := perfAvailable(); err != nil {
			return err
		}
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("bench: profile directory: %w", err)
		}
	}
	return nil
}

// Run builds a lab with two internet hosts and measures each selected VPN
// on them, Rounds times: in each round every VPN in turn is brought up,
// measured and stopped. When burrow is among them, the three-node chain
// follows. A VPN that cannot run or fails is recorded as such and the run
// goes on; the error is for a lab that could not be built or a cancelled
// ctx.
func Run(ctx context.Context, opts Options) (*Report, error) {
	peers, err := selectPeers(opts.Peers)
	if err != nil {
		return nil, err
	}
	if peers[0] != baselinePeer {
		peers = append([]*peer{baselinePeer}, peers...)
	}
	if err := opts.validate(peers); err != nil {
		return nil, err
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	lab, err := newLab("burrow-bench-", opts.Progress)
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	b := &bencher{opts: opts, lab: lab, progress: opts.Progress}
	if b.a, err = lab.AddHost("a"); err != nil {
		return nil, err
	}
	if b.b, err = lab.AddHost("b"); err != nil {
		return nil, err
	}
	report := &Report{Started: time.Now(), Seconds: opts.Seconds, Rounds: opts.Rounds, LoadBefore: loadAverage()}
	ready := map[*peer]string{} // the version of each peer that can run
	for _, p := range peers {
		if err := p.prepare(ctx, b); err != nil {
			fmt.Fprintf(b.progress, "== %s skipped: %v\n", p.title, err)
			report.Results = append(report.Results, &Result{Name: p.name, Title: p.title, Skipped: err.Error()})
			continue
		}
		ready[p] = p.version(b)
	}
	for round := 1; round <= opts.Rounds; round++ {
		for _, p := range peers {
			version, ok := ready[p]
			if !ok {
				continue
			}
			report.Results = append(report.Results, b.runPeer(ctx, round, p, version))
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	report.Profile = b.profile
	if _, ok := ready[burrowPeer]; ok {
		report.Chain = b.runChain(ctx)
	}
	report.LoadAfter = loadAverage()
	return report, ctx.Err()
}

// runPeer brings one VPN up, measures it and stops it.
func (b *bencher) runPeer(ctx context.Context, round int, p *peer, version string) *Result {
	r := &Result{Name: p.name, Title: p.title, Version: version, Round: round}
	fmt.Fprintf(b.progress, "== round %d of %d: %s\n", round, b.opts.Rounds, p.title)
	t := &tunnel{}
	fail := func(format string, args ...any) *Result {
		r.Failed = fmt.Sprintf(format, args...)
		r.LogTail = t.logTail(logTailLines)
		fmt.Fprintf(b.progress, "   failed: %s\n%s", r.Failed, r.LogTail)
		if err := t.stop(); err != nil {
			fmt.Fprintf(b.progress, "   stopping: %v\n", err)
		}
		return r
	}

	upCtx, cancel := context.WithTimeout(ctx, upTimeout)
	err := p.start(upCtx, b, t, virtualSubnet(round, p))
	if err == nil {
		err = t.waitFor(upCtx, "a ping through the tunnel", func() bool {
			res, err := netlab.Ping(upCtx, b.a, t.target, 1, 200*time.Millisecond)
			return err == nil && res.Received == 1
		})
	}
	cancel()
	if err != nil {
		return fail("did not come up: %v", err)
	}
	if !t.started.IsZero() {
		r.UpAfter = time.Since(t.started)
		fmt.Fprintf(b.progress, "   up %v after its first process started\n", r.UpAfter.Round(time.Millisecond))
	}

	ping, err := netlab.Ping(ctx, b.a, t.target, pingCount, pingInterval)
	if err != nil || ping.Received == 0 {
		return fail("ping through the tunnel: %d of %d replies, %v", ping.Received, ping.Transmitted, err)
	}
	r.RTT, r.PingLost = ping.AvgRTT, ping.Transmitted-ping.Received
	fmt.Fprintf(b.progress, "   ping %d: mean RTT %s ms, %d lost\n", pingCount, millis(r.RTT), r.PingLost)

	server, err := netlab.StartIperf3Server(b.b)
	if err != nil {
		return fail("iperf3 server: %v", err)
	}
	defer server.Stop()
	for _, test := range []struct {
		result  *streamTest
		streams int
	}{{&r.Single, 1}, {&r.Multi, multiStreams}} {
		if *test.result, err = b.streamTest(ctx, t, test.streams); err != nil {
			return fail("iperf3 with %d streams through the tunnel: %v", test.streams, err)
		}
		fmt.Fprintf(b.progress, "   iperf3 %d s, %s: %.0f Mbit/s, %d retransmits, %.2f CPU-s, the machine's %.2f CPU-s\n",
			b.opts.Seconds, plural(test.streams, "stream"), test.result.BitsPerSecond/1e6, test.result.Retransmits, test.result.CPUSeconds(), test.result.MachineCPU)
	}
	if r.Loaded, err = latencyUnderLoad(ctx, b.a, t.target, b.opts.Seconds); err != nil {
		return fail("latency under load: %v", err)
	}
	fmt.Fprintf(b.progress, "   under load (%.0f Mbit/s): ping p50 %s ms, p99 %s ms, %d of %d lost\n",
		r.Loaded.Stream.BitsPerSecond/1e6, millis(r.Loaded.P50()), millis(r.Loaded.P99()), r.Loaded.Lost(), r.Loaded.Sent)
	if p == burrowPeer && b.opts.ProfileDir != "" && b.profile == nil {
		b.profile = b.profileBurrow(ctx, t, round)
	}
	r.HasProcesses = len(t.processes) > 0
	if r.RSS, err = t.peakRSS(); err != nil {
		return fail("peak RSS: %v", err)
	}
	if err := t.stop(); err != nil {
		fmt.Fprintf(b.progress, "   stopping: %v\n", err)
	}
	return r
}

// streamTest runs one iperf3 test from a to b through the tunnel and
// takes the CPU time each of its processes spent meanwhile, and the
// machine's.
func (b *bencher) streamTest(ctx context.Context, t *tunnel, streams int) (streamTest, error) {
	machineBefore, err := machineBusySeconds()
	if err != nil {
		return streamTest{}, fmt.Errorf("machine CPU time: %w", err)
	}
	before, err := t.cpuSeconds()
	if err != nil {
		return streamTest{}, fmt.Errorf("CPU time: %w", err)
	}
	programsBefore, err := t.programRunTimes()
	if err != nil {
		return streamTest{}, fmt.Errorf("the kernel path's run time: %w", err)
	}
	tp, err := runIperf3(ctx, b.a, t.target, b.opts.Seconds, streams)
	after, cpuErr := t.cpuSeconds()
	programsAfter, programsErr := t.programRunTimes()
	machineAfter, machineErr := machineBusySeconds()
	if err = errors.Join(err, cpuErr, programsErr, machineErr); err != nil {
		return streamTest{}, err
	}
	test := streamTest{throughput: tp, MachineCPU: machineAfter - machineBefore}
	for i, p := range t.processes {
		test.CPU = append(test.CPU, processCPU{Label: p.label, Seconds: after[i] - before[i]})
	}
	for i, p := range programsAfter {
		test.Programs = append(test.Programs, programRunTime{Label: p.Label, Seconds: p.Seconds - programsBefore[i].Seconds, Runs: p.Runs - programsBefore[i].Runs})
	}
	return test, nil
}

// loadAverage returns the one-minute load average, or "unknown".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if fields := strings.Fields(string(data)); err == nil && len(fields) > 0 {
		return fields[0]
	}
	return "unknown"
}

// virtualSubnet is the private subnet the VPN's tunnel addresses come
// from in the round. Each VPN gets its own in each round, so nothing a
// previous one left behind (a route, a neighbour entry) can carry the next
// one's traffic.
func virtualSubnet(round int, p *peer) netip.Prefix {
	index := (round-1)*len(allPeers) + slices.Index(allPeers, p)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte(index + 1), 0}), 24)
}

// chainSubnet holds the chain's addresses, apart from every round's.
var chainSubnet = netip.MustParsePrefix("10.77.255.0/24")

// hostAddr returns the n-th address of the subnet, keeping its length.
func hostAddr(subnet netip.Prefix, n int) netip.Prefix {
	a := subnet.Masked().Addr().As4()
	a[3] += byte(n)
	return netip.PrefixFrom(netip.AddrFrom4(a), subnet.Bits())
}

// configDir makes a directory for a VPN's configuration under the lab's
// log directory.
func (b *bencher) configDir(parts ...string) (string, error) {
	dir := filepath.Join(append([]string{b.lab.LogDir()}, parts...)...)
	return dir, os.MkdirAll(dir, 0o700)
}

func millis(d time.Duration) string {
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond))
}

func peerNames(peers []*peer) []string {
	names := make([]string, len(peers))
	for i, p := range peers {
		names[i] = p.name
	}
	return names
}

// selectPeers returns the named peers in their canonical order, or all.
func selectPeers(names []string) ([]*peer, error) {
	if len(names) == 0 {
		return allPeers, nil
	}
	var unknown []string
	for _, name := range names {
		if !slices.Contains(PeerNames(), name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("bench: unknown peers %s; known: %s",
			strings.Join(unknown, ", "), strings.Join(PeerNames(), ", "))
	}
	var out []*peer
	for _, p := range allPeers {
		if slices.Contains(names, p.name) {
			out = append(out, p)
		}
	}
	return out, nil
}

// PeerNames lists the names --peers accepts, in the order they run.
func PeerNames() []string { return peerNames(allPeers) }
