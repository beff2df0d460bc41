package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"burrow/netlab"
)

// The TCP churn scenario: one iperf3 stream across a ring while the
// bridges it crosses are killed and restarted.
const (
	churnRingSize = 12
	// churnEvery is the time between kills, the first churnEvery after
	// the start and the last at least churnEvery before the end; a killed
	// node stays down for restartPause.
	churnEvery = 15 * time.Second
	// tcpMinForwarded is what a node must forward of the flow within
	// bridgeWindow to count as its bridge, as in the e2e churn test: the
	// flow carries hundreds of megabits a second, overlay upkeep a few
	// hundred bytes.
	tcpMinForwarded = 1 << 20
	// iperf3Grace bounds iperf3 beyond its own length.
	iperf3Grace = 30 * time.Second
)

// Rates that classify a second of the flow, in bits per second.
const (
	// zeroRate: a second below it carried no more than a few
	// retransmitted segments.
	zeroRate = 0.1e6
	lowRate  = 10e6
	// backShare of the rate before the first kill counts as back.
	backShare = 0.8
)

// churnEvent is a kill or a restart during the flow.
type churnEvent struct {
	// At is the time since iperf3 was started.
	At      time.Duration
	Restart bool
	// Node is the node killed or restarted, with its ring position.
	Node string
}

func (e churnEvent) String() string {
	what := "killed"
	if e.Restart {
		what = "restarted"
	}
	return fmt.Sprintf("%s %s at %.1f s", what, e.Node, e.At.Seconds())
}

// churnResult is one build's run of the scenario.
type churnResult struct {
	Build   *failoverBuild
	Seconds int
	// Failed says why the scenario did not run.
	Failed string
	// Broke is iperf3's error when the connection broke.
	Broke  string
	Events []churnEvent
	// Notes are kills and restarts that did not happen, with why.
	Notes []string
	// Intervals is the rate of each second, as iperf3's client reports.
	Intervals   []float64
	Retransmits int
	churnAnalysis
}

// runChurn builds a ring of the build, runs iperf3 from the source to the
// destination for the given seconds and kills a bridge of the flow every
// churnEvery, restarting it restartPause later.
func runChurn(ctx context.Context, build *failoverBuild, seconds int, progress io.Writer) *churnResult {
	res := &churnResult{Build: build, Seconds: seconds}
	fail := func(err error) *churnResult {
		res.Failed = err.Error()
		fmt.Fprintf(progress, "   failed: %s\n", res.Failed)
		return res
	}
	ring, err := startRing(ctx, build, failoverShape, churnRingSize, progress)
	if err != nil {
		return fail(err)
	}
	defer ring.close()
	source, destination := ring.ends()
	if err := ring.waitReachable(ctx, source, destination); err != nil {
		return fail(err)
	}
	server, err := netlab.StartIperf3Server(destination.Host)
	if err != nil {
		return fail(err)
	}
	defer server.Stop()
	fmt.Fprintf(progress, "== %s: iperf3 for %d s from %s to %s, a bridge killed every %v\n",
		build, seconds, ring.describe(source), ring.describe(destination), churnEvery)
	type outcome struct {
		result netlab.Iperf3Result
		err    error
	}
	done := make(chan outcome, 1)
	iperfCtx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+iperf3Grace)
	defer cancel()
	started := time.Now()
	go func() {
		result, err := netlab.Iperf3(iperfCtx, source.Host, destination.Address.Addr(), seconds)
		done <- outcome{result, err}
	}()
	ring.churn(ctx, res, started)
	out := <-done
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if out.err != nil {
		res.Broke = out.err.Error()
		fmt.Fprintf(progress, "   the connection broke: %s\n", res.Broke)
		return res
	}
	res.Intervals, res.Retransmits = out.result.Intervals, out.result.Retransmits
	res.churnAnalysis = analyzeChurn(res.Intervals, res.Events)
	fmt.Fprintf(progress, "   Mbit/s per second: %s\n   %d retransmits, %d s at zero, %d s below %.0f Mbit/s\n",
		compactRates(res.Intervals, 0, len(res.Intervals)), res.Retransmits, res.ZeroSeconds, res.BelowLow, lowRate/1e6)
	return res
}

