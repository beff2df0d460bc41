package bench

import (
	"strings"
	"testing"
	"time"
)

// stream returns what a sender did that sent n datagrams exactly on
// schedule, and the arrivals of all of them but those lost.
func stream(n uint64, lost func(seq uint64) bool) (sentStream, []arrival) {
	sent := sentStream{Packets: n, First: 0, Last: time.Duration(n-1) * streamInterval}
	var arrivals []arrival
	for seq := range n {
		if !lost(seq) {
			at := time.Duration(seq) * streamInterval
			arrivals = append(arrivals, arrival{seq: seq, sent: at, received: at + time.Millisecond})
		}
	}
	return sent, arrivals
}

func TestAnalyzeStreamCountsTheOutageFromTheFailure(t *testing.T) {
	// One datagram lost before the failure at 40, an outage of 20 after
	// it, one duplicate, and two arrivals swapped.
	sent, arrivals := stream(100, func(seq uint64) bool { return seq == 10 || seq >= 40 && seq < 60 })
	arrivals = append(arrivals, arrivals[5])
	arrivals[1], arrivals[2] = arrivals[2], arrivals[1]
	got := analyzeStream(sent, 40, arrivals)
	want := streamLoss{Sent: 100, Rate: streamRate, Received: 79, Duplicates: 1, Lost: 21, LostFromFailure: 20,
		LongestGap: 21 * streamInterval} // sent 39, then 60
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got.SwitchingTime() != 2*time.Millisecond {
		t.Errorf("switching time %v, want 2ms", got.SwitchingTime())
	}
}

func TestAnalyzeStreamCountsOutagesAtTheEnds(t *testing.T) {
	sent, arrivals := stream(100, func(seq uint64) bool { return seq < 5 || seq >= 70 })
	got := analyzeStream(sent, 50, arrivals)
	if got.Lost != 35 || got.LostFromFailure != 30 {
		t.Errorf("lost %d, %d from the failure; want 35, 30", got.Lost, got.LostFromFailure)
	}
	if want := 30 * streamInterval; got.LongestGap != want { // sent 69, then the last, 99
		t.Errorf("longest gap %v, want %v", got.LongestGap, want)
	}
	// Arrivals of another stream's higher sequence numbers are ignored.
	got = analyzeStream(sentStream{}, 0, []arrival{{seq: 7}})
	if got != (streamLoss{}) {
		t.Errorf("empty stream: got %+v", got)
	}
}

