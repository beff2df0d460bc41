package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"burrow/bench"
	"burrow/netlab"
)

func init() {
	var (
		opts        bench.Options
		out, burrow string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark burrow's data path against other VPNs",
		Long: `Build a lab of two network namespaces joined by a plain veth underlay and
measure, on those same two namespaces, burrow, burrow with its kernel path
(burrow-kernel: the same two daemons with kernel_path on, trusting each
other's underlay address, measured once both logs say "kernel path to peer
up"; unencrypted, skipped where the kernel cannot load its eBPF programs),
burrow with a 20-rule firewall on both daemons (burrow-firewall: the last
rule allows the traffic, so a new connection is checked against all 20),
upstream wireguard-go, Debian's wireguard-go, tinc 1.0 in switch mode,
nebula, n2n and no VPN at all (the underlay always runs, as the reference).

The VPNs run in --rounds paired rounds: in each round every VPN in turn is
brought up, measured and stopped (burrow, wireguard-go, burrow,
wireguard-go, ...), so that each round's ratios compare VPNs that met the
same machine within minutes. Per VPN and round: mean ping RTT; iperf3 TCP
throughput and retransmits with 1 stream and with 4 (-P 4); CPU-seconds per
GB over both ends' processes (and each process's share); machine CPU-seconds
per GB: the busy time of all CPUs from /proc/stat (user, nice, system, irq,
softirq, steal) during the test, which counts iperf3, the kernel and the
softirq work no process is charged for, where the kernel path does its
work (for none, the cost of iperf3 and the kernel alone; anything else the
machine runs meanwhile counts too); peak RSS of each process; and latency
under load: ping -i 0.01 through the tunnel while a single iperf3 stream
saturates it, p50 and p99 of the per-reply times. The report gives every
round, the medians, each round's ratios to upstream wireguard-go with
their median, the kernel path against the encrypted path round by round,
and checks burrow against the targets of issue 14 and the standing ones in
docs/benchmarks.md.

--profile DIR samples both burrow daemons with perf record (cpu-clock,
call graphs) during one more single-stream test in burrow's first round,
keeps the recordings and full reports in DIR and puts each daemon's top
functions and the shares by Go package in the report. burrow up serves no
pprof: perf samples the daemons from outside.

Last, a chain of three burrow nodes A—B—C gives the latency one switching
hop adds (see burrow bench ring for a ring of 8). A VPN whose programs are
missing is skipped with the Debian package or Go module that provides them
(bench/install-peers.sh installs them all); one that fails is reported
with the tail of its logs.

The results, with date, command, kernel, CPU and burrow commit, are printed
and appended to --out as a new section. Needs root.`,
		Example: `  bench/install-peers.sh
  CGO_ENABLED=0 go build -o /tmp/burrow-bench ./cmd/burrow && /tmp/burrow-bench bench --rounds 3 --peers burrow,wireguard-go --out docs/benchmarks.md
  burrow bench --rounds 3 --peers burrow,wireguard-go --profile /tmp/burrow-profile --out ""
  burrow bench --rounds 3 --peers burrow,burrow-kernel,wireguard-go --out docs/benchmarks.md
  burrow bench --rounds 1 --seconds 10 --out docs/benchmarks.md      # every VPN once
  burrow bench --seconds 3 --rounds 1 --peers none,burrow,wireguard-go --out ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				opts.Burrow, opts.Progress = binary, cmd.ErrOrStderr()
				return bench.Run(ctx, opts)
			})
		},
	}
	cmd.Flags().IntVar(&opts.Seconds, "seconds", 10, "length of each iperf3 test, at least 3")
	cmd.Flags().IntVar(&opts.Rounds, "rounds", 3, "paired rounds: every VPN measured this many times, taking turns")
	cmd.Flags().StringSliceVar(&opts.Peers, "peers", nil,
		"VPNs to run, comma-separated (default all; the underlay none always runs): "+strings.Join(bench.PeerNames(), ","))
	cmd.Flags().StringVar(&opts.ProfileDir, "profile", "", "profile both burrow daemons with perf during burrow's first round; keep the recordings in this directory")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	cmd.Flags().StringVar(&opts.CacheDir, "cache-dir", bench.DefaultCacheDir(), "where upstream wireguard-go is built and kept")
	cmd.AddCommand(benchPathsCommand(), benchRelayCommand(), benchFailoverCommand(), benchFormationCommand(), benchRingCommand(), benchContainersCommand())
	rootCmd.AddCommand(cmd)
}

func benchRingCommand() *cobra.Command {
	var (
		opts        bench.RingOptions
		out, burrow string
	)
	cmd := &cobra.Command{
		Use:   "ring",
		Short: "Measure the latency each switching node adds, and ARP time, across a plain ring",
		Long: `Build a plain ring of --nodes burrow daemons on one bridge without NAT, in
node-ID order: overlay.successors 1, no long-distance or on-demand links,
services.arp_answer off (so that ARP requests cross the ring), every node
joining through the first. Once each node is linked to exactly its two ring
neighbours, from the first node in ring order:

  - a path check: a burst of pings to each of the nodes 1 to --hops hops
    along the ring, while the links' byte counters show which nodes forward
    them (the nodes in between, expected);
  - --rounds rounds of --pings pings at 5 ms to each of those nodes in
    turn: mean, median and p99 RTT per hop count;
  - the cost of one switching node: the slope of the one-way latency (half
    the RTT) against the number of nodes in between, least squares over 1
    to --hops hops, from the means and from the medians;
  - ARP time across the ring: arping (--arpings requests at 20 ms) on the
    first node's TAP for the address of the farthest node, half the ring
    away: p50 of the reply times.

Checked against issue 14's target: at most 0.05 ms one way per
intermediate hop on a ring of 8. The results, with date, command, kernel,
CPU and burrow commit, are printed and appended to --out as a new section.
Needs root and arping.`,
		Example: `  CGO_ENABLED=0 go build -o /tmp/burrow-bench ./cmd/burrow && /tmp/burrow-bench bench ring --out docs/benchmarks.md
  burrow bench ring --nodes 16 --hops 8 --rounds 10 --out ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				opts.Burrow, opts.Progress = binary, cmd.ErrOrStderr()
				return bench.RunRing(ctx, opts)
			})
		},
	}
	cmd.Flags().IntVar(&opts.Nodes, "nodes", 8, "size of the ring, at least twice --hops")
	cmd.Flags().IntVar(&opts.Hops, "hops", 4, "the farthest node pinged, in hops along the ring")
	cmd.Flags().IntVar(&opts.Rounds, "rounds", 25, "rounds of pings, each to every node in turn")
	cmd.Flags().IntVar(&opts.Pings, "pings", 20, "pings to each node per round")
	cmd.Flags().IntVar(&opts.Arpings, "arpings", 100, "ARP requests to the farthest node")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	return cmd
}

