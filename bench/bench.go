// Package bench measures burrow against its peers and against the numbers
// of the seed papers, with real processes in network namespaces:
//
//   - the data path side by side with other VPNs (upstream and Debian's
//     wireguard-go, tinc, nebula, n2n) and the plain underlay, one after
//     the other on the same two namespaces: iperf3 throughput, ping RTT,
//     CPU time per byte and peak memory, as the Warrens paper compares its
//     tunnels with WireGuard;
//   - the latency a burrow node adds as a switching hop in a chain, the
//     EdgeVPN paper's E11 (0.37 ms a hop);
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
	// Peers names the VPNs to run, in the order of PeerNames; empty runs
	// them all.
	Peers []string
	// Burrow is the burrow executable to measure.
	Burrow string
	// CacheDir receives the upstream wireguard-go build; empty means
	// DefaultCacheDir.
	CacheDir string
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
	// logTailLines of each process log are reported for a VPN that failed.
	logTailLines = 15
)

// Result is one VPN's measurement, or why there is none.
type Result struct {
	Name  string
	Title string
	// Version is what the VPN's program says about itself.
	Version string
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
	throughput
	// CPUSeconds is the CPU time all the VPN's processes used during the
	// iperf3 test; HasProcesses is false for the baseline.
	CPUSeconds   float64
	HasProcesses bool
	RSS          []processRSS
}

// CPUPerGB is the CPU time the VPN spent per 10^9 bytes received.
func (r *Result) CPUPerGB() float64 {
	return r.CPUSeconds / (float64(r.Bytes) / 1e9)
}

// measured reports whether the result holds numbers.
func (r *Result) measured() bool { return r.Skipped == "" && r.Failed == "" }

// Report is the outcome of a whole run.
type Report struct {
	Started time.Time
	Seconds int
	Results []*Result
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

// Run builds a lab with two internet hosts, runs each selected VPN on them
// in turn and, when burrow is among them, the three-node chain. A VPN that
// cannot run or fails is recorded as such and the run goes on; the error
// is for a lab that could not be built or a cancelled ctx.
func Run(ctx context.Context, opts Options) (*Report, error) {
	peers, err := selectPeers(opts.Peers)
	if err != nil {
		return nil, err
	}
	if opts.Seconds < 1 {
		return nil, fmt.Errorf("bench: seconds must be at least 1, not %d", opts.Seconds)
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
	report := &Report{Started: time.Now(), Seconds: opts.Seconds, LoadBefore: loadAverage()}
	for i, p := range peers {
		report.Results = append(report.Results, b.runPeer(ctx, i, p))
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if slices.Contains(peerNames(peers), burrowPeer.name) {
		report.Chain = b.runChain(ctx)
	}
	report.LoadAfter = loadAverage()
	return report, ctx.Err()
}

// runPeer brings one VPN up, measures it and stops it.
func (b *bencher) runPeer(ctx context.Context, index int, p *peer) *Result {
	r := &Result{Name: p.name, Title: p.title}
	fmt.Fprintf(b.progress, "== %s\n", p.title)
	if err := p.prepare(ctx, b); err != nil {
		r.Skipped = err.Error()
		fmt.Fprintf(b.progress, "   skipped: %s\n", r.Skipped)
		return r
	}
	r.Version = p.version(b)
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
	err := p.start(upCtx, b, t, virtualSubnet(index))
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
	before, err := t.cpuSeconds()
	if err != nil {
		return fail("CPU time: %v", err)
	}
	tp, err := runIperf3(ctx, b.a, t.target, b.opts.Seconds)
	after, cpuErr := t.cpuSeconds()
	if err = errors.Join(err, cpuErr); err != nil {
		return fail("iperf3 through the tunnel: %v", err)
	}
	r.throughput = tp
	r.CPUSeconds, r.HasProcesses = after-before, len(t.processes) > 0
	fmt.Fprintf(b.progress, "   iperf3 %d s: %.0f Mbit/s, %d retransmits, %.2f CPU-s\n",
		b.opts.Seconds, tp.BitsPerSecond/1e6, tp.Retransmits, r.CPUSeconds)

	if r.RSS, err = t.peakRSS(); err != nil {
		return fail("peak RSS: %v", err)
	}
	if err := t.stop(); err != nil {
		fmt.Fprintf(b.progress, "   stopping: %v\n", err)
	}
	return r
}

// loadAverage returns the one-minute load average, or "unknown".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if fields := strings.Fields(string(data)); err == nil && len(fields) > 0 {
		return fields[0]
	}
	return "unknown"
}

// virtualSubnet is the private subnet the index-th VPN's tunnel addresses
// come from. Each VPN gets its own, so nothing a previous one left behind
// (a route, a neighbour entry) can carry the next one's traffic.
func virtualSubnet(index int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte(index + 1), 0}), 24)
}

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
