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
  go build -o /tmp/burrow-bench ./cmd/burrow && /tmp/burrow-bench bench --seconds 10 --out docs/benchmarks.md
  burrow bench --seconds 3 --peers none,burrow,wireguard-go --out ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if burrow == "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				burrow = self
			}
			binary, err := filepath.Abs(burrow)
			if err != nil {
				return err
			}
			// Fail before minutes of measuring, not after.
			if out != "" {
				if _, err := os.Stat(filepath.Dir(out)); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
			}
			if err := netlab.Available(); err != nil {
				return err
			}
			// A signal cancels the run, which then stops its processes and
			// removes the lab before the program ends; a second signal
			// takes its default effect.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			context.AfterFunc(ctx, stop)
			machine := bench.DescribeMachine(commandLine(os.Args), binary)
			report, err := bench.Run(ctx, bench.Options{
				Seconds:  seconds,
				Peers:    peers,
				Burrow:   binary,
				CacheDir: cacheDir,
				Progress: cmd.ErrOrStderr(),
			})
			if ctx.Err() != nil {
				return errors.New("interrupted: every process it started is stopped and its lab removed")
			}
			if err != nil {
				return err
			}
			section := report.Markdown(machine)
			fmt.Fprint(cmd.OutOrStdout(), "\n"+section)
			if out == "" {
				return nil
			}
			return appendSection(out, section)
		},
	}
	cmd.Flags().IntVar(&seconds, "seconds", 10, "length of each iperf3 test")
	cmd.Flags().StringSliceVar(&peers, "peers", nil,
		"VPNs to run, comma-separated (default all): "+strings.Join(bench.PeerNames(), ","))
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", `file to append the results to; "" for none`)
	cmd.Flags().StringVar(&burrow, "burrow", "", "burrow binary to measure (default: this one)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", bench.DefaultCacheDir(), "where upstream wireguard-go is built and kept")
	rootCmd.AddCommand(cmd)
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
