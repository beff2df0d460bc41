package bench

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// A command name with a space and a parenthesis must not shift fields.
	stat := "4242 (wire guard) R) S 1 4242 4242 0 -1 4194560 1210 0 0 0 731 269 0 0 20 0 9 0 188585 1300000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0"
	got, err := parseStatTicks(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 731+269 {
		t.Fatalf("utime+stime = %d, want %d", got, 731+269)
	}
	for _, bad := range []string{"", "12 (short) S 1 2 3", "12 (x) S 1 2 3 4 5 6 7 8 9 10 u s"} {
		if _, err := parseStatTicks(bad); err == nil {
			t.Errorf("parseStatTicks(%q) succeeded", bad)
		}
	}
}

func TestParseStatTicksOfThisProcess(t *testing.T) {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	if _, err := parseStatTicks(string(data)); err != nil {
		t.Fatal(err)
	}
	if clockTicksPerSecond <= 0 {
		t.Fatalf("clock ticks per second %v", clockTicksPerSecond)
	}
}

func TestParseMachineBusyTicks(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice:
	// busy is user+nice+system+irq+softirq+steal; guest time is already
	// in user and nice.
	stat := "cpu  1000 20 300 5000 70 8 90 4 100 10\ncpu0 500 10 150 2500 35 4 45 2 50 5\nintr 123\n"
	got, err := parseMachineBusyTicks(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1000 + 20 + 300 + 8 + 90 + 4); got != want {
		t.Fatalf("busy ticks %d, want %d", got, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu  1 2 3 4 5 6 7\n", "cpu  1 2 x 4 5 6 7 8\n"} {
		if _, err := parseMachineBusyTicks(bad); err == nil {
			t.Errorf("parseMachineBusyTicks(%q) succeeded", bad)
		}
	}
	if s, err := machineBusySeconds(); err != nil || s <= 0 {
		t.Errorf("this machine's busy seconds %v, %v", s, err)
	}
}

func TestParseMemoryField(t *testing.T) {
	status := "Name:\tnebula\nVmPeak:\t 1300000 kB\nVmHWM:\t   13824 kB\nVmRSS:\t   12000 kB\n"
	for field, want := range map[string]uint64{"VmHWM": 13824 * 1024, "VmRSS": 12000 * 1024} {
		got, err := parseMemoryField(status, field)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s %d, want %d", field, got, want)
		}
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t12 MB\n", "VmHWM:\tlots kB\n"} {
		if _, err := parseMemoryField(bad, "VmHWM"); err == nil {
			t.Errorf("parseMemoryField(%q) succeeded", bad)
		}
	}
}

func TestOwnProcessFiguresAreRead(t *testing.T) {
	pid := os.Getpid()
	if rss, err := residentRSS(pid); err != nil || rss == 0 {
		t.Errorf("resident RSS %d, %v", rss, err)
	}
	if pss, err := proportionalRSS(pid); err != nil || pss == 0 {
		t.Errorf("proportional set size %d, %v", pss, err)
	}
	if fds, err := openFiles(pid); err != nil || fds < 3 {
		t.Errorf("%d open files, %v", fds, err)
	}
}

func TestParseIperf3(t *testing.T) {
	report := `{"start": {}, "intervals": [], "end": {
		"sum_sent": {"bytes": 1500000000, "bits_per_second": 1.2e9, "retransmits": 17},
		"sum_received": {"bytes": 1499000000, "bits_per_second": 1.1992e9}}}`
	got, err := parseIperf3([]byte(report))
	if err != nil {
		t.Fatal(err)
	}
	want := throughput{BitsPerSecond: 1.1992e9, Bytes: 1499000000, Retransmits: 17}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for name, bad := range map[string]string{
		"error":   `{"start": {}, "end": {}, "error": "unable to connect to server: Connection refused"}`,
		"nothing": `{"end": {"sum_received": {"bytes": 0}}}`,
		"no JSON": `iperf3: error - unable to connect`,
	} {
		if _, err := parseIperf3([]byte(bad)); err == nil {
			t.Errorf("%s: parseIperf3 succeeded", name)
		}
	}
}

