package bench

import (
	"strings"
	"testing"
	"time"

	"burrow/netlab"
)

// The classes match the paths docs/nat-traversal.md measured, whichever
// end is named first.
func TestClassify(t *testing.T) {
	const (
		public    = netlab.NoNAT
		eim       = netlab.EndpointIndependent
		symmetric = netlab.Symmetric
		blocked   = netlab.UDPBlocked
	)
	for _, c := range []struct {
		x, y netlab.NAT
		want pathClass
		path string
	}{
		{eim, public, directToBeacon, "direct"},
		{symmetric, public, directToBeacon, "direct"},
		{eim, eim, holePunched, "direct"},
		{blocked, public, webSocketToBeacon, "websocket"},
		{eim, symmetric, beaconRelay, "relay"},
		{symmetric, symmetric, beaconRelay, "relay"},
		{blocked, eim, beaconRelayOverWebSocket, "relay"},
		{blocked, symmetric, beaconRelayOverWebSocket, "relay"},
	} {
		for _, pair := range [][2]netlab.NAT{{c.x, c.y}, {c.y, c.x}} {
			got := classify(pair[0], pair[1])
			if got != c.want || got.statusPath() != c.path {
				t.Errorf("classify(%v, %v) = %v on %q, want %v on %q", pair[0], pair[1], got, got.statusPath(), c.want, c.path)
			}
		}
	}
}

func TestParseDeletedFlows(t *testing.T) {
	if n, ok := parseDeletedFlows("conntrack v1.4.7 (conntrack-tools): 267 flow entries have been deleted.\n"); !ok || n != 267 {
		t.Errorf("got %d, %v", n, ok)
	}
	if n, ok := parseDeletedFlows("conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.\n"); !ok || n != 0 {
		t.Errorf("none deleted: got %d, %v", n, ok)
	}
	if _, ok := parseDeletedFlows("conntrack v1.4.7 (conntrack-tools): Operation not permitted\n"); ok {
		t.Error("an error was taken for a summary")
	}
}

func TestRestartSummaries(t *testing.T) {
	ms := time.Millisecond
	res := &restartResult{Node: "a", Links: []*linkSetup{
		{Peer: "beacon", UpAfter: 20 * ms, OnPathAfter: 20 * ms},
		{Peer: "b", UpAfter: 1500 * ms, OnPathAfter: 11200 * ms},
	}}
	if first := res.firstLink(); first.Peer != "beacon" {
		t.Errorf("first link to %s", first.Peer)
	}
	if d, ok := res.allOnPathAfter(); !ok || d != 11200*ms {
		t.Errorf("all on their paths after %v, %v", d, ok)
	}
	res.Links[1].OnPathAfter = 0
	if _, ok := res.allOnPathAfter(); ok {
		t.Error("a link that never reached its path counted as on it")
	}
}

func sampleRestarts() []*restartResult {
	ms := time.Millisecond
	return []*restartResult{
		{Node: "a", Links: []*linkSetup{
			{Peer: "b", Class: holePunched, UpAfter: 23 * ms, FirstPath: "direct", OnPathAfter: 23 * ms, RTT: 2100 * time.Microsecond},
			{Peer: "beacon", Class: directToBeacon, UpAfter: 16 * ms, FirstPath: "direct", OnPathAfter: 16 * ms, RTT: 2200 * time.Microsecond},
		}},
		{Node: "a", ClearedNAT: true, Links: []*linkSetup{
			{Peer: "b", Class: holePunched, UpAfter: 1523 * ms, FirstPath: "relay", OnPathAfter: 11178 * ms, RTT: 2814 * time.Microsecond},
			{Peer: "beacon", Class: directToBeacon, UpAfter: 17 * ms, FirstPath: "direct", OnPathAfter: 17 * ms, RTT: 3702 * time.Microsecond},
		}},
		{Node: "a", ClearedNAT: true, Failed: "timed out", Links: []*linkSetup{
			{Peer: "beacon", Class: directToBeacon, UpAfter: 19 * ms, FirstPath: "direct", OnPathAfter: 19 * ms, RTT: 3 * ms},
		}},
	}
}

