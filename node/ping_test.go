package node

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"burrow/overlay"
)

// A member with no link answers over the overlay first; the ping asks for
// an on-demand link, and the next ping's answer comes straight over it.
func TestPingCrossesTheOverlayThenGoesDirect(t *testing.T) {
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	var first netip.AddrPort
	for i := range 12 {
		cfg := OverlayConfig{Params: overlay.Params{Successors: 1, LongDistance: 0}, OnDemand: OnDemandConfig{Enabled: true}}
		if i > 0 {
			cfg.Bootstrap = []netip.AddrPort{first}
		}
		node := w.add(fmt.Sprintf("n%d", i), 700+uint64(i), cfg)
		if i == 0 {
			first = node.addr
		}
	}
	w.settle(t, 60*time.Second)
	w.quiet(t, 10*time.Second, 2*time.Minute)
	var a, b *testNode
	for _, x := range w.nodes {
		for _, y := range w.nodes {
			if x != y && x.node.upLink(y.node.Self()) == nil && a == nil {
				a, b = x, y
			}
		}
	}
	if a == nil {
		t.Fatal("every pair is adjacent")
	}
	ping := func() PingResult {
		t.Helper()
		var got *PingResult
		if err := a.node.Ping(b.node.Self(), 2*time.Second, w.now, func(r PingResult) { got = &r }); err != nil {
			t.Fatal(err)
		}
		w.drain()
		w.advance(10*time.Millisecond, 10*time.Millisecond)
		if got == nil {
			t.Fatal("no answer and no timeout")
		}
		return *got
	}
	r := ping()
	if !r.Answered || r.Path != "multi-hop" || r.Hops < 2 || r.Via == "" {
		t.Fatalf("first ping: %+v, want a multi-hop answer", r)
	}
	w.advance(2*time.Second, 100*time.Millisecond)
	r = ping()
	if !r.Answered || r.Path != "direct" || r.Hops != 1 || r.Endpoint != b.addr.String() || r.Name != b.name {
		t.Fatalf("ping after the on-demand link came up: %+v, want direct to %s at %s", r, b.name, b.addr)
	}

	w.down[b] = true
	var lost *PingResult
	if err := a.node.Ping(b.node.Self(), time.Second, w.now, func(r PingResult) { lost = &r }); err != nil {
		t.Fatal(err)
	}
	w.advance(500*time.Millisecond, 100*time.Millisecond)
	if lost != nil {
		t.Fatalf("gave up before the timeout: %+v", lost)
	}
	w.advance(time.Second, 100*time.Millisecond)
	if lost == nil || lost.Answered {
		t.Fatalf("a dead member's ping: %+v, want a timeout", lost)
	}
	if err := a.node.Ping(a.node.Self(), time.Second, w.now, func(PingResult) {}); err != ErrPingSelf {
		t.Fatalf("pinging itself: %v", err)
	}
}

func TestResolveMemberByNameIDAndPrefix(t *testing.T) {
	w := newOverlayNet(t, 4, 3, overlay.Params{Successors: 3})
	w.settle(t, 30*time.Second)
	a, b := w.nodes[0], w.nodes[1]
	for _, query := range []string{b.name, b.node.Self().String(), b.node.Self().String()[:8]} {
		id, ok, err := a.node.ResolveMember(query)
		if err != nil || !ok || id != b.node.Self() {
			t.Errorf("ResolveMember(%q) = %v %v %v, want %s", query, id.Short(), ok, err, b.node.Self().Short())
		}
	}
	if _, ok, err := a.node.ResolveMember("nobody"); ok || err != nil {
		t.Errorf("an unknown name resolved: %v %v", ok, err)
	}
	if _, ok, err := a.node.ResolveMember("10.99.0.1"); ok || err != nil {
		t.Errorf("an unknown address resolved: %v %v", ok, err)
	}
}

// A member with no link is found by name within a few round trips of the
// topology crawl, as `burrow ping NAME` looks for it.
func TestResolveMemberFarAwayByName(t *testing.T) {
	w := newOverlayNet(t, 12, 5, overlay.Params{Successors: 1})
	w.settle(t, 60*time.Second)
	w.quiet(t, 10*time.Second, 2*time.Minute)
	a := w.nodes[0]
	var far *testNode
	for _, b := range w.nodes[1:] {
		if a.node.upLink(b.node.Self()) == nil {
			far = b
		}
	}
	start := w.now
	for {
		id, ok, err := a.node.ResolveMember(far.name)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if id != far.node.Self() {
				t.Fatalf("%s resolved to %s", far.name, id.Short())
			}
			break
		}
		if w.now.Sub(start) > 20*time.Second {
			t.Fatalf("%s not found by name after %v", far.name, w.now.Sub(start))
		}
		a.node.CrawlTopology(w.now)
		w.drain()
		w.advance(100*time.Millisecond, 100*time.Millisecond)
	}
	t.Logf("found %s by name after %v", far.name, w.now.Sub(start))
}
