package link

import (
	"strings"
	"testing"
	"time"
)

// sendTraffic does for l what the data path does while it sends data
// every step: it marks each send, sends the probes that are due and
// reports a suspect link to the Manager, once.
func sendTraffic(m *Manager, l *Link, now time.Time) {
	if l.Counters.SentData(now.UnixNano()) {
		m.Probe(l, now)
	}
	if l.Counters.Suspect(now.UnixNano()) && l.Counters.ReportSuspect() {
		m.Suspect(l, now)
	}
}

func TestSilentPeerUnderTrafficGoesDownInWellUnderASecond(t *testing.T) {
	w, a, b, la, now := linkedPair(t, Timers{})
	start := now
	w.drop = func(d datagram) bool { return d.from == b.addr } // b dies
	for now.Sub(start) < 2*time.Second && len(a.downs) == 0 {
		now = now.Add(5 * time.Millisecond)
		sendTraffic(a.m, la, now)
		a.m.Tick(now)
		w.run(now)
	}
	if len(a.downs) != 1 || !strings.HasPrefix(a.downs[0], "no answer to probes") || !la.Unanswered() {
		t.Fatalf("downs %q, want one for unanswered probes", a.downs)
	}
	if took := now.Sub(start); took > time.Second || took < downFloor {
		t.Fatalf("went down %v after the peer died; want between %v and a second (DeadAfter is %v)", took, downFloor, a.m.Timers().DeadAfter)
	}
	if len(a.health) == 0 || !a.health[0] {
		t.Fatalf("the link was never reported suspect: %v", a.health)
	}
}

func TestAnsweringPeerStaysUpUnderOneWayTraffic(t *testing.T) {
	w, a, _, la, now := linkedPair(t, Timers{})
	answered := la.Counters.RxPackets.Load()
	for range 2000 { // 10 s of a packet every 5 ms, never answered by data
		now = now.Add(5 * time.Millisecond)
		sendTraffic(a.m, la, now)
		a.m.Tick(now)
		w.run(now)
	}
	if len(a.downs) != 0 || len(a.health) != 0 {
		t.Fatalf("a live peer was taken down or suspected: downs %q, health %v", a.downs, a.health)
	}
	if la.Counters.RxPackets.Load() == answered {
		t.Fatalf("no probe was sent or answered")
	}
}

func TestSuspectLinkRecoversWhenThePeerAnswersAgain(t *testing.T) {
	w, a, b, la, now := linkedPair(t, Timers{})
	silent := true
	w.drop = func(d datagram) bool { return silent && d.from == b.addr }
	for range 10 { // 50 ms: long enough to suspect, too short to give up
		now = now.Add(5 * time.Millisecond)
		sendTraffic(a.m, la, now)
		a.m.Tick(now)
		w.run(now)
	}
	if !la.Suspect() {
		t.Fatal("a peer silent for 50 ms under traffic was not suspected")
	}
	silent = false
	for range 40 {
		now = now.Add(5 * time.Millisecond)
		a.m.Tick(now)
		w.run(now)
	}
	if la.Suspect() || len(a.downs) != 0 {
		t.Fatalf("the peer answered, but the link is suspect %v, downs %q", la.Suspect(), a.downs)
	}
	if len(a.health) != 2 || !a.health[0] || a.health[1] {
		t.Fatalf("health changes %v, want suspect then healthy", a.health)
	}
}

func TestIdleLinkSendsNoProbes(t *testing.T) {
	w, a, _, la, now := linkedPair(t, Timers{})
	sent := la.Counters.TxPackets.Load()
	for range 100 { // 10 s idle
		now = now.Add(100 * time.Millisecond)
		a.m.Tick(now)
		w.run(now)
	}
	keepalives := la.Counters.TxPackets.Load() - sent
	if max := uint64(10*time.Second/a.m.Timers().Keepalive) + 1; keepalives > max {
		t.Fatalf("an idle link sent %d messages in 10 s, more than its %d keepalives", keepalives, max)
	}
}

func TestRestartedPeerIsDownThenUp(t *testing.T) {
	w, a, b := pair(t, Timers{})
	b.m.cfg.Handshake.Boot = 1
	now := time.Unix(1000, 0)
	b.m.AddDial([]Endpoint{UDPEndpoint(a.addr)}, DialOptions{}, now)
	b.m.Tick(now)
	w.run(now)
	first := a.m.Links()[b.m.Self()]
	if first == nil || !first.Up() {
		t.Fatal("no link to b")
	}
	// b restarts at once: same key and address, a new boot, and a new
	// handshake long before a could notice any silence.
	now = now.Add(100 * time.Millisecond)
	b2 := newTestNode(t, "b", 2, 2, trustedNames{"a": a.m.cfg.Handshake.Public}, Timers{})
	b2.m.cfg.Handshake.Boot = 2
	w.nodes[b.addr] = b2
	b2.m.AddDial([]Endpoint{UDPEndpoint(a.addr)}, DialOptions{}, now)
	b2.m.Tick(now)
	w.run(now)
	second := a.m.Links()[b2.m.Self()]
	if len(a.downs) != 1 || a.downs[0] != "peer restarted" {
		t.Fatalf("downs %q, want the restart seen as a down", a.downs)
	}
	if second == nil || second == first || !second.Up() || second.Port == first.Port || len(a.ups) != 2 {
		t.Fatalf("after the restart: link %+v (first on port %d), ups %d; want a new link on a new port", second, first.Port, len(a.ups))
	}
	// A rekey from the same incarnation is not a restart.
	now = now.Add(time.Second)
	b2.m.AddDial([]Endpoint{UDPEndpoint(a.addr)}, DialOptions{}, now)
	b2.m.Tick(now)
	w.run(now)
	if len(a.downs) != 1 || a.m.Links()[b2.m.Self()] != second {
		t.Fatalf("a second handshake of the same boot took the link down: downs %q", a.downs)
	}
}

// A probe is answered, and data goes out again at the same instant (the
// data path reads the clock once per batch): the new wait's silence has
// had no probe yet, so it is not suspect once suspectAfter has passed
// with the peer quiet; it sends a probe of its own first.
func TestAnAnsweredProbeDoesNotCountForTheNextWait(t *testing.T) {
	w, a, _, la, now := linkedPair(t, Timers{})
	answered := la.Counters.RxPackets.Load()
	for la.Counters.RxPackets.Load() == answered {
		now = now.Add(5 * time.Millisecond)
		sendTraffic(a.m, la, now)
		w.run(now)
	}
	if la.Counters.SentData(now.UnixNano()) {
		t.Fatal("a probe is due the instant the peer answered")
	}
	_, suspectAfter, _ := la.Counters.health.thresholds()
	if later := now.Add(2 * suspectAfter); la.Counters.Suspect(later.UnixNano()) {
		t.Fatalf("suspect %v after the peer answered, with no probe sent since", later.Sub(now))
	}
}
