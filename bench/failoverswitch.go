package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Timings of a protection-switching round.
const (
	switchRingSize = 8
	// The stream settles on its path for streamWarmup before the bridges
	// it crosses are found from their byte counters over bridgeWindow.
	streamWarmup = time.Second
	bridgeWindow = time.Second
	// After the failure the stream runs for at least observeAtLeast, past
	// a graceful leave's drain (500 ms), and until it flows again, or for
	// observeAtMost: enough for a build that waits out a 6 s DeadAfter.
	observeAtLeast = 2 * time.Second
	observeAtMost  = 20 * time.Second
	samplePeriod   = 100 * time.Millisecond
	// inFlight is how long the receiver still listens after the sender
	// stopped.
	inFlight = 200 * time.Millisecond
)

// switchResult is one round: a bridge of the stream stopped, with
// SIGKILL or, Graceful, with SIGTERM.
type switchResult struct {
	Build    *failoverBuild
	Round    int
	Graceful bool
	// Victim is the bridge stopped, with its ring position; Bridges are
	// the ring positions of every node that forwarded the stream in the
	// second before: more than one path when the stream moved meanwhile.
	Victim  string
	Bridges []int
	// Failed says why the round has no numbers.
	Failed string
	streamLoss
	SendErrors int
	// Recovered says the stream flowed again within observeAtMost.
	Recovered bool
}

// signalName is how the round stopped its bridge.
func (s *switchResult) signalName() string { return stopSignal(s.Graceful) }

// stopSignal is the signal that stops a bridge, gracefully or not.
func stopSignal(graceful bool) string {
	if graceful {
		return "SIGTERM"
	}
	return "SIGKILL"
}

// switchRound runs a stream from the ring's source to its destination,
// stops the bridge it crosses and measures what the stream lost. Stopped
// nodes are restarted first, so every round starts from a whole ring.
func (r *daemonRing) switchRound(ctx context.Context, round int, graceful bool) *switchResult {
	res := &switchResult{Build: r.build, Round: round, Graceful: graceful}
	fmt.Fprintf(r.progress, "== %s, %s round %d: a bridge of a %d/s UDP stream stopped\n", r.build, res.signalName(), round, streamRate)
	fail := func(err error) *switchResult {
		res.Failed = err.Error()
		fmt.Fprintf(r.progress, "   failed: %s\n", res.Failed)
		return res
	}
	if err := r.restartStopped(ctx); err != nil {
		return fail(fmt.Errorf("the ring before the round: %w", err))
	}
	source, destination := r.ends()
	if err := r.waitReachable(ctx, source, destination); err != nil {
		return fail(err)
	}
	target := netip.AddrPortFrom(destination.Address.Addr(), streamPort)
	epoch := time.Now()
	receiver, err := listenStream(destination.Host, target, epoch)
	if err != nil {
		return fail(err)
	}
	sender, err := startStream(source.Host, target, epoch)
	if err != nil {
		receiver.close()
		return fail(err)
	}
	failureSeq, err := r.stopBridge(ctx, res, sender, receiver)
	sent := sender.stop()
	time.Sleep(inFlight)
	arrivals := receiver.close()
	if err != nil {
		return fail(err)
	}
	res.streamLoss = analyzeStream(sent, failureSeq, arrivals)
	res.SendErrors = sent.Errors
	recovered := "flowing again"
	if !res.Recovered {
		recovered = fmt.Sprintf("not flowing again %v after", observeAtMost)
	}
	fmt.Fprintf(r.progress, "   %s: %d sent at %.0f/s, %d lost (%d from the stop: %s ms), longest gap %s ms, %s\n",
		res.Victim, res.Sent, res.Rate, res.Lost, res.LostFromFailure, millis(res.SwitchingTime()), millis(res.LongestGap), recovered)
	return res
}

// stopBridge lets the stream settle, stops a bridge it crosses (the first
// in ring order) and watches the stream until it flows again. It returns
// the sequence number the sender was at when the bridge was stopped.
func (r *daemonRing) stopBridge(ctx context.Context, res *switchResult, sender *streamSender, receiver *streamReceiver) (uint64, error) {
	if err := sleep(ctx, streamWarmup); err != nil {
		return 0, err
	}
	// Half of what the stream puts on the virtual Ethernet in the window:
	// a bridge forwards all of it, with the tunnel's overhead on top.
	minBytes := uint64(bridgeWindow.Seconds()*streamRate*streamFrameSize) / 2
	bridges := r.bridges(ctx, bridgeWindow, minBytes)
	if len(bridges) == 0 {
		return 0, errors.New("no node between the ends forwards the stream")
	}
	for _, b := range bridges {
		res.Bridges = append(res.Bridges, r.position(b))
	}
	victim := bridges[0]
	res.Victim = r.describe(victim)
	stop := victim.Kill
	if res.Graceful {
		stop = victim.Stop
	}
	stoppedAt, failureSeq := time.Now(), sender.sequence()
	if err := stop(); err != nil {
		return 0, fmt.Errorf("stopping %s: %w", res.Victim, err)
	}
	recovered, err := watchRecovery(ctx, receiver, stoppedAt)
	res.Recovered = recovered
	return failureSeq, err
}

// watchRecovery samples the receiver's count until the stream flows again
// or observeAtMost has passed since the failure.
func watchRecovery(ctx context.Context, receiver *streamReceiver, failedAt time.Time) (bool, error) {
	var samples []deliverySample
	ticker := time.NewTicker(samplePeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case now := <-ticker.C:
			since := now.Sub(failedAt)
			samples = append(samples, deliverySample{at: since, received: receiver.received()})
			if since >= observeAtLeast && flowing(samples) {
				return true, nil
			}
			if since >= observeAtMost {
				return false, nil
			}
		}
	}
}
