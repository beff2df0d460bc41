package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// FailoverOptions configures `burrow bench failover`.
type FailoverOptions struct {
	// Rounds is how many times a bridge of the UDP stream is killed, and
	// then how many times one is stopped gracefully, per build.
	Rounds int
	// Seconds is the length of the TCP churn scenario.
	Seconds int
	// Burrow is the burrow executable to measure.
	Burrow string
	// Baseline, when set, is another burrow executable measured the same
	// way in the same run, its rounds alternating with Burrow's.
	Baseline string
	// Progress receives a line per step as the run goes.
	Progress io.Writer
}

// FailoverReport is the outcome of a failover run.
type FailoverReport struct {
	Started time.Time
	Rounds  int
	Seconds int
	// Builds are the binaries measured, the baseline first.
	Builds   []*failoverBuild
	Switches []*switchResult
	Churns   []*churnResult
	// LoadBefore and LoadAfter are the one-minute load averages.
	LoadBefore, LoadAfter string
}

// RunFailover measures how flows across a ring survive the failure of the
// bridges they cross. First protection switching: for each build a ring
// of switchRingSize daemons carries a constant-rate UDP stream whose
// bridge is killed, Rounds times, then stopped gracefully, Rounds times,
// the builds alternating round by round. Then, for each build in turn,
// the TCP churn scenario. The error is for a ring that could not be built
// or a cancelled ctx; a round that fails is recorded as such.
func RunFailover(ctx context.Context, opts FailoverOptions) (*FailoverReport, error) {
	if opts.Rounds < 1 {
		return nil, fmt.Errorf("bench: rounds must be at least 1, not %d", opts.Rounds)
	}
	if shortest := 2 * churnEvery; time.Duration(opts.Seconds)*time.Second < shortest {
		return nil, fmt.Errorf("bench: seconds must be at least %.0f, room for one kill, not %d", shortest.Seconds(), opts.Seconds)
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	report := &FailoverReport{Started: time.Now(), Rounds: opts.Rounds, Seconds: opts.Seconds}
	if opts.Baseline != "" {
		baseline, err := newFailoverBuild("baseline", opts.Baseline)
		if err != nil {
			return nil, err
		}
		report.Builds = append(report.Builds, baseline)
	}
	current, err := newFailoverBuild("current", opts.Burrow)
	if err != nil {
		return nil, err
	}
	report.Builds = append(report.Builds, current)
	report.LoadBefore = loadAverage()
	if err := report.protectionSwitching(ctx, opts.Progress); err != nil {
		return nil, err
	}
	for _, b := range report.Builds {
		report.Churns = append(report.Churns, runChurn(ctx, b, opts.Seconds, opts.Progress))
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	report.LoadAfter = loadAverage()
	return report, nil
}

// protectionSwitching runs the UDP rounds on one ring per build, all
// rings up at once so that the builds' rounds alternate and meet the
// same machine.
func (report *FailoverReport) protectionSwitching(ctx context.Context, progress io.Writer) (err error) {
	var rings []*daemonRing
	defer func() {
		for _, r := range rings {
			err = errors.Join(err, r.close())
		}
	}()
	for _, b := range report.Builds {
		r, err := startRing(ctx, b, failoverShape, switchRingSize, progress)
		if err != nil {
			return err
		}
		rings = append(rings, r)
	}
	for _, graceful := range []bool{false, true} {
		for round := 1; round <= report.Rounds; round++ {
			for _, r := range rings {
				report.Switches = append(report.Switches, r.switchRound(ctx, round, graceful))
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
