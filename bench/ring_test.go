package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArpingTimes(t *testing.T) {
	out := `ARPING 10.79.0.5
42 bytes from 8a:b7:77:87:e7:42 (10.79.0.5): index=0 time=8.465 usec
42 bytes from 8a:b7:77:87:e7:42 (10.79.0.5): index=1 time=1.508 msec
42 bytes from 8a:b7:77:87:e7:42 (10.79.0.5): index=2 time=1.2 sec
Timeout
42 bytes from 8a:b7:77:87:e7:42 (10.79.0.5): index=4 time=950 nsec

--- 10.79.0.5 statistics ---
5 packets transmitted, 4 packets received,  20% unanswered (0 extra)
rtt min/avg/max/std-dev = 0.001/300.380/1200.000/519.400 ms
`
	got := parseArpingTimes(out)
	want := []time.Duration{8465 * time.Nanosecond, 1508 * time.Microsecond, 1200 * time.Millisecond, 950 * time.Nanosecond}
	if !slices.Equal(got, want) {
		t.Errorf("arping times %v, want %v", got, want)
	}
}

func TestPathAsExpected(t *testing.T) {
	for _, c := range []struct {
		hops    int
		crossed []int
		want    bool
	}{
		{1, nil, true},
		{1, []int{1}, false},
		{4, []int{1, 2, 3}, true},
		{4, []int{5, 6, 7}, false}, // the other way round the ring
		{3, []int{1}, false},
	} {
		target := &ringTarget{Hops: c.hops, Crossed: c.crossed}
		if got := target.PathAsExpected(); got != c.want {
			t.Errorf("%d hops forwarded by %v: as expected %v, want %v", c.hops, c.crossed, got, c.want)
		}
	}
}

// ringTargets returns targets 1 to 4 hops away whose replies take rtt(hops).
func ringTargets(rtt func(hops int) []time.Duration) []*ringTarget {
	var targets []*ringTarget
	for hops := 1; hops <= 4; hops++ {
		var crossed []int
		for p := 1; p < hops; p++ {
			crossed = append(crossed, p)
		}
		targets = append(targets, &ringTarget{Hops: hops, Crossed: crossed, Sent: 3, Replies: rtt(hops)})
	}
	return targets
}

// The per-hop cost is the slope of the one-way latency against the nodes
// in between: here 0.04 ms of RTT per node, 0.02 ms one way.
func TestFitPerHop(t *testing.T) {
	us := time.Microsecond
	targets := ringTargets(func(hops int) []time.Duration {
		base := time.Duration(300+40*(hops-1)) * us
		// One slow reply per target moves the means, not the medians.
		return []time.Duration{base, base + 2*us, base + 900*us}
	})
	medians := fitPerHop(targets, median[time.Duration])
	if math.Abs(medians.Slope-0.020) > 1e-9 || math.Abs(medians.Intercept-0.151) > 1e-9 {
		t.Errorf("fit of the medians %+v, want slope 0.020 ms, intercept 0.151 ms", medians)
	}
	means := fitPerHop(targets, mean)
	if math.Abs(means.Slope-0.020) > 1e-6 {
		t.Errorf("fit of the means %+v, want slope 0.020 ms", means)
	}
}

func TestRingReportChecksTheTarget(t *testing.T) {
	us := time.Microsecond
	targets := ringTargets(func(hops int) []time.Duration {
		return []time.Duration{time.Duration(400+60*(hops-1)) * us}
	})
	targets[3].Crossed = []int{5, 6, 7}
	r := &RingReport{
		Options: RingOptions{Nodes: 8, Hops: 4, Rounds: 1, Pings: 3, Arpings: 2},
		Source:  "n3 (position 0)", Targets: targets,
		PerHop:       fitPerHop(targets, mean),
		MedianPerHop: fitPerHop(targets, median[time.Duration]),
		ARP:          &arpResult{Target: "n1 (position 4)", Hops: 4, Sent: 2, Replies: []time.Duration{1200 * us, 1500 * us}},
	}
	got := r.Markdown(Machine{})
	for _, want := range []string{
		"| 1 | 0 |  | none | 1 of 3 | 0.400 | 0.400 | 0.400 | 0.200 | 0.200 |\n",
		"| 4 | 3 |  | positions 5, 6, 7 (not the nodes in between) | 1 of 3 |",
		"**0.030 ms** from the means, **0.030 ms** from the medians",
		"1→2 hops +0.030 ms, 2→3 hops +0.030 ms, 3→4 hops +0.030 ms",
		"2 of 2 answered, p50 **1.200 ms**",
		"(1–4 hops): met from the means, met from the medians\n",
		"warning: the pings to  were forwarded by positions 5, 6, 7",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ring report lacks %q:\n%s", want, got)
		}
	}
}

func TestRingOptionsValidate(t *testing.T) {
	ok := RingOptions{Nodes: 8, Hops: 4, Rounds: 25, Pings: 20, Arpings: 100}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(*RingOptions){
		func(o *RingOptions) { o.Nodes = 7 }, // node 4 hops away is 3 the other way
		func(o *RingOptions) { o.Hops = 1 },  // one point has no slope
		func(o *RingOptions) { o.Rounds = 0 },
		func(o *RingOptions) { o.Arpings = 0 },
		func(o *RingOptions) { o.Nodes = 251 },
	} {
		o := ok
		change(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