func TestSetupTable(t *testing.T) {
	want := "| path | links | up (s) min / median / max | on path (s) min / median / max | handshake RTT (ms) median / max | came up on another path first |\n" +
		"| --- | ---: | --- | --- | --- | --- |\n" +
		"| direct to the public beacon | 2 | 0.017 / 0.018 / 0.019 | 0.017 / 0.018 / 0.019 | 3.351 / 3.702 | none |\n" +
		"| direct, hole-punched | 1 | 1.523 / 1.523 / 1.523 | 11.178 / 11.178 / 11.178 | 2.814 / 2.814 | relay ×1 |\n"
	if got := setupTable(restartsWith(sampleRestarts(), true)); got != want {
		t.Errorf("setup table:\n%s\nwant:\n%s", got, want)
	}
	if got := setupTable(nil); got != "No link came up after a restart.\n" {
		t.Errorf("empty setup table %q", got)
	}
}

func TestRestartTable(t *testing.T) {
	want := "| restarted node | NAT state | restarts | first link up (s) min / median / max | first link to | all links on their paths (s) min / median / max |\n" +
		"| --- | --- | ---: | --- | --- | --- |\n" +
		"| a (endpoint-independent) | kept | 1 | 0.016 / 0.016 / 0.016 | beacon ×1 | 0.023 / 0.023 / 0.023 |\n" +
		"| a (endpoint-independent) | cleared | 2 | 0.017 / 0.018 / 0.019 | beacon ×2 | 11.178 / 11.178 / 11.178 |\n"
	if got := restartTable(sampleRestarts(), natOfNode); got != want {
		t.Errorf("restart table:\n%s\nwant:\n%s", got, want)
	}
}

func TestSetupTargets(t *testing.T) {
	got := setupTargets(sampleRestarts())
	for _, want := range []string{
		"- direct to the public beacon, NAT state kept: median 0.016 s, max 0.016 s (target < 0.500 s; the EdgeVPN paper's E11: 2.4 s on average): met by the median, met by the max\n",
		"- direct, hole-punched, NAT state cleared: median 11.178 s, max 11.178 s (target < 0.500 s; the EdgeVPN paper's E11: 2.4 s on average): missed by the median, missed by the max\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}

func TestPairTable(t *testing.T) {
	const relayRate = 100 << 20 // 839 Mbit/s
	pairs := []*pairResult{
		{From: "a", To: "b", Class: holePunched, RTT: 402 * time.Microsecond,
			throughput: throughput{BitsPerSecond: 3236e6, Bytes: 4e9, Retransmits: 1}},
		{From: "c1", To: "c2", Class: beaconRelay, RTT: 658 * time.Microsecond, PingLost: 2,
			throughput:       throughput{BitsPerSecond: 827e6, Bytes: 2e9, Retransmits: 42509},
			BeaconCPUSeconds: 4.64, RelayedDatagrams: 250977},
		{From: "d", To: "a", Class: beaconRelayOverWebSocket, RTT: 1666 * time.Microsecond,
			throughput:       throughput{BitsPerSecond: 622e6, Bytes: 1e9, Retransmits: 121},
			BeaconCPUSeconds: 7.37, RelayedDatagrams: 195817},
		{From: "beacon", To: "a", Class: directToBeacon, Failed: `not on the direct path: beacon says "relay", a says "relay"`},
	}
	want := "| pair | path | ping RTT (ms) | TCP (Mbit/s) | retransmits | beacon CPU-s | beacon CPU-s/GB | relayed (datagrams) |\n" +
		"| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n" +
		"| a → b | direct, hole-punched | 0.402 | 3236 | 1 | 0.00 | – | 0 |\n" +
		"| c1 → c2 | relayed by the beacon | 0.658 (2 lost) | 827 (relay cap 839) | 42509 | 4.64 | 2.32 | 250977 |\n" +
		"| d → a | relayed by the beacon, one end on WebSocket | 1.666 | 622 | 121 | 7.37 | 7.37 | 195817 |\n" +
		"| beacon → a | direct to the public beacon | not measured: not on the direct path: beacon says \"relay\", a says \"relay\" | | | | | |\n"
	if got := pairTable(pairs, relayRate); got != want {
		t.Errorf("pair table:\n%s\nwant:\n%s", got, want)
	}
}

func TestCountListAndNames(t *testing.T) {
	if got := countList(map[string]int{"b": 1, "beacon": 3, "a": 1}); got != "beacon ×3, a ×1, b ×1" {
		t.Errorf("count list %q", got)
	}
	if got := joinNames([]string{"a", "c1", "d"}); got != "a, c1 and d" {
		t.Errorf("names %q", got)
	}
}
