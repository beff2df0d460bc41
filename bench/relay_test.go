package bench

import (
	"strings"
	"testing"
	"time"
)

func TestRelayReportRatiosAndTarget(t *testing.T) {
	r := &RelayReport{Started: time.Date(2026, 11, 27, 19, 31, 0, 0, time.UTC), Seconds: 10, Relay: "p1", LoadBefore: "2.79", LoadAfter: "5.23",
		MaxRate: relayBenchRate,
		Rounds: []relayRound{
			{Direct: throughput{BitsPerSecond: 2820e6, Retransmits: 54403}, Relayed: throughput{BitsPerSecond: 1528e6, Retransmits: 30964}, RelayCPUSeconds: 4.36, Queued: 12, Dropped: 3},
			{Direct: throughput{BitsPerSecond: 2975e6}, Relayed: throughput{BitsPerSecond: 1900e6}},
			{Direct: throughput{BitsPerSecond: 3108e6}, Relayed: throughput{BitsPerSecond: 1200e6}},
		}}
	got := r.Markdown(Machine{CommandLine: "burrow bench relay"})
	for _, want := range []string{
		"## Member relay run of 2026-11-27 19:31 UTC\n",
		"relay.max_rate 1024 MiB/s, far above what this machine carries",
		"| 1 | 2820 | 1528 | 54 % | 54403 / 30964 | 4.36 | 12 / 3 |\n",
		"| 3 | 3108 | 1200 | 39 % | 0 / 0 | 0.00 | 0 / 0 |\n",
		"Median relayed / direct: 54 % (target ≥ 50 %: met).\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	r.Rounds = r.Rounds[2:]
	if got := r.Markdown(Machine{}); !strings.Contains(got, "Median relayed / direct: 39 % (target ≥ 50 %: not met).") {
		t.Errorf("a missed target not reported:\n%s", got)
	}
	r.MaxRate = 10 << 20
	if got := r.Markdown(Machine{}); !strings.Contains(got, "relay.max_rate 10 MiB/s, 84 Mbit/s, so the cap is measured") ||
		!strings.Contains(got, "Median relayed: 1200 Mbit/s, 1431 % of relay.max_rate") {
		t.Errorf("a capped run not described:\n%s", got)
	}
}