func TestFlowing(t *testing.T) {
	ms := time.Millisecond
	full := uint64(streamRate) // a second's worth
	for _, c := range []struct {
		name    string
		samples []deliverySample
		want    bool
	}{
		{"no span of a second yet", []deliverySample{{0, 0}, {900 * ms, full}}, false},
		{"a full second", []deliverySample{{0, 0}, {500 * ms, full / 2}, {1000 * ms, full}}, true},
		{"a second at 80 %", []deliverySample{{0, 0}, {1000 * ms, full * 8 / 10}}, false},
		{"stalled, then a full last second", []deliverySample{{0, 0}, {2000 * ms, 0}, {3000 * ms, full}}, true},
		{"a full second, then stalled", []deliverySample{{0, 0}, {1000 * ms, full}, {2000 * ms, full}}, false},
	} {
		if got := flowing(c.samples); got != c.want {
			t.Errorf("%s: flowing = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAnalyzeChurn(t *testing.T) {
	m := 1e6
	intervals := []float64{
		900 * m, 1000 * m, 1100 * m, // before the first kill: mean 1000
		500 * m, 0, 0.05 * m, 700 * m, 850 * m, // killed at 3.4 s; back at 7 s
		600 * m, 5 * m, 900 * m, // restarted at 8.0 s; back at 10 s
	}
	events := []churnEvent{
		{At: 3400 * time.Millisecond, Node: "n3"},
		{At: 8 * time.Second, Restart: true, Node: "n3"},
	}
	got := analyzeChurn(intervals, events)
	if got.PreFailure != 1000*m {
		t.Errorf("pre-failure %v, want 1000 Mbit/s", got.PreFailure)
	}
	if got.ZeroSeconds != 2 || got.LongestZero != 2 {
		t.Errorf("%d s at zero, longest %d; want 2, 2", got.ZeroSeconds, got.LongestZero)
	}
	if got.Lowest != 0 || got.LowestSecond != 4 || got.BelowLow != 3 {
		t.Errorf("lowest %v at %d, %d below 10 Mbit/s; want 0 at 4, 3", got.Lowest, got.LowestSecond, got.BelowLow)
	}
	want := []recovery{
		{Event: events[0], Back: true, After: 3600 * time.Millisecond, ZeroSeconds: 2},
		{Event: events[1], Back: true, After: 2 * time.Second},
	}
	if len(got.Recoveries) != len(want) {
		t.Fatalf("recoveries %+v, want %+v", got.Recoveries, want)
	}
	for i := range want {
		if got.Recoveries[i] != want[i] {
			t.Errorf("recovery %d: %+v, want %+v", i, got.Recoveries[i], want[i])
		}
	}
	// A kill whose own second still made 80 % is back at once; one the
	// flow never recovers from is not back.
	got = analyzeChurn([]float64{1000 * m, 950 * m, 0}, []churnEvent{{At: 1200 * time.Millisecond}, {At: 2 * time.Second}})
	if r := got.Recoveries[0]; !r.Back || r.After != 0 {
		t.Errorf("kill in a good second: %+v", r)
	}
	if r := got.Recoveries[1]; r.Back {
		t.Errorf("kill never recovered from: %+v", r)
	}
}

func TestFailoverTargets(t *testing.T) {
	ms := time.Millisecond
	baseline, current := &failoverBuild{Label: "baseline"}, &failoverBuild{Label: "current"}
	switches := []*switchResult{
		{Build: baseline, streamLoss: streamLoss{LostFromFailure: 9000}},
		{Build: current, streamLoss: streamLoss{LostFromFailure: 300}},
		{Build: current, streamLoss: streamLoss{LostFromFailure: 600}},
		{Build: current, Failed: "no node between the ends forwards the stream"},
		{Build: baseline, Graceful: true, streamLoss: streamLoss{LostFromFailure: 2900}},
		{Build: current, Graceful: true},
	}
	kill := churnEvent{At: 15 * time.Second}
	restart := churnEvent{At: 20 * time.Second, Restart: true}
	churns := []*churnResult{
		{Build: baseline, Broke: "iperf3: connection reset"},
		{Build: current, churnAnalysis: churnAnalysis{Recoveries: []recovery{
			{Event: kill, Back: true, After: 1500 * ms, ZeroSeconds: 1},
			{Event: restart, Back: true, After: 3 * time.Second},
		}}},
	}
	got := failoverTargets([]*failoverBuild{baseline, current}, switches, churns)
	for _, want := range []string{
		"| target | baseline | current |",
		"| protection switching ≤ 50.000 ms (SIGKILL) | median 900.000 ms, max 900.000 ms: missed by the median, missed by the max | median 45.000 ms, max 60.000 ms: met by the median, missed by the max |",
		"| no datagram lost on graceful leave (SIGTERM) | lost 2900: missed | lost 0: met |",
		"| at most 1 s at zero per kill (aim ≤ 0.2 s: whole seconds here) | connection broke: missed | at most 1 s: met |",
		"| back to ≥ 80 % within 2s of each kill | connection broke: missed | at most 1.5 s: met |",
		"| back to ≥ 80 % within 1s of each restart | connection broke: missed | at most 3.0 s: missed |",
		"| no TCP connection broken | connection broke: missed | kept: met |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
}

func TestFailoverMarkdownSaysWhatWasNotMeasured(t *testing.T) {
	current := &failoverBuild{Label: "current", Binary: "/tmp/burrow-now"}
	r := &FailoverReport{
		Rounds: 1, Seconds: 30, Builds: []*failoverBuild{current},
		Switches: []*switchResult{
			{Build: current, Round: 1, Failed: "no node between the ends forwards the stream"},
			{Build: current, Round: 1, Graceful: true, Victim: "n3 (position 2)", Bridges: []int{2, 6}, Recovered: true,
				streamLoss: streamLoss{Sent: 40000, Rate: 9999.6, Received: 40000, LongestGap: 8 * time.Millisecond}},
		},
		Churns: []*churnResult{{Build: current, Seconds: 30, Failed: "current ring: timed out waiting for a settled ring"}},
	}
	got := r.Markdown(Machine{CommandLine: "burrow bench failover"})
	for _, want := range []string{
		"| current | SIGKILL | 1 | not measured: no node between the ends forwards the stream | | | | | | | | |",
		"| current | SIGTERM | 1 | 2, 6 | n3 (position 2) | 40000 | 10000 | 0 | 0 | 0.000 | 8.000 | yes |",
		"| current | SIGKILL | 0 | – | – |",
		"| connection | not measured: current ring: timed out waiting for a settled ring |",
		"| protection switching ≤ 50.000 ms (SIGKILL) | not measured |",
		"| no TCP connection broken | not measured |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
}
