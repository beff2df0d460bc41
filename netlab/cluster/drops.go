package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// DropCounts are, per node, the frames and datagrams its daemon dropped by
// reason (its status' drops and queues) and what its namespace's kernel
// dropped on UDP receive. Read before and after the broadcast check, they
// tell a request lost to an overloaded machine from one the flood lost.
type DropCounts map[*Node]map[string]uint64

// ReadDrops reads every node's counters, StatusReaders at a time; a node
// that does not answer is left out.
func ReadDrops(ctx context.Context, nodes []*Node) DropCounts {
	out := make(DropCounts, len(nodes))
	var mu sync.Mutex
	EachNode(nodes, func(_ int, n *Node) {
		if c := nodeDrops(ctx, n); c != nil {
			mu.Lock()
			out[n] = c
			mu.Unlock()
		}
	})
	return out
}

func nodeDrops(ctx context.Context, n *Node) map[string]uint64 {
	st, err := n.Status()
	if err != nil {
		return nil
	}
	c := maps.Clone(st.Drops)
	if c == nil {
		c = map[string]uint64{}
	}
	c["tap_queue"] = st.Queues.TAPDropped
	c["receive_queue"] = st.Queues.ReceiveDropped
	if snmp, err := n.Host.Run(ctx, "cat", "/proc/net/snmp"); err == nil {
		for name, v := range udpErrors(snmp) {
			c["kernel_udp_"+name] = v
		}
	}
	return c
}

// udpErrors picks the error counters of the Udp lines of /proc/net/snmp.
func udpErrors(snmp []byte) map[string]uint64 {
	var names []string
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(snmp))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = fields[1:]
			continue
		}
		for i, f := range fields[1:] {
			if i < len(names) && strings.HasSuffix(names[i], "Errors") {
				if v, err := strconv.ParseUint(f, 10, 64); err == nil {
					out[strings.ToLower(strings.TrimSuffix(names[i], "Errors"))+"_errors"] = v
				}
			}
		}
		break
	}
	return out
}

// Since is what each node dropped from before to d, its non-zero reasons
// only.
func (d DropCounts) Since(before DropCounts) DropCounts {
	out := DropCounts{}
	for n, now := range d {
		for reason, v := range now {
			if delta := v - before[n][reason]; before[n] != nil && v > before[n][reason] {
				if out[n] == nil {
					out[n] = map[string]uint64{}
				}
				out[n][reason] = delta
			}
		}
	}
	return out
}

// overloadReasons are the drops of a machine too busy to keep up: queues
// that overflowed in the daemon or the kernel. A broadcast lost to them is
// lost as on any Ethernet under load, not by the flood.
var overloadReasons = []string{"tap_queue", "receive_queue", "kernel_udp_rcvbuf_errors", "kernel_udp_mem_errors", "kernel_udp_in_errors"}

// Overloaded reports whether any node dropped for overload.
func (d DropCounts) Overloaded() bool {
	total := d.Total()
	return slices.ContainsFunc(overloadReasons, func(r string) bool { return total[r] > 0 })
}

// Total sums the counts of every node, by reason.
func (d DropCounts) Total() map[string]uint64 {
	out := map[string]uint64{}
	for _, c := range d {
		for reason, v := range c {
			out[reason] += v
		}
	}
	return out
}

// DescribeDrops writes counts as "reason N, …", reasons in order.
func DescribeDrops(c map[string]uint64) string {
	if len(c) == 0 {
		return "none"
	}
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %d", reason, c[reason]))
	}
	return strings.Join(parts, ", ")
}