func benchPathsCommand() *cobra.Command {
	var (
		seconds, rounds int
		out, burrow     string
	)
	cmd := &cobra.Command{
		Use:   "paths",
		Short: "Measure link set-up, throughput and RTT over each kind of path in a NAT lab",
		Long: `Build a NAT lab: a beacon on the lab's internet (also serving plain ws:// on
port 443), a and b behind endpoint-independent NATs, c1 and c2 behind
symmetric NATs, d behind a router that lets only TCP 443 out. Every member
knows just the beacon and links to every other member. Once every pair is on
the path it has to take (direct, relayed by the beacon, WebSocket), measure:

  - ping RTT and single-stream TCP throughput (iperf3) over a–b (direct,
    hole-punched), c1–c2 (relayed by the beacon), d–a (WebSocket, then
    relayed) and beacon–a (direct), each pair's path checked in both ends'
    status before and after; the beacon's CPU-seconds per GB while it relays;
  - link set-up: a, c1 and d are restarted in turn, --rounds times, each
    once with the NAT routers' state for it kept and once with it cleared;
    each link's time from the process start to up (its since in status) is
    given per kind of path, with the handshake RTT;
  - the beacon's peak RSS.

The results, with date, command, kernel, CPU and burrow commit, are printed
and appended to --out as a new section. Needs root and iperf3.`,
		Example: `  CGO_ENABLED=0 go build -o /tmp/burrow-bench ./cmd/burrow && /tmp/burrow-bench bench paths --out docs/benchmarks.md`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				return bench.RunPaths(ctx, bench.PathsOptions{
					Seconds:  seconds,
					Rounds:   rounds,
					Burrow:   binary,
					Progress: cmd.ErrOrStderr(),
				})
			})
		},
	}
	cmd.Flags().IntVar(&seconds, "seconds", 10, "length of each iperf3 test")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "how many times each of a, c1 and d is restarted")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	return cmd
}

