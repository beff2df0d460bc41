package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"burrow/sim"
	"burrow/sim/scenario"
)

func init() { rootCmd.AddCommand(newSimCmd()) }

// newSimCmd builds `burrow sim` with fresh flag variables.
func newSimCmd() *cobra.Command {
	var (
		seed       uint64
		out        string
		sizes      []int
		large      bool
		profile    string
		memProfile string
	)
	var names []string
	width := 0
	for _, s := range scenario.All() {
		width = max(width, len(s.Name))
	}
	for _, s := range scenario.All() {
		names = append(names, fmt.Sprintf("  %-*s %s", width, s.Name, s.Title))
	}
	cmd := &cobra.Command{
		Use:   "sim [scenario...]",
		Short: "Run the simulated experiments (EdgeVPN E3–E9, cost) on many node cores",
		Long: `Run burrow's node cores by the hundred or ten thousand in a discrete-event
simulation — virtual time, simulated latency, loss, partitions, failures —
and reproduce the EdgeVPN paper's experiments. Each scenario prints its
tables, checks the invariants (each broadcast delivered exactly once, ring
consistent, every pair routable) and, with --out, writes CSV, JSON and SVG.
The same seed gives the same results.

Scenarios (all of them when none is named):
` + strings.Join(names, "\n") + `

Every scenario takes --n, which replaces its sizes. By default e3 and e4
run the paper's 64 nodes, e5 32, e6 128, e8 32 and e9 225; the sweeps of
e7 run 8…1,000 nodes, those of cost, formation and revocation 100 and
1,000. --large adds 10,000 to the sweeps and 1,000 to e8. Overlays of up
to 2,000 nodes grow one join every 100 ms; larger ones, and those of e7,
cost and revocation, start all at once (a cold start), each node given
its ring neighbour as contact. Beyond 10,000 nodes only the first 10,000
cold-start; once they have converged the others join, 1,000 a second,
each through a random member. Formation starts every node at once with
the first as its only contact.`,
		Example: `  burrow sim e3 e4 --seed 7
  burrow sim --out docs/sim
  burrow sim e7 cost --large --out /tmp/sim
  burrow sim e8 --n 1000
  burrow sim e3 e4 e5 e6 e9 --n 1000 --out /tmp/sim`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var run []scenario.Scenario
			if len(args) == 0 {
				run = scenario.All()
			}
			for _, a := range args {
				s, ok := scenario.Lookup(a)
				if !ok {
					return fmt.Errorf("unknown scenario %q", a)
				}
				run = append(run, s)
			}
			largest := 0
			if len(sizes) > 0 {
				largest = slices.Max(sizes)
			}
			if large {
				largest = max(largest, 10000)
			}
			if largest > 2000 {
				collectForSize(largest)
			}
			if profile != "" {
				f, err := os.Create(profile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			opts := scenario.Options{
				Seed: seed, Sizes: sizes, Large: large,
				Progress: progressPrinter(stderr, memProfile),
				Log:      func(format string, a ...any) { fmt.Fprintf(stderr, "  "+format+"\n", a...) },
			}
			var errs []error
			for _, s := range run {
				start := time.Now()
				fmt.Fprintf(stderr, "running %s…\n", s.Name)
				res, err := s.Run(opts)
				if res != nil {
					fmt.Fprintln(stdout, res.Text())
					if out != "" {
						if werr := res.Write(out); werr != nil {
							errs = append(errs, werr)
						}
					}
				}
				fmt.Fprintf(stderr, "%s took %v of wall time\n", s.Name, time.Since(start).Round(time.Millisecond))
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed; the same seed replays the same run")
	cmd.Flags().StringVar(&out, "out", "", "directory to write CSV, JSON and SVG results to")
	cmd.Flags().IntSliceVar(&sizes, "n", nil, "overlay sizes, replacing every named scenario's, e.g. 100,1000,10000")
	cmd.Flags().BoolVar(&large, "large", false, "add 10,000 nodes to the sweeps (e7, cost, formation, revocation), 1,000 to e8")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	cmd.Flags().StringVar(&memProfile, "memprofile", "", "write a heap profile (allocations so far, memory in use) to this file with every progress report")
	return cmd
}

// bytesPerNode is the memory a large run may take per simulated node. A
// node's state after the invariant checks (which teach every node a few
// hundred MACs) is about 130 KB; the rest is room for garbage. The peak
// comes in those checks, when the live heap nears the limit and the
// collector, capped at half the CPU, lets the process grow past it: at
// 10,000 nodes 176 KiB gave 1.99-2.02 GB of RSS, 160 KiB 1.93-1.95 GB
// in no more wall time (1.98 GB once each node had its 2 KiB source
// gate); a limit of 1,500 MiB had the collector running nearly
// all the time. Since the learning tables grow by pages and keep no
// list per bridge (336b252), 160 KiB gave a peak of 1,733,576 KiB.
const bytesPerNode = 160 << 10

// collectForSize sets the collector for a run of up to n nodes: rarely
// (GOGC 400), which saves time, but within a soft limit of bytesPerNode a
// node, which keeps the heap from growing to five times what is live
// (10.8 GiB at 10,000 nodes before the limit). GOMEMLIMIT, when set, wins.
func collectForSize(n int) {
	debug.SetGCPercent(400)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(max(int64(n)*bytesPerNode, 1<<30))
	}
}

// writeHeapProfile writes the heap profile; a failure is only reported,
// the run goes on.
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
	}
}

// progressPrinter reports long runs every few seconds of wall time: virtual
// time, events and their rate. It lives here because the engine has no
// wall clock. With a heap profile path it also rewrites the heap profile
// each time, so the last one shows a simulation still alive.
func progressPrinter(w io.Writer, heapProfile string) func(string, int, sim.Progress) {
	var lastWall time.Time
	var lastEvents, lastSent, lastForwarded uint64
	started := time.Now()
	return func(name string, n int, p sim.Progress) {
		now := time.Now()
		if p.Events < lastEvents {
			lastEvents, lastSent, lastForwarded = 0, 0, 0 // a new simulation
		}
		if now.Sub(lastWall) < 5*time.Second {
			return
		}
		rate := 0.0
		if !lastWall.IsZero() {
			rate = float64(p.Events-lastEvents) / now.Sub(lastWall).Seconds()
		}
		sent, forwarded := p.ControlMessages()
		if sent < lastSent || forwarded < lastForwarded {
			lastSent, lastForwarded = 0, 0 // restarted cores count from zero
		}
		newSent, newForwarded := sent-lastSent, forwarded-lastForwarded
		fmt.Fprintf(w, "  %s n=%d: virtual %v, %d events (%.0f/s), %d nodes up, %d queued, control %d sent and %d passed on (%.1f per message), wall %v\n",
			name, n, p.Elapsed.Round(time.Second), p.Events, rate, p.Nodes, p.Queue,
			newSent, newForwarded, float64(newForwarded)/float64(max(newSent, 1)), now.Sub(started).Round(time.Second))
		lastWall, lastEvents, lastSent, lastForwarded = now, p.Events, sent, forwarded
		if heapProfile != "" {
			writeHeapProfile(heapProfile)
		}
	}
}
