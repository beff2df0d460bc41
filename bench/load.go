package bench

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"burrow/netlab"
)

// Latency under load: pings every loadPingInterval (ping -i 0.01, as
// root) through the tunnel while one iperf3 TCP stream saturates it in the
// same direction. The pings start loadRampUp after the stream, once TCP
// has opened its window, and stop loadTail before it ends.
const (
	loadPingInterval = 10 * time.Millisecond
	loadRampUp       = time.Second
	loadTail         = time.Second
)

// loadedLatency is the round-trip time of pings through a tunnel that a
// single TCP stream saturates.
type loadedLatency struct {
	// Sent pings had the replies RTTs, one per answered request.
	Sent int
	RTTs []time.Duration
	// Stream is what the saturating stream carried meanwhile.
	Stream throughput
}

// P50 and P99 are percentiles of the reply times, zero without replies.
func (l loadedLatency) P50() time.Duration { return l.percentile(50) }
func (l loadedLatency) P99() time.Duration { return l.percentile(99) }

func (l loadedLatency) percentile(p float64) time.Duration {
	if len(l.RTTs) == 0 {
		return 0
	}
	return percentile(l.RTTs, p)
}

// Lost counts the pings without a reply.
func (l loadedLatency) Lost() int { return l.Sent - len(l.RTTs) }

// loadPings is how many pings fit in a stream of that many seconds.
func loadPings(seconds int) int {
	return int((time.Duration(seconds)*time.Second - loadRampUp - loadTail) / loadPingInterval)
}

// latencyUnderLoad runs a single-stream iperf3 test of that many seconds
// from client to the iperf3 server at target and pings target meanwhile.
func latencyUnderLoad(ctx context.Context, client *netlab.Host, target netip.Addr, seconds int) (loadedLatency, error) {
	type outcome struct {
		tp  throughput
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		tp, err := runIperf3(ctx, client, target, seconds, 1)
		done <- outcome{tp, err}
	}()
	res := loadedLatency{Sent: loadPings(seconds)}
	pingErr := sleep(ctx, loadRampUp)
	if pingErr == nil {
		res.RTTs, pingErr = pingRTTs(ctx, client, target, res.Sent, loadPingInterval)
	}
	stream := <-done
	if err := errors.Join(stream.err, pingErr); err != nil {
		return loadedLatency{}, err
	}
	res.Stream = stream.tp
	return res, nil
}