func benchRelayCommand() *cobra.Command {
	var (
		seconds, rounds int
		maxRate         float64
		out, burrow     string
	)
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Measure TCP throughput through a member relay against direct throughput",
		Long: `Build a NAT lab: a beacon, public members p1 and p2 that relay (their
relay.max_rate far above what the machine carries, or --max-rate to measure
the cap, with the datagrams it paced and dropped), and c1 and c2 behind
symmetric NATs, in a full mesh. Once c1–c2 is relayed, stop the beacon and
wait until c1–c2 is relayed by p1 or p2, as both ends' status names it. Then,
--rounds times in turn, run one iperf3 TCP stream p1 → p2 (direct) and one
c1 → c2 (through the member relay), and report each round's relayed/direct
ratio, the median and the relaying member's CPU time. The target is a
relayed throughput of at least half the direct one.

The results, with date, command, kernel, CPU and burrow commit, are printed
and appended to --out as a new section. Needs root and iperf3.`,
		Example: `  CGO_ENABLED=0 go build -o /tmp/burrow-bench ./cmd/burrow && /tmp/burrow-bench bench relay --out docs/benchmarks.md`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				return bench.RunRelay(ctx, bench.RelayOptions{
					Seconds:  seconds,
					Rounds:   rounds,
					MaxRate:  maxRate * (1 << 20),
					Burrow:   binary,
					Progress: cmd.ErrOrStderr(),
				})
			})
		},
	}
	cmd.Flags().IntVar(&seconds, "seconds", 10, "length of each iperf3 test")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "how many times the direct and the relayed test run, in turn")
	cmd.Flags().Float64Var(&maxRate, "max-rate", 0, "the relaying members' relay.max_rate in MiB/s, to measure the cap (default: far above what the machine carries)")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	return cmd
}

func benchContainersCommand() *cobra.Command {
	var (
		seconds, rounds int
		out, burrow     string
	)
	cmd := &cobra.Command{
		Use:   "containers",
		Short: "Measure throughput between containers on burrow-cni and through VXLAN over burrow",
		Long: `Build a NAT lab: a beacon, and members a and b behind endpoint-independent
NATs, linked directly, each with its container subnet. Then measure a
single TCP stream (iperf3) from a to b three ways, in turn, --rounds times:

  - host to host over burrow, between the nodes' TAP addresses;
  - between two containers that burrow-cni attached, one on each node;
  - between two containers on a kernel VXLAN segment whose underlay is
    burrow's virtual Ethernet (flannel's style: a VXLAN device over each
    TAP with a static forwarding entry to the other node's address).

Each round gives each path's throughput and its ratio to host to host in
the same round. The results, with date, command, kernel, CPU and burrow
commit, are printed and appended to --out as a new section. Needs root and
iperf3.`,
		Example: `  CGO_ENABLED=0 go build -o /tmp/burrow-bench ./cmd/burrow && /tmp/burrow-bench bench containers --out docs/benchmarks.md`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				return bench.RunContainers(ctx, bench.ContainersOptions{Seconds: seconds, Rounds: rounds, Burrow: binary, Progress: cmd.ErrOrStderr()})
			})
		},
	}
	cmd.Flags().IntVar(&seconds, "seconds", 10, "length of each iperf3 test")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "how many times each path is measured")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	return cmd
}

