package bench

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

	"burrow/netlab/cluster"
)

// dropCounts are, per node, the frames and datagrams its daemon dropped by
// reason (its status' drops and queues) and what its namespace's kernel
// dropped on UDP receive. Read before and after the broadcast check, they
// tell a request lost to an overloaded machine from one the flood lost.
type dropCounts map[*cluster.Node]map[string]uint64

// readDrops reads every node's counters, StatusReaders at a time; a node
// that does not answer is left out.
func readDrops(ctx context.Context, nodes []*cluster.Node) dropCounts {
	out := make(dropCounts, len(nodes))
	var mu sync.Mutex
	cluster.EachNode(nodes, func(_ int, n *cluster.Node) {
		if c := nodeDrops(ctx, n); c != nil {
			mu.Lock()
			out[n] = c
			mu.Unlock()
		}
	})
	return out
}

func nodeDrops(ctx context.Context, n *cluster.Node) map[string]uint64 {
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

// since is what each node dropped from before to d, its non-zero reasons
// only.
func (d dropCounts) since(before dropCounts) dropCounts {
	out := dropCounts{}
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

// total sums the counts of every node, by reason.
func (d dropCounts) total() map[string]uint64 {
	out := map[string]uint64{}
	for _, c := range d {
		for reason, v := range c {
			out[reason] += v
		}
	}
	return out
}

// describeDrops writes counts as "reason N, …", reasons in order.
func describeDrops(c map[string]uint64) string {
	if len(c) == 0 {
		return "none"
	}
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %d", reason, c[reason]))
	}
	return strings.Join(parts, ", ")
}
