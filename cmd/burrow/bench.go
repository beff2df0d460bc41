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

	"github.com/spf13/cobra"

	"burrow/bench"
	"burrow/netlab"
)

func init() {
	var (
		seconds  int
		peers    []string
		out      string
		burrow   string
		cacheDir string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark burrow's data path against other VPNs",
		Long: `Build a lab of two network namespaces joined by a plain veth underlay and run,
one after the other on the same two namespaces, burrow, upstream wireguard-go,
Debian's wireguard-go, tinc 1.0 in switch mode, nebula, n2n and no VPN at all.
For each: mean ping RTT, single-stream TCP throughput and retransmits with
iperf3, CPU-seconds per GB over both ends' processes and each process's peak
RSS. Then a chain of three burrow nodes A—B—C gives the latency one
switching hop adds. A VPN whose programs are missing is skipped with the
Debian package or Go module that provides them (bench/install-peers.sh
installs them all); one that fails is reported with the tail of its logs.

The results, with date, command, kernel, CPU and burrow commit, are printed
and appended to --out as a new section. Needs root.`,
		Example: `  bench/install-peers.sh
  CGO_ENABLED=0 go build -o /tmp/burrow-bench ./cmd/burrow && /tmp/burrow-bench bench --seconds 10 --out docs/benchmarks.md
  burrow bench --seconds 3 --peers none,burrow,wireguard-go --out ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchmark(cmd, burrow, out, func(ctx context.Context, binary string) (report, error) {
				return bench.Run(ctx, bench.Options{
					Seconds:  seconds,
					Peers:    peers,
					Burrow:   binary,
					CacheDir: cacheDir,
					Progress: cmd.ErrOrStderr(),
				})
			})
		},
	}
	cmd.Flags().IntVar(&seconds, "seconds", 10, "length of each iperf3 test")
	cmd.Flags().StringSliceVar(&peers, "peers", nil,
		"VPNs to run, comma-separated (default all): "+strings.Join(bench.PeerNames(), ","))
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", bench.DefaultCacheDir(), "where upstream wireguard-go is built and kept")
	cmd.AddCommand(benchPathsCommand())
	rootCmd.AddCommand(cmd)
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
