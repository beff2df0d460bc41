package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"burrow/netlab"
)

// BroadcastCount is how often each of the ARP requests one node broadcast
// arrived on each watched node's TAP. Bounded Flood promises exactly once
// everywhere, and never back at the sender.
type BroadcastCount struct {
	Sender *Node
	// Sent is when each request left the sender's TAP, in order.
	Sent []time.Time
	// Seen holds, for every watched node but the sender, how many times
	// each request arrived on its TAP.
	Seen map[*Node][]int
	// Echoes counts the copies of the requests that came back to the
	// sender's own TAP.
	Echoes int
}

// Tally returns how many watched TAPs saw request i never, exactly once
// and more than once.
func (b *BroadcastCount) Tally(i int) (never, once, more int) {
	for _, counts := range b.Seen {
		switch {
		case counts[i] == 0:
			never++
		case counts[i] == 1:
			once++
		default:
			more++
		}
	}
	return never, once, more
}

// Exact says every watched TAP saw every request exactly once and none
// came back to the sender.
func (b *BroadcastCount) Exact() bool {
	for i := range b.Sent {
		if _, once, _ := b.Tally(i); once != len(b.Seen) {
			return false
		}
	}
	return b.Echoes == 0
}

// Missed lists the watched nodes that did not see every request exactly
// once, by name.
func (b *BroadcastCount) Missed() []*Node {
	var out []*Node
	for node, counts := range b.Seen {
		if slices.ContainsFunc(counts, func(c int) bool { return c != 1 }) {
			out = append(out, node)
		}
	}
	slices.SortFunc(out, func(x, y *Node) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Off describes the watched nodes that did not see every request exactly
// once, as "n3 saw 0, 1, 2", or "" when there are none.
func (b *BroadcastCount) Off() string {
	var off []string
	for _, node := range b.Missed() {
		off = append(off, fmt.Sprintf("%s saw %s", node.Name, strings.Trim(fmt.Sprint(b.Seen[node]), "[]")))
	}
	return strings.Join(off, "; ")
}

// Timings of a broadcast count.
const (
	// captureAttach bounds waiting for tcpdump to listen on a TAP; a busy
	// machine starting a hundred of them needs seconds.
	captureAttach = 30 * time.Second
	// lateCopies is how long the captures go on after the last request,
	// so that a copy arriving late still counts; it is also arping's
	// interval, so no copy can arrive later than the next request would.
	lateCopies = time.Second
)

// CountARPBroadcast makes the sender broadcast count ARP requests, one a
// second, for target — an address no node has, so that no node answers
// it locally and each request floods the whole network — while tcpdump
// on every watched node's TAP notes when each arrives. A copy belongs to
// the last request that left the sender's TAP before it arrived.
func CountARPBroadcast(ctx context.Context, sender *Node, watched []*Node, target netip.Addr, count int) (*BroadcastCount, error) {
	filter := fmt.Sprintf("arp[6:2] == 1 and arp[24:4] == 0x%s", hexAddr(target))
	sent, err := startCapture(sender, "out", filter)
	if err != nil {
		return nil, err
	}
	captures := map[*Node]*netlab.Process{}
	stopAll := func() {
		sent.Stop()
		for _, p := range captures {
			p.Stop()
		}
	}
	for _, node := range append(slices.DeleteFunc(slices.Clone(watched), func(n *Node) bool { return n == sender }), sender) {
		p, err := startCapture(node, "in", filter)
		if err != nil {
			stopAll()
			return nil, err
		}
		captures[node] = p
	}
	attachCtx, cancel := context.WithTimeout(ctx, captureAttach)
	defer cancel()
	for _, p := range append(slices.Collect(maps.Values(captures)), sent) {
		if err := WaitFor(attachCtx, "tcpdump to listen ("+p.LogPath()+")", func() bool { return listening(p) }); err != nil {
			stopAll()
			return nil, err
		}
	}
	tap := sender.Config.TAP.Name
	out, err := sender.Host.Run(ctx, "arping", "-c", strconv.Itoa(count), "-i", tap, target.String())
	// With nobody answering arping fails; what matters is that it sent.
	if !bytes.Contains(out, fmt.Appendf(nil, "%d packets transmitted", count)) {
		stopAll()
		return nil, fmt.Errorf("arping sent fewer than %d requests: %v: %s", count, err, out)
	}
	select {
	case <-ctx.Done():
	case <-time.After(lateCopies):
	}
	stopAll()
	b := &BroadcastCount{Sender: sender, Seen: map[*Node][]int{}}
	if b.Sent, err = capturedRequests(sent); err != nil {
		return nil, err
	}
	if len(b.Sent) != count {
		return nil, fmt.Errorf("tcpdump on %s's TAP saw %d requests leave, arping sent %d", sender.Name, len(b.Sent), count)
	}
	for node, p := range captures {
		arrivals, err := capturedRequests(p)
		if err != nil {
			return nil, err
		}
		if node == sender {
			b.Echoes = len(arrivals)
			continue
		}
		b.Seen[node] = make([]int, count)
		for _, at := range arrivals {
			b.Seen[node][requestOf(b.Sent, at)]++
		}
	}
	return b, ctx.Err()
}

// requestOf returns the index of the last request sent at or before at;
// the first for a copy timestamped before any, which only clock
// granularity can cause.
func requestOf(sent []time.Time, at time.Time) int {
	i := 0
	for j, t := range sent {
		if !t.After(at) {
			i = j
		}
	}
	return i
}

// startCapture runs tcpdump on the node's TAP for the frames of one
// direction ("in" or "out") that match filter, each printed with its time
// since the epoch, into the process's log.
func startCapture(node *Node, direction, filter string) (*netlab.Process, error) {
	return node.Host.Start("tcpdump", "--immediate-mode", "-tt", "-n", "-l", "-i", node.Config.TAP.Name, "-Q", direction, filter)
}

// Capture runs tcpdump on the node's TAP for the frames of one direction
// ("in" or "out") that match filter, a line each in the process's log, and
// returns once it listens.
func (node *Node) Capture(ctx context.Context, direction, filter string) (*netlab.Process, error) {
	p, err := startCapture(node, direction, filter)
	if err != nil {
		return nil, err
	}
	if err := WaitFor(ctx, "tcpdump to listen ("+p.LogPath()+")", func() bool { return listening(p) }); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// listening says tcpdump has attached to its interface.
func listening(p *netlab.Process) bool {
	data, err := os.ReadFile(p.LogPath())
	return err == nil && bytes.Contains(data, []byte("listening on "))
}

// capturedRequests reads the times of the ARP requests a stopped capture
// printed into its log.
func capturedRequests(p *netlab.Process) ([]time.Time, error) {
	data, err := os.ReadFile(p.LogPath())
	if err != nil {
		return nil, err
	}
	times, err := parseCapture(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.LogPath(), err)
	}
	return times, nil
}

// parseCapture returns the times of the ARP requests in tcpdump's output,
// lines such as
// "1763771234.123456 ARP, Request who-has 10.80.255.254 tell 10.80.0.3, length 28";
// it skips every other line (tcpdump's own messages on stderr).
func parseCapture(output string) ([]time.Time, error) {
	var times []time.Time
	for line := range strings.Lines(output) {
		stamp, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(rest, "ARP, Request who-has ") {
			continue
		}
		t, err := parseEpoch(stamp)
		if err != nil {
			return nil, err
		}
		times = append(times, t)
	}
	return times, nil
}

// parseEpoch parses tcpdump's -tt time stamp, seconds.microseconds.
func parseEpoch(stamp string) (time.Time, error) {
	secs, micros, ok := strings.Cut(stamp, ".")
	s, err1 := strconv.ParseInt(secs, 10, 64)
	us, err2 := strconv.ParseInt(micros, 10, 64)
	if err := errors.Join(err1, err2); !ok || err != nil || len(micros) != 6 {
		return time.Time{}, fmt.Errorf("bad tcpdump time stamp %q", stamp)
	}
	return time.Unix(s, us*1000), nil
}

// hexAddr renders an IPv4 address as the 8 hex digits a BPF filter
// compares a 4-byte field with.
func hexAddr(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("%02x%02x%02x%02x", b[0], b[1], b[2], b[3])
}
