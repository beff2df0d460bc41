package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// PathsOptions configures `burrow bench paths`.
type PathsOptions struct {
	// Seconds is the length of each iperf3 test.
	Seconds int
	// Rounds is how many times each of the restarted nodes is restarted.
	Rounds int
	// Burrow is the burrow executable to measure.
	Burrow string
	// Progress receives a line per step as the run goes.
	Progress io.Writer
}

// natStateTitles name the two kinds of restart, with the routers' state
// for the node kept or cleared.
var natStateTitles = map[bool]string{false: "kept", true: "cleared"}

// restartedNodes are restarted in turn, one behind each kind of NAT.
var restartedNodes = []string{"a", "c1", "d"}

// measuredPairs carry iperf3 and ping, client first, one per path class
// worth a throughput number.
var measuredPairs = [][2]string{{"a", "b"}, {"c1", "c2"}, {"d", "a"}, {"beacon", "a"}}

// Timings of the paths run.
const (
	// The links' timers are those of the e2e NAT tests, so the numbers
	// compare with docs/nat-traversal.md.
	pathsKeepalive = 500 * time.Millisecond
	pathsDeadAfter = 3 * time.Second
	pathsStabilize = time.Second
	// convergeTimeout bounds the first start until every pair is on its
	// path; setupTimeout the same for one restarted node; the NAT matrix
	// sees at most 4.2 s.
	convergeTimeout = 60 * time.Second
	setupTimeout    = 30 * time.Second
	// dropTimeout bounds waiting for the others to drop their links to a
	// stopped node: it says goodbye, or they declare it dead.
	dropTimeout = pathsDeadAfter + 5*time.Second
	// statusPoll is how often the restarted node's status is read; it
	// bounds how exactly a move to another path is timed (link up times
	// come from the node's own clock).
	statusPoll = 20 * time.Millisecond
)

// PathsReport is the outcome of a paths run.
type PathsReport struct {
	Started time.Time
	Seconds int
	Rounds  int
	// ConvergedAfter is the time from starting every node to every pair
	// being linked on its path, as both ends see it.
	ConvergedAfter time.Duration
	Restarts       []*restartResult
	Pairs          []*pairResult
	// BeaconPeakRSS is the beacon's VmHWM at the end of the run.
	BeaconPeakRSS uint64
	// BeaconRelayRate is the beacon's relay cap in bytes per second.
	BeaconRelayRate float64
	// LoadBefore and LoadAfter are the one-minute load averages.
	LoadBefore, LoadAfter string
}

// pathsRun is one paths run in progress.
type pathsRun struct {
	opts     PathsOptions
	progress io.Writer
	beacon   *pathNode
	nodes    []*pathNode // the beacon first, then pathSites
	byName   map[string]*pathNode
	byID     map[string]*pathNode
}

// RunPaths builds the NAT lab, waits until every pair is linked on its
// path, measures throughput and RTT over each kind of path, then restarts
// nodes in turn and times their links coming up. The error is for a lab
// that could not be built or converge, or a cancelled ctx; a pair or a
// restart that fails is recorded as such.
func RunPaths(ctx context.Context, opts PathsOptions) (*PathsReport, error) {
	if opts.Seconds < 1 {
		return nil, fmt.Errorf("bench: seconds must be at least 1, not %d", opts.Seconds)
	}
	if opts.Rounds < 1 {
		return nil, fmt.Errorf("bench: rounds must be at least 1, not %d", opts.Rounds)
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	lab, err := newLab("burrow-bench-paths-", opts.Progress)
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	r := &pathsRun{opts: opts, progress: opts.Progress, byName: map[string]*pathNode{}, byID: map[string]*pathNode{}}
	if err := r.build(lab); err != nil {
		return nil, err
	}
	report := &PathsReport{
		Started: time.Now(), Seconds: opts.Seconds, Rounds: opts.Rounds,
		LoadBefore: loadAverage(), BeaconRelayRate: r.beacon.Config.RelayRate(),
	}
	if report.ConvergedAfter, err = r.converge(ctx); err != nil {
		return nil, err
	}
	for _, pair := range measuredPairs {
		report.Pairs = append(report.Pairs, r.measurePair(ctx, r.byName[pair[0]], r.byName[pair[1]]))
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	for round := 1; round <= opts.Rounds; round++ {
		for _, name := range restartedNodes {
			for _, clearNAT := range []bool{false, true} {
				fmt.Fprintf(r.progress, "== round %d of %d: restarting %s, NAT state %s\n", round, opts.Rounds, name, natStateTitles[clearNAT])
				report.Restarts = append(report.Restarts, r.restart(ctx, r.byName[name], clearNAT))
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	if report.BeaconPeakRSS, err = peakRSS(r.beacon.Process.Pid()); err != nil {
		return nil, fmt.Errorf("beacon peak RSS: %w", err)
	}
	report.LoadAfter = loadAverage()
	return report, ctx.Err()
}

// converge starts every node and waits until each pair is linked on its
// class's path from both ends.
func (r *pathsRun) converge(ctx context.Context) (time.Duration, error) {
	fmt.Fprintf(r.progress, "== starting %d nodes\n", len(r.nodes))
	start := time.Now()
	for _, n := range r.nodes {
		if err := n.start(); err != nil {
			return 0, err
		}
	}
	var lagging string
	err := r.waitUntil(ctx, convergeTimeout, "every pair on its path", func() bool {
		lagging = r.offPath(r.nodes)
		return lagging == ""
	})
	if err != nil {
		return 0, fmt.Errorf("%w; not yet: %s", err, lagging)
	}
	converged := time.Since(start)
	fmt.Fprintf(r.progress, "   every pair on its path %v after start\n", converged.Round(10*time.Millisecond))
	return converged, nil
}

// offPath describes the first pair among nodes (every pair with one of
// them) whose link is not up on its class's path at both ends, or
// returns "".
func (r *pathsRun) offPath(nodes []*pathNode) string {
	for _, x := range nodes {
		for _, y := range r.nodes {
			if x == y {
				continue
			}
			want := classify(x.nat, y.nat).statusPath()
			if got := x.upPath(y); got != want {
				return fmt.Sprintf("%s–%s is %q at %s, want %q", x.Name, y.Name, got, x.Name, want)
			}
		}
	}
	return ""
}

// waitUntil polls cond every statusPoll until it holds, failing when
// timeout passes, ctx ends or a node's process ends.
func (r *pathsRun) waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		for _, n := range r.nodes {
			if n.ended == nil {
				continue
			}
			select {
			case <-n.ended:
				return fmt.Errorf("%s exited while waiting for %s (log %s)", n.Name, what, n.Process.LogPath())
			default:
			}
		}
		select {
		case <-waitCtx.Done():
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		case <-time.After(statusPoll):
		}
	}
	return nil
}
