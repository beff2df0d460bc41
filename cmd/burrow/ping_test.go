package main

import (
	"strings"
	"testing"
	"time"

	"burrow/runtime"
)

func TestPingLinesNameThePath(t *testing.T) {
	id := "d671a562aaaabbbbccccddddeeeeffff"
	for _, c := range []struct {
		a    runtime.PingAnswer
		want string
	}{
		{runtime.PingAnswer{Target: "pub1", NodeID: id, Answered: true, RTTms: 0.31, Path: "direct", Endpoint: "198.18.0.2:51820"},
			"pong from pub1 (d671a562) via direct 198.18.0.2:51820 in 0.31 ms"},
		{runtime.PingAnswer{Target: "pub1", NodeID: id, Answered: true, RTTms: 0.46, Path: "relay", Via: "beacon", ViaPath: "websocket"},
			"pong from pub1 (d671a562) via relay beacon over websocket in 0.46 ms"},
		{runtime.PingAnswer{Target: "pub1", NodeID: id, Answered: true, RTTms: 0.58, Path: "multi-hop", Via: "beacon", ViaPath: "direct", Hops: 2},
			"pong from pub1 (d671a562) via multi-hop, 2 hops, last from beacon in 0.58 ms"},
		{runtime.PingAnswer{Target: "pub1", NodeID: id}, "timeout: no answer from pub1 (d671a562) within 2s"},
	} {
		var b strings.Builder
		printPingAnswer(&b, c.a, 2*time.Second)
		if got := strings.TrimSpace(b.String()); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
	after := 0.3
	var b strings.Builder
	printPingSummary(&b, pingReport{Target: "pub1", Sent: 2, Answered: 2, DirectAfter: &after, DirectAt: 2})
	if want := "--- pub1: 2 pings, 2 answered; direct from ping 2, 0.3 s after the first\n"; b.String() != want {
		t.Errorf("summary %q, want %q", b.String(), want)
	}
}
