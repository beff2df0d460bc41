package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// measuredVPN is a result of a VPN with processes a and b: rates in
// Gbit/s over 10 s, CPU seconds split evenly between the ends, the p99
// of the pings under load in ms.
func measuredVPN(p *peer, round int, single, multi, cpuSingle, cpuMulti, p99 float64) *Result {
	test := func(gbits, cpu float64) streamTest {
		return streamTest{
			throughput: throughput{BitsPerSecond: gbits * 1e9, Bytes: uint64(gbits * 1e9 * 10 / 8)},
			CPU:        []processCPU{{"a", cpu / 2}, {"b", cpu / 2}},
		}
	}
	rtts := make([]time.Duration, 100)
	for i := range rtts {
		rtts[i] = 100 * time.Microsecond
	}
	rtts[99] = time.Duration(p99 * float64(time.Millisecond)) // the 99th percentile of 100
	rtts[98] = rtts[99]
	return &Result{Name: p.name, Title: p.title, Round: round, HasProcesses: true,
		Single: test(single, cpuSingle), Multi: test(multi, cpuMulti),
		Loaded: loadedLatency{Sent: 100, RTTs: rtts},
		RSS:    []processRSS{{"a", 15 << 20}, {"b", 17 << 20}}}
}

// withMachineCPU sets the busy seconds of the machine's CPUs during both
// of the result's tests.
func withMachineCPU(r *Result, single, multi float64) *Result {
	r.Single.MachineCPU, r.Multi.MachineCPU = single, multi
	return r
}

// threeRounds: burrow carries 2.5×, 1.8× and 3× wireguard-go's single
// stream; wireguard-go failed in round 2 of another run (see the test).
func threeRounds() []*Result {
	return []*Result{
		measuredVPN(burrowPeer, 1, 2.5, 3.0, 2.0, 3.0, 1.5),
		measuredVPN(upstreamWireguardPeer, 1, 1.0, 2.0, 5.0, 6.0, 8.0),
		measuredVPN(burrowPeer, 2, 1.8, 2.7, 1.8, 2.7, 2.5),
		measuredVPN(upstreamWireguardPeer, 2, 1.0, 1.8, 5.0, 5.4, 9.0),
		measuredVPN(burrowPeer, 3, 3.0, 3.3, 2.4, 3.3, 1.0),
		measuredVPN(upstreamWireguardPeer, 3, 1.0, 2.2, 6.0, 6.6, 7.0),
	}
}

func TestRoundRatiosPairEachRoundWithItsOwnReference(t *testing.T) {
	results := threeRounds()
	got := roundRatios(results, burrowPeer.name, singleRate)
	want := []roundValue{{1, 2.5}, {2, 1.8}, {3, 3.0}}
	if !slices.Equal(got, want) {
		t.Fatalf("ratios %v, want %v", got, want)
	}
	if m := median(valuesOf(got)); m != 2.5 {
		t.Errorf("median ratio %v, want 2.5", m)
	}
	// CPU per GB: burrow's 2 s over 3.125 GB against wireguard-go's 5 s
	// over 1.25 GB in round 1.
	if cpu := roundRatios(results, burrowPeer.name, singleCPUPerGB); cpu[0].Value != 0.16 {
		t.Errorf("round 1 CPU-s/GB ratio %v, want 0.16", cpu[0].Value)
	}
	// A round whose reference failed has no ratio; the others keep theirs.
	results[3].Failed = "did not come up"
	got = roundRatios(results, burrowPeer.name, singleRate)
	if want := []roundValue{{1, 2.5}, {3, 3.0}}; !slices.Equal(got, want) {
		t.Errorf("ratios without round 2's reference %v, want %v", got, want)
	}
	if got := roundList(got, "%.2f", "×"); got != "2.50× (round 1), 3.00× (round 3)" {
		t.Errorf("round list %q", got)
	}
}

func TestRatioTableGivesEveryRoundAndTheMedian(t *testing.T) {
	results := threeRounds()
	results[3].Failed = "did not come up"
	for _, r := range results {
		withMachineCPU(r, 20, 20)
	}
	got := ratioTable(results, 3)
	for _, want := range []string{
		"| VPN | ÷ upstream wireguard-go | round 1 | round 2 | round 3 | median |\n",
		"| burrow | throughput, 1 stream | 2.50 | – | 3.00 | **2.75** |\n",
		"| burrow | throughput, 4 streams | 1.50 | – | 1.50 | **1.50** |\n",
		"| burrow | CPU-s/GB, 1 stream | 0.16 | – | 0.13 | **0.15** |\n",
		"| burrow | CPU-s/GB, 4 streams | 0.33 | – | 0.33 | **0.33** |\n",
		// 20 busy seconds each: burrow's over 3.125 and 3.75 GB, wireguard-go's over 1.25.
		"| burrow | machine CPU-s/GB, 1 stream | 0.40 | – | 0.33 | **0.37** |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ratio table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| wireguard-go (upstream) |") {
		t.Errorf("the reference has a row of its own:\n%s", got)
	}
	if got := ratioTable(results[:1], 1); !strings.HasPrefix(got, "No ratios") {
		t.Errorf("ratio table without the reference:\n%s", got)
	}
}

