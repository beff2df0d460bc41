package cluster

import (
	"maps"
	"testing"
)

func TestUDPErrorsReadsTheKernelsCounters(t *testing.T) {
	snmp := []byte("Ip: Forwarding DefaultTTL\nIp: 1 64\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 120 3 7 99 5 0 0 0 0\nUdpLite: InDatagrams NoPorts InErrors\nUdpLite: 0 0 9\n")
	got := udpErrors(snmp)
	want := map[string]uint64{"in_errors": 7, "rcvbuf_errors": 5, "sndbuf_errors": 0, "incsum_errors": 0, "mem_errors": 0}
	if !maps.Equal(got, want) {
		t.Fatalf("udpErrors = %v, want %v", got, want)
	}
}

func TestDropsSinceKeepsWhatGrew(t *testing.T) {
	a, b := &Node{Name: "a"}, &Node{Name: "b"}
	before := DropCounts{a: {"replay": 2, "tap_queue": 1}, b: {"replay": 0}}
	after := DropCounts{a: {"replay": 5, "tap_queue": 1}, b: {"replay": 1}, &Node{Name: "new"}: {"replay": 9}}
	d := after.Since(before)
	if len(d) != 2 || !maps.Equal(d[a], map[string]uint64{"replay": 3}) || !maps.Equal(d[b], map[string]uint64{"replay": 1}) {
		t.Fatalf("since = %v", d)
	}
	if got := DescribeDrops(d.Total()); got != "replay 4" {
		t.Fatalf("total %q", got)
	}
	if d.Overloaded() {
		t.Fatal("replays are no overload")
	}
	d[b]["kernel_udp_rcvbuf_errors"] = 1
	if !d.Overloaded() {
		t.Fatal("a full receive buffer is overload")
	}
}
