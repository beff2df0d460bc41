package cluster

import (
	"testing"
	"time"
)

func TestBroadcastCountTally(t *testing.T) {
	ring := ringOf(4)
	b := &BroadcastCount{Sender: ring[0], Sent: make([]time.Time, 2), Seen: map[*Node][]int{
		ring[1]: {1, 1}, ring[2]: {1, 0}, ring[3]: {1, 2},
	}}
	if never, once, more := b.Tally(0); never != 0 || once != 3 || more != 0 {
		t.Errorf("request 1: %d, %d, %d", never, once, more)
	}
	if never, once, more := b.Tally(1); never != 1 || once != 1 || more != 1 {
		t.Errorf("request 2: %d, %d, %d", never, once, more)
	}
	if b.Exact() {
		t.Error("exact with a miss and a duplicate")
	}
	if got := b.Off(); got != "n2 saw 1 0; n3 saw 1 2" {
		t.Errorf("off %q", got)
	}
	b.Seen = map[*Node][]int{ring[1]: {1, 1}}
	if !b.Exact() {
		t.Error("not exact when every TAP saw every request once")
	}
	b.Echoes = 1
	if b.Exact() {
		t.Error("exact with a copy back at the sender")
	}
}

func TestParseCaptureAndAssignCopies(t *testing.T) {
	out := "$ tcpdump --immediate-mode -tt -n -l -i burrow0 -Q in arp[6:2] == 1\n" +
		"tcpdump: verbose output suppressed, use -v[v]... for full protocol decode\n" +
		"listening on burrow0, link-type EN10MB (Ethernet), snapshot length 262144 bytes\n" +
		"1763771234.000500 ARP, Request who-has 10.80.255.254 tell 10.80.0.17, length 28\n" +
		"1763771235.012000 ARP, Request who-has 10.80.255.254 tell 10.80.0.17, length 28\n" +
		"1763771235.013000 ARP, Request who-has 10.80.255.254 tell 10.80.0.17, length 28\n" +
		"3 packets captured\n"
	times, err := parseCapture(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 3 || !times[0].Equal(time.Unix(1763771234, 500_000)) {
		t.Fatalf("times %v", times)
	}
	sent := []time.Time{time.Unix(1763771234, 0), time.Unix(1763771235, 0), time.Unix(1763771236, 0)}
	var got []int
	for _, at := range times {
		got = append(got, requestOf(sent, at))
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 1 {
		t.Errorf("copies assigned to requests %v, want [0 1 1]", got)
	}
	if _, err := parseCapture("17637.5 ARP, Request who-has x\n"); err == nil {
		t.Error("a time stamp without microseconds was accepted")
	}
}
