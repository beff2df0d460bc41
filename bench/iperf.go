package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"burrow/netlab"
)

// throughput is the outcome of one TCP iperf3 test.
type throughput struct {
	// BitsPerSecond and Bytes are what the receiver got, all streams
	// together.
	BitsPerSecond float64
	Bytes         uint64
	// Retransmits counts the sender's TCP retransmissions, all streams
	// together.
	Retransmits int
}

// parseIperf3 reads the JSON report of `iperf3 --json --client`.
func parseIperf3(out []byte) (throughput, error) {
	var report struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				Bytes         uint64  `json:"bytes"`
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return throughput{}, fmt.Errorf("iperf3 report: %w", err)
	}
	if report.Error != "" {
		return throughput{}, fmt.Errorf("iperf3: %s", report.Error)
	}
	if report.End.SumReceived.Bytes == 0 {
		return throughput{}, errors.New("iperf3 report: the receiver got nothing")
	}
	return throughput{
		BitsPerSecond: report.End.SumReceived.BitsPerSecond,
		Bytes:         report.End.SumReceived.Bytes,
		Retransmits:   report.End.SumSent.Retransmits,
	}, nil
}

// runIperf3 runs a TCP test of the given length with that many parallel
// streams (iperf3 -P) from client to the iperf3 server at server.
func runIperf3(ctx context.Context, client *netlab.Host, server netip.Addr, seconds, streams int) (throughput, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+30*time.Second)
	defer cancel()
	cmd := client.Command(ctx, "iperf3", "--json", "--client", server.String(),
		"--time", strconv.Itoa(seconds), "--parallel", strconv.Itoa(streams), "--connect-timeout", "3000")
	out, runErr := cmd.Output()
	result, err := parseIperf3(out)
	if err != nil {
		return throughput{}, errors.Join(err, runErr)
	}
	return result, nil
}