func TestRoundTable(t *testing.T) {
	results := []*Result{
		{Name: "n2n", Title: "n2n v1", Round: 2, UpAfter: 1500 * time.Millisecond, RTT: 312500 * time.Nanosecond, PingLost: 2,
			HasProcesses: true,
			Single: streamTest{throughput: throughput{BitsPerSecond: 177.4e6, Bytes: 5e8, Retransmits: 9},
				CPU: []processCPU{{"supernode", 0.25}, {"edge a", 1.25}}, MachineCPU: 2},
			Multi: streamTest{throughput: throughput{BitsPerSecond: 300e6, Bytes: 1e9, Retransmits: 20},
				CPU: []processCPU{{"supernode", 0.5}, {"edge a", 2}}, MachineCPU: 3.5},
			Loaded: loadedLatency{Sent: 4, RTTs: []time.Duration{time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond},
				Stream: throughput{BitsPerSecond: 170e6}},
			RSS: []processRSS{{"supernode", 1 << 20}, {"edge a", 2 << 20}}},
		{Name: "nebula", Title: "nebula", Round: 2, Failed: "did not come up"},
		// The underlay has no processes, but the machine's CPU counts.
		{Name: "none", Title: "no VPN (underlay)", Round: 2, RTT: 50 * time.Microsecond,
			Single: streamTest{throughput: throughput{BitsPerSecond: 20e9, Bytes: 25e9}, MachineCPU: 15},
			Multi:  streamTest{throughput: throughput{BitsPerSecond: 24e9, Bytes: 30e9}, MachineCPU: 15},
			Loaded: loadedLatency{Sent: 1, RTTs: []time.Duration{time.Millisecond}}},
	}
	want := "| round | VPN | up in (s) | idle RTT (ms) | 1 stream (Mbit/s) | retransmits | CPU-s/GB | machine CPU-s/GB | 4 streams (Mbit/s) | retransmits | CPU-s/GB | machine CPU-s/GB | under load p50 / p99 (ms) | pings lost under load | the stream meanwhile (Mbit/s) | peak RSS (MiB) per process |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		"| 2 | n2n v1 | 1.5 | 0.312 (2 lost) | 177 | 9 | 3.00 (supernode 0.50, edge a 2.50) | 4.00 | 300 | 20 | 2.50 (supernode 0.50, edge a 2.00) | 3.50 | 2.000 / 3.000 | 1 of 4 | 170 | supernode 1.0, edge a 2.0 |\n" +
		"| 2 | no VPN (underlay) | – | 0.050 | 20000 | 0 | – | 0.60 | 24000 | 0 | – | 0.50 | 1.000 / 1.000 | 0 of 1 | 0 | – |\n"
	if got := roundTable(results); got != want {
		t.Errorf("round table:\n%s\nwant:\n%s", got, want)
	}
}

func TestPerHopTarget(t *testing.T) {
	r := &Report{Chain: &ChainResult{Sent: 500, PerHop: 60 * time.Microsecond, MedianPerHop: 30 * time.Microsecond}}
	if got, want := targetList(r), "- 0.060 ms per switching hop from the means, 0.030 ms from the medians (target < 0.050 ms): missed, met\n"; got != want {
		t.Errorf("targets %q, want %q", got, want)
	}
}

func TestCPUModel(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\nprocessor\t: 1\n"
	if got := cpuModel(cpuinfo); got != "Intel(R) Xeon(R) Processor" {
		t.Errorf("cpu model %q", got)
	}
}

func TestSelectPeersKeepsCanonicalOrder(t *testing.T) {
	peers, err := selectPeers([]string{"tinc", "none", "burrow"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(peerNames(peers), ","); got != "none,burrow,tinc" {
		t.Errorf("order %s", got)
	}
	// The kernel path runs right after the encrypted path it is set against.
	peers, err = selectPeers([]string{"wireguard-go", "burrow-kernel", "burrow"})
	if got := strings.Join(peerNames(peers), ","); err != nil || got != "burrow,burrow-kernel,wireguard-go" {
		t.Errorf("order %s, %v", got, err)
	}
	if _, err := selectPeers([]string{"openvpn"}); err == nil {
		t.Error("an unknown peer was accepted")
	}
}

// The install script builds upstream wireguard-go where the benchmark
// looks for it, at the same pinned version.
func TestInstallScriptMatchesPin(t *testing.T) {
	script, err := os.ReadFile("install-peers.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"module=" + upstreamWireguardModule + "\n",
		"version=" + upstreamWireguardVersion + "\n",
		`GOBIN="$cache/wireguard-go@$version"`,
		`cache="$XDG_CACHE_HOME/burrow-bench"`,
		"cache=" + systemCacheDir + "\n",
	} {
		if !strings.Contains(string(script), want) {
			t.Errorf("install-peers.sh lacks %q", want)
		}
	}
	if got, want := upstreamWireguardPath("/c"), "/c/wireguard-go@"+upstreamWireguardVersion+"/wireguard"; got != want {
		t.Errorf("upstream path %s, want %s", got, want)
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines([]byte("1\n2\n3\n4\n"), 2); got != "3\n4" {
		t.Errorf("last lines %q", got)
	}
	if got := lastLines([]byte("only"), 5); got != "only" {
		t.Errorf("last lines %q", got)
	}
}

func TestParseReplyTimes(t *testing.T) {
	out := `PING 10.77.8.3 (10.77.8.3) 56(84) bytes of data.
64 bytes from 10.77.8.3: icmp_seq=1 ttl=64 time=0.131 ms
64 bytes from 10.77.8.3: icmp_seq=3 ttl=64 time=12.5 ms

--- 10.77.8.3 ping statistics ---
3 packets transmitted, 2 received, 33.3333% packet loss, time 10ms
rtt min/avg/max/mdev = 0.131/6.315/12.500/6.184 ms
`
	got := parseReplyTimes(out)
	want := []time.Duration{131 * time.Microsecond, 12500 * time.Microsecond}
	if !slices.Equal(got, want) {
		t.Fatalf("reply times %v, want %v", got, want)
	}
}

// A duplicated reply answers a request already counted: it must not
// count twice among the reply times.
func TestParseReplyTimesLeavesOutDuplicates(t *testing.T) {
	out := "64 bytes from 10.77.1.2: icmp_seq=1 ttl=64 time=0.200 ms\n" +
		"64 bytes from 10.77.1.2: icmp_seq=1 ttl=64 time=0.900 ms (DUP!)\n" +
		"64 bytes from 10.77.1.2: icmp_seq=2 ttl=64 time=1023 ms\n"
	got := parseReplyTimes(out)
	want := []time.Duration{200 * time.Microsecond, 1023 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("reply times %v, want %v", got, want)
	}
}