// churn kills a bridge of the flow every churnEvery and restarts it
// restartPause later, recording when.
func (r *daemonRing) churn(ctx context.Context, res *churnResult, started time.Time) {
	length := time.Duration(res.Seconds) * time.Second
	for kill, at := 0, churnEvery; at+churnEvery <= length; kill, at = kill+1, at+churnEvery {
		if sleep(ctx, time.Until(started.Add(at-bridgeWindow))) != nil {
			return
		}
		bridges := r.bridges(ctx, bridgeWindow, tcpMinForwarded)
		if len(bridges) == 0 {
			r.note(res, fmt.Sprintf("no kill at %.0f s: no node between the ends forwarded a megabyte of the flow in the second before", at.Seconds()))
			continue
		}
		// Each kill takes the next bridge along the path, so that kills
		// hit different places.
		victim := bridges[kill%len(bridges)]
		if err := victim.Kill(); err != nil {
			r.note(res, fmt.Sprintf("killing %s at %.0f s: %v", r.describe(victim), at.Seconds(), err))
		}
		r.record(res, churnEvent{At: time.Since(started), Node: r.describe(victim)})
		if sleep(ctx, time.Until(started.Add(at+restartPause))) != nil {
			return
		}
		if err := victim.Start(); err != nil {
			r.note(res, fmt.Sprintf("restarting %s: %v", r.describe(victim), err))
			continue
		}
		r.record(res, churnEvent{At: time.Since(started), Restart: true, Node: r.describe(victim)})
	}
}

func (r *daemonRing) record(res *churnResult, e churnEvent) {
	res.Events = append(res.Events, e)
	fmt.Fprintf(r.progress, "   %s\n", e)
}

func (r *daemonRing) note(res *churnResult, note string) {
	res.Notes = append(res.Notes, note)
	fmt.Fprintf(r.progress, "   %s\n", note)
}

// churnAnalysis is what the per-second rates show.
type churnAnalysis struct {
	// PreFailure is the mean rate of the seconds before the first kill.
	PreFailure float64
	// ZeroSeconds counts seconds below zeroRate, LongestZero the longest
	// run of them.
	ZeroSeconds, LongestZero int
	// Lowest is the lowest second's rate, LowestSecond its index.
	Lowest       float64
	LowestSecond int
	// BelowLow counts seconds below lowRate.
	BelowLow   int
	Recoveries []recovery
}

// recovery is how the flow came back after one event.
type recovery struct {
	Event churnEvent
	// Back says the flow reached backShare of the pre-failure rate again;
	// After is from the event to the start of the first second, from the
	// event's own on, that did: 0 when the event's second did.
	Back  bool
	After time.Duration
	// ZeroSeconds counts seconds at zero from the event's second until
	// the next event's.
	ZeroSeconds int
}

// analyzeChurn reads the per-second rates of a flow that met events,
// in order, at times since the flow started.
func analyzeChurn(intervals []float64, events []churnEvent) churnAnalysis {
	var a churnAnalysis
	if len(intervals) == 0 {
		return a
	}
	before := len(intervals)
	for _, e := range events {
		if !e.Restart {
			before = min(before, int(e.At/time.Second))
			break
		}
	}
	if before > 0 {
		var sum float64
		for _, bps := range intervals[:before] {
			sum += bps
		}
		a.PreFailure = sum / float64(before)
	}
	run := 0
	a.Lowest = intervals[0]
	for i, bps := range intervals {
		if bps < zeroRate {
			a.ZeroSeconds++
			run++
			a.LongestZero = max(a.LongestZero, run)
		} else {
			run = 0
		}
		if bps < lowRate {
			a.BelowLow++
		}
		if bps < a.Lowest {
			a.Lowest, a.LowestSecond = bps, i
		}
	}
	for i, e := range events {
		first := int(e.At / time.Second)
		last := len(intervals)
		if i+1 < len(events) {
			last = min(last, int(events[i+1].At/time.Second))
		}
		rec := recovery{Event: e}
		for s := first; s < last; s++ {
			if intervals[s] < zeroRate {
				rec.ZeroSeconds++
			}
		}
		for s := first; s < len(intervals); s++ {
			if intervals[s] >= backShare*a.PreFailure {
				rec.Back, rec.After = true, max(0, time.Duration(s)*time.Second-e.At)
				break
			}
		}
		a.Recoveries = append(a.Recoveries, rec)
	}
	return a
}