func TestRoundsVerdict(t *testing.T) {
	values := []roundValue{{1, 2.5}, {2, 1.8}, {3, 3.0}}
	atLeast2 := func(v float64) bool { return v >= 2 }
	for _, c := range []struct {
		values    []roundValue
		medianMet bool
		want      string
	}{
		{values, true, "met by the median, missed in round 2"},
		{values[:1], true, "met in every round"},
		{values[1:2], false, "missed in every round"},
		{[]roundValue{{1, 1.5}, {2, 1.8}, {3, 3.0}}, false, "missed by the median, and in round 1, 2"},
	} {
		if got := roundsVerdict(c.values, c.medianMet, atLeast2); got != c.want {
			t.Errorf("verdict on %v: %q, want %q", c.values, got, c.want)
		}
	}
}

func TestIssueTargets(t *testing.T) {
	r := &Report{Rounds: 3, Results: threeRounds()}
	got := issueTargets(r)
	for _, want := range []string{
		// p99s of 1.5, 2.5 and 1.0 ms: the median is within 2 ms.
		"- ping p99 under a saturating TCP stream ≤ 2.000 ms: 1.500 ms, 2.500 ms, 1.000 ms in rounds 1–3, median 1.500 ms (wireguard-go (upstream): median 8.000 ms): met by the median, missed in round 2\n",
		"- single TCP stream ≥ 2.0× upstream wireguard-go in every paired round: 2.50×, 1.80×, 3.00× in rounds 1–3: met by the median, missed in round 2\n",
		"- single TCP stream ≥ 2.5× upstream wireguard-go as the median of ≥ 3 rounds: median 2.50× of 3 paired rounds: met\n",
		"- daemon CPU per GB ≤ 0.4× upstream wireguard-go's (1 stream, both ends): 0.16×, 0.20×, 0.13× in rounds 1–3, median 0.16× (with 4 streams median 0.33×): met in every round\n",
		"- multi-stream scaling (the issue sets no figure): burrow's 4 streams carry 1.20× its single stream (median of the rounds), upstream wireguard-go's 2.00×; with 4 streams burrow carries 1.50× upstream wireguard-go's\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack\n%s\nin:\n%s", want, got)
		}
	}
	// Fewer than 3 paired rounds cannot meet the median target.
	r.Results = r.Results[:4]
	if got := issueTargets(r); !strings.Contains(got, "median 2.15× of 2 paired rounds: missed, but of fewer than 3 rounds\n") {
		t.Errorf("targets of 2 rounds:\n%s", got)
	}
}

func TestMedianTable(t *testing.T) {
	results := threeRounds()
	results[4].RSS[1].Bytes = 19 << 20
	// 20 busy CPU-seconds in every test: over 3.125, 2.25 and 3.75 GB
	// with one stream, 3.75, 3.375 and 4.125 GB with four.
	for _, i := range []int{0, 2, 4} {
		withMachineCPU(results[i], 20, 20)
	}
	got := medianTable(results)
	want := "| burrow | 3 | 0.000 | 2500 | 0 | 0.64 (a 0.32, b 0.32) | 6.40 | 3000 | 0 | 0.80 (a 0.40, b 0.40) | 5.33 | 1.20 | 0.100 / 1.500 | 0 | a 15.0, b 19.0 |\n"
	if !strings.Contains(got, want) {
		t.Errorf("median table lacks\n%s\nin:\n%s", want, got)
	}
}

func TestMachineBusyText(t *testing.T) {
	results := threeRounds()
	for _, r := range results {
		withMachineCPU(r, 19.6, 20)
	}
	results[3].Failed = "did not come up" // its zeros do not count
	results[3].Single.MachineCPU = 0
	want := "The machine's CPUs were busy 1.96 to 2.00 of 2, on average, during the stream tests: all of them in every test, " +
		"so machine CPU-s/GB is 2 CPUs ÷ the throughput and tells no more than the throughput; it shows what a path costs only where the CPUs have time to spare.\n"
	if got := machineBusyText(results, 10, 2); got != want {
		t.Errorf("busy text\n%s\nwant\n%s", got, want)
	}
	withMachineCPU(results[0], 12, 20)
	if got, want := machineBusyText(results, 10, 2), "The machine's CPUs were busy 1.20 to 2.00 of 2, on average, during the stream tests.\n"; got != want {
		t.Errorf("busy text %q, want %q", got, want)
	}
}