func benchFailoverCommand() *cobra.Command {
	var (
		seconds, rounds       int
		out, burrow, baseline string
	)
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Measure how flows across a ring survive the death and departure of the nodes they cross",
		Long: `Build rings of burrow daemons on one bridge without NAT (overlay.successors 2, no
long-distance or on-demand links, the default link timers), so that a flow
between opposite nodes crosses the nodes in between, and measure:

  - protection switching: on a ring of 8, a UDP stream of 10,000 datagrams
    a second from the first node in ring order to the opposite one; the
    node it crosses (found from the links' byte counters) is killed with
    SIGKILL: datagrams lost, switching time (lost × 0.1 ms) and the longest
    gap; then it is restarted, the ring left to settle, and again, --rounds
    times; then the same --rounds times with SIGTERM, a graceful leave;
  - TCP through churn: on a ring of 12, one iperf3 TCP stream between
    opposite nodes for --seconds; every 15 s a node it crosses is killed
    and restarted 5 s later: per-second rates, seconds at zero and below
    10 Mbit/s, the time until the rate is back to 80 % of what it was
    before the first kill after each kill and restart, retransmits, and
    whether the connection broke.

With --baseline, another burrow binary (an older build, say) is measured
the same way in the same run, its rounds alternating with this one's, so
that before and after meet the same machine. Both are checked against the
failover targets in docs/benchmarks.md.

The results, with date, command, kernel, CPU and burrow commit, are printed
and appended to --out as a new section. Needs root and iperf3.`,
		Example: `  CGO_ENABLED=0 go build -o /tmp/burrow-now ./cmd/burrow && /tmp/burrow-now bench failover --baseline /tmp/burrow-before --out docs/benchmarks.md
  burrow bench failover --rounds 1 --seconds 30 --out ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				return bench.RunFailover(ctx, bench.FailoverOptions{
					Rounds:   rounds,
					Seconds:  seconds,
					Burrow:   binary,
					Baseline: baseline,
					Progress: cmd.ErrOrStderr(),
				})
			})
		},
	}
	cmd.Flags().IntVar(&rounds, "rounds", 3, "how many times the UDP stream's bridge is killed, and then stopped gracefully, per binary")
	cmd.Flags().IntVar(&seconds, "seconds", 90, "length of the TCP churn scenario")
	cmd.Flags().StringVar(&baseline, "baseline", "", "another burrow binary to measure side by side, its rounds alternating with this one's")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	return cmd
}

func benchFormationCommand() *cobra.Command {
	var (
		opts        bench.FormationOptions
		out, burrow string
	)
	cmd := &cobra.Command{
		Use:   "formation",
		Short: "Measure how fast a ring of many daemons started at once forms, and what it costs",
		Long: `For each size of --nodes in turn, build a lab of that many hosts on one bridge
(no NAT) and start one burrow daemon on each at once, every setting at its
default and every node but the first given the first as its only bootstrap
contact. While they form, every daemon's status is read twice a second and
a line a second shows how many are joined and placed (first successor and
predecessor both the true neighbours by node ID). Then:

  - formation: when each node first said it was joined (min / median /
    max), when all were, when the ring was first consistent (or that it
    was not within --limit, naming the misplaced nodes and what their
    status showed), and whether the count of joined nodes ever went down;
  - at rest: each daemon's RSS and its CPU time over --quiet untouched,
    and the memory the whole lab took;
  - broadcast: one node sends 3 ARP requests for an address nobody has;
    tcpdump on every other TAP (at most --sample of them, spread around
    the ring) counts each request's copies: 0, 1 or more than once;
  - --churn: a tenth of the daemons killed (SIGKILL) at once and started
    again 5 s later; the time until the ring is consistent again;
  - --soak D: for D, one of that tenth killed every --soak-every in turn
    and restarted 5 s later; how often the ring was consistent, and every
    other daemon's RSS and open files at the start and the end, growth
    flagged.

A size that does not fit in the machine's available memory is skipped and
says so. The results, with date, command, kernel, CPU and burrow commit, are
printed and appended to --out as a new section. Needs root, arping and
tcpdump.`,
		Example: `  CGO_ENABLED=0 go build -o /tmp/burrow-form ./cmd/burrow && /tmp/burrow-form bench formation --nodes 32,96 --out docs/benchmarks.md
  burrow bench formation --nodes 256 --limit 10m --sample 64 --out ""
  burrow bench formation --nodes 32 --churn --soak 10m --out ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				opts.Burrow, opts.Progress = binary, cmd.ErrOrStderr()
				return bench.RunFormation(ctx, opts)
			})
		},
	}
	cmd.Flags().IntSliceVar(&opts.Sizes, "nodes", []int{32, 96, 256}, "how many daemons to start at once, each size in turn")
	cmd.Flags().DurationVar(&opts.Limit, "limit", 240*time.Second, "how long a ring may take to become consistent, at the start and after churn")
	cmd.Flags().IntVar(&opts.Sample, "sample", 128, "the most TAPs the broadcast check watches")
	cmd.Flags().DurationVar(&opts.Quiet, "quiet", time.Minute, "how long the formed network idles while its CPU time is measured")
	cmd.Flags().BoolVar(&opts.Churn, "churn", false, "once formed, kill and restart a tenth of the daemons and time the ring's return")
	cmd.Flags().DurationVar(&opts.Soak, "soak", 0, "then keep killing and restarting them for this long, watching for growth")
	cmd.Flags().DurationVar(&opts.SoakEvery, "soak-every", 10*time.Second, "time between two kills of the soak, at least 5s")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	return cmd
}

