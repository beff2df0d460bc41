package netlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Available returns nil when labs can run on this machine, and otherwise an
// error naming everything that is missing.
func Available() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root privileges")
	}
	for _, tool := range []struct{ command, pkg string }{
		{"ip", "iproute2"},
		{"ss", "iproute2"},
		{"iptables", "iptables"},
		{"iptables-restore", "iptables"},
	} {
		if _, err := exec.LookPath(tool.command); err != nil {
			missing = append(missing, fmt.Sprintf("the %s command (Debian package %s)", tool.command, tool.pkg))
		}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		missing = append(missing, "kernel support for network namespaces")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		missing = append(missing, "/dev/net/tun")
	}
	if len(missing) > 0 {
		return fmt.Errorf("netlab cannot run here: missing %s", strings.Join(missing, ", "))
	}
	if err := runIP("netns", "list"); err != nil {
		return fmt.Errorf("netlab cannot run here: ip has no working netns support: %w", err)
	}
	return nil
}

// PingResult summarizes a ping run.
type PingResult struct {
	Transmitted int
	Received    int
	// AvgRTT is the mean round-trip time of the replies; zero without any.
	AvgRTT time.Duration
}

var (
	pingCounts = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received`)
	pingRTT    = regexp.MustCompile(`rtt min/avg/max/mdev = [\d.]+/([\d.]+)/`)
)

// Ping sends count echo requests from a host to an address, one every
// interval, and waits up to a second for the last reply. Lost replies are no
// error: check Received. The error reports ping failing outright, such as
// an unreachable network.
func Ping(ctx context.Context, from *Host, to netip.Addr, count int, interval time.Duration) (PingResult, error) {
	out, err := from.Run(ctx, "ping", "-n", "-q", "-c", strconv.Itoa(count),
		"-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "1", to.String())
	counts := pingCounts.FindSubmatch(out)
	if counts == nil {
		if err == nil {
			err = fmt.Errorf("netlab: no summary in ping output: %s", out)
		}
		return PingResult{}, err
	}
	var r PingResult
	r.Transmitted, _ = strconv.Atoi(string(counts[1]))
	r.Received, _ = strconv.Atoi(string(counts[2]))
	if rtt := pingRTT.FindSubmatch(out); rtt != nil {
		ms, _ := strconv.ParseFloat(string(rtt[1]), 64)
		r.AvgRTT = time.Duration(ms * float64(time.Millisecond))
	}
	return r, nil
}

// Iperf3Port is the port iperf3 servers listen on.
const Iperf3Port = 5201

// StartIperf3Server starts an iperf3 server on the host and waits until it
// listens on Iperf3Port.
func StartIperf3Server(host *Host) (*Process, error) {
	p, err := host.Start("iperf3", "--server")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := host.WaitListening(ctx, "tcp", Iperf3Port); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// Iperf3Result is the outcome of one TCP iperf3 test.
type Iperf3Result struct {
	// BitsPerSecond is the rate the server received.
	BitsPerSecond float64
	// Bytes is how many bytes the server received.
	Bytes int64
	// Retransmits counts the sender's TCP retransmissions.
	Retransmits int
	// Intervals is the rate the client sent in each reporting interval
	// (a second by default), in order.
	Intervals []float64
}

// Iperf3 runs a TCP test of the given length from client to the iperf3
// server at the address.
func Iperf3(ctx context.Context, client *Host, server netip.Addr, seconds int) (Iperf3Result, error) {
	cmd := client.Command(ctx, "iperf3", "--json", "--client", server.String(),
		"--time", strconv.Itoa(seconds), "--connect-timeout", "3000")
	out, runErr := cmd.Output()
	res, err := ParseIperf3(out)
	if err != nil {
		return res, commandError(cmd, errors.Join(runErr, err), out)
	}
	if runErr != nil {
		return Iperf3Result{}, commandError(cmd, runErr, out)
	}
	return res, nil
}

// ParseIperf3 reads the report of an iperf3 client run with --json.
func ParseIperf3(out []byte) (Iperf3Result, error) {
	var report struct {
		Error     string `json:"error"`
		Intervals []struct {
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum"`
		} `json:"intervals"`
		End struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Bytes         int64   `json:"bytes"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return Iperf3Result{}, fmt.Errorf("netlab: iperf3's report: %w", err)
	}
	if report.Error != "" {
		return Iperf3Result{}, fmt.Errorf("netlab: iperf3: %s", report.Error)
	}
	res := Iperf3Result{
		BitsPerSecond: report.End.SumReceived.BitsPerSecond,
		Bytes:         report.End.SumReceived.Bytes,
		Retransmits:   report.End.SumSent.Retransmits,
	}
	for _, iv := range report.Intervals {
		res.Intervals = append(res.Intervals, iv.Sum.BitsPerSecond)
	}
	return res, nil
}