// TestKernelPathTable: the kernel path against the encrypted path of the
// same round, and what each costs the machine beyond the underlay of the
// same round; the underlay failed in round 2, and the programs' run time
// was counted only in round 1.
func TestKernelPathTable(t *testing.T) {
	underlay := withMachineCPU(measuredVPN(baselinePeer, 1, 20, 20, 0, 0, 1), 15, 15) // 0.6 CPU-s/GB
	failed := measuredVPN(baselinePeer, 2, 20, 20, 0, 0, 1)
	failed.Failed = "iperf3 failed"
	kernel := withMachineCPU(measuredVPN(burrowKernelPeer, 1, 8, 10, 0.1, 0.1, 1), 20, 25) // 2.0 and 2.0
	// 80 Gbit in 10 s: 2.4 s of run time is 3 % of a core per Gbit/s.
	kernel.Single.Programs = []programRunTime{{sendingProgram, 0.8, 6_400_000}, {receivingProgram, 2.4, 6_400_000}}
	results := []*Result{
		underlay,
		withMachineCPU(measuredVPN(burrowPeer, 1, 2, 4, 1, 2, 1), 20, 20), // 8.0 and 4.0 CPU-s/GB
		kernel,
		failed,
		withMachineCPU(measuredVPN(burrowPeer, 2, 2, 4, 1, 2, 1), 20, 20),
		withMachineCPU(measuredVPN(burrowKernelPeer, 2, 6, 10, 0.1, 0.1, 1), 21, 25), // 2.8 and 2.0
	}
	got := kernelPathTable(results, 2)
	for _, want := range []string{
		"| figure | round 1 | round 2 | median |\n",
		"| throughput, 1 stream, ÷ the encrypted path's | 4.00 | 3.00 | **3.50** |\n",
		"| machine CPU-s/GB, 1 stream, ÷ the encrypted path's | 0.25 | 0.35 | **0.30** |\n",
		// (2.0 − 0.6) × 12.5 and (8.0 − 0.6) × 12.5
		"| kernel path, 1 stream: machine CPU above the underlay's, % of a core per Gbit/s | 17.5 | – | **17.5** |\n",
		"| encrypted path, 1 stream: machine CPU above the underlay's, % of a core per Gbit/s | 92.5 | – | **92.5** |\n",
		"| throughput, 4 streams, ÷ the encrypted path's | 2.50 | 2.50 | **2.50** |\n",
		"| machine CPU-s/GB, 4 streams, ÷ the encrypted path's | 0.50 | 0.50 | **0.50** |\n",
		"| kernel path, 4 streams: machine CPU above the underlay's, % of a core per Gbit/s | 17.5 | – | **17.5** |\n",
		"| encrypted path, 4 streams: machine CPU above the underlay's, % of a core per Gbit/s | 42.5 | – | **42.5** |\n",
		"| kernel path, 1 stream: b's receiving program (underlay ingress), its own run time, % of a core per Gbit/s | 3.00 | – | **3.00** |\n",
		"| kernel path, 1 stream: b's receiving program (underlay ingress), ns per run (a packet) | 375 | – | **375** |\n",
		"| kernel path, 1 stream: a's sending program (TAP egress), its own run time, % of a core per Gbit/s | 1.00 | – | **1.00** |\n",
		"the figure the Warrens paper gives, about 3 % of a core per Gbit/s for its receiving program:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("kernel path table lacks\n%s\nin:\n%s", want, got)
		}
	}
	if got := kernelPathTable(threeRounds(), 3); got != "" {
		t.Errorf("a table without the kernel path measured:\n%s", got)
	}
}

// Every round's VPNs get subnets of their own, apart from the chain's.
func TestVirtualSubnetsAreDistinct(t *testing.T) {
	seen := map[string]bool{chainSubnet.String(): true}
	for round := 1; round <= maxRounds; round++ {
		for _, p := range allPeers {
			s := virtualSubnet(round, p).String()
			if seen[s] {
				t.Fatalf("round %d, %s: subnet %s taken", round, p.name, s)
			}
			seen[s] = true
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	peers := []*peer{baselinePeer, burrowPeer}
	for _, o := range []Options{
		{Seconds: 2, Rounds: 3},
		{Seconds: 10, Rounds: 0},
		{Seconds: 10, Rounds: maxRounds + 1},
	} {
		if err := o.validate(peers); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := (&Options{Seconds: 10, Rounds: 3}).validate(peers); err != nil {
		t.Error(err)
	}
	if err := (&Options{Seconds: 10, Rounds: 3, ProfileDir: t.TempDir()}).validate([]*peer{baselinePeer}); err == nil ||
		!strings.Contains(err.Error(), "burrow must be among the peers") {
		t.Errorf("profile without burrow: %v", err)
	}
}

func TestLoadPingsFitInTheStream(t *testing.T) {
	if got := loadPings(10); got != 800 {
		t.Errorf("pings in a 10 s stream: %d, want 800", got)
	}
	if got := loadPings(minSeconds); got < 1 {
		t.Errorf("pings in the shortest stream: %d", got)
	}
}