// report is the result of a benchmark, rendered for docs/benchmarks.md.
type report interface{ Markdown(bench.Machine) string }

// runBenchmark measures the burrow binary given (default: this one) and
// prints and publishes the report.
func runBenchmark(cmd *cobra.Command, burrow, out string, measure func(ctx context.Context, binary string) (report, error)) error {
	binary, err := benchBinary(burrow, out)
	if err != nil {
		return err
	}
	ctx, stop := interruptible()
	defer stop()
	machine := bench.DescribeMachine(commandLine(os.Args), binary)
	r, err := measure(ctx, binary)
	if err := runError(ctx, err); err != nil {
		return err
	}
	return publish(cmd, r.Markdown(machine), out)
}

// benchBinary resolves the burrow binary to measure (default: this one)
// and checks, before minutes of measuring rather than after, that the
// results can be written and that labs can run here.
func benchBinary(burrow, out string) (string, error) {
	if burrow == "" {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		burrow = self
	}
	binary, err := filepath.Abs(burrow)
	if err != nil {
		return "", err
	}
	if out != "" {
		if _, err := os.Stat(filepath.Dir(out)); err != nil {
			return "", fmt.Errorf("--out: %w", err)
		}
	}
	return binary, netlab.Available()
}

// interruptible returns a context a signal cancels, which makes a run stop
// its processes and remove its lab before the program ends; a second
// signal takes its default effect.
func interruptible() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// runError turns a run's outcome into the command's error.
func runError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errors.New("interrupted: every process it started is stopped and its lab removed")
	}
	return err
}

// publish prints a report section and appends it to out, unless out is "".
func publish(cmd *cobra.Command, section, out string) error {
	fmt.Fprint(cmd.OutOrStdout(), "\n"+section)
	if out == "" {
		return nil
	}
	return appendSection(out, section)
}

// appendSection appends a section to the Markdown file, separated from
// what is there by a blank line.
func appendSection(path, section string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err == nil && info.Size() > 0 {
		section = "\n" + section
	}
	_, err = f.WriteString(section)
	return errors.Join(err, f.Close())
}

// commandLine renders argv so it can be pasted back into a shell.
func commandLine(argv []string) string {
	quoted := make([]string, len(argv))
	for i, arg := range argv {
		if arg != "" && !strings.ContainsFunc(arg, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+", r))
		}) {
			quoted[i] = arg
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
