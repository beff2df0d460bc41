package node

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"burrow/overlay"
)

func TestSettingsAreCheckedAndNamed(t *testing.T) {
	var s NetworkSettings
	for _, c := range [][2]string{{"mtu", "1400"}, {"dns_search", "corp.example"}, {"router", "10.99.0.1"}, {"route:10.20.0.0/16", "10.99.0.7"}} {
		if err := s.Set(c[0], c[1]); err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
	}
	if err := s.valid(); err != nil {
		t.Fatal(err)
	}
	o := s.dhcpOptions()
	if o.MTU != 1400 || o.DomainSearch != "corp.example" || o.Router != netip.MustParseAddr("10.99.0.1") ||
		len(o.Routes) != 1 || o.Routes[0].Prefix != netip.MustParsePrefix("10.20.0.0/16") || o.Routes[0].Via != netip.MustParseAddr("10.99.0.7") {
		t.Fatalf("DHCP options %+v", o)
	}
	for _, c := range [][3]string{
		{"mtu", "90000", "mtu:"}, {"mtu", "big", "mtu:"}, {"dns_search", "not a domain", "dns_search:"},
		{"router", "fd00::1", "router:"}, {"route:10.20.0.1/16", "10.99.0.7", "route:10.20.0.1/16"},
		{"route:0.0.0.0/0", "10.99.0.7", "router setting"}, {"route:10.20.0.0/16", "nowhere", "gateway"},
		{"colour", "blue", "not a setting"},
	} {
		before := s
		if err := s.Set(c[0], c[1]); err == nil || !strings.Contains(err.Error(), c[2]) {
			t.Errorf("%s %s: %v, want an error naming %q", c[0], c[1], err, c[2])
		}
		if s.MTU != before.MTU || s.DNSSearch != before.DNSSearch || s.Router != before.Router || len(s.Routes) != len(before.Routes) {
			t.Errorf("%s %s: a refused value changed the settings", c[0], c[1])
		}
	}
	for _, name := range []string{"mtu", "route:10.20.0.0/16"} {
		if err := s.Set(name, ""); err != nil {
			t.Fatal(err)
		}
	}
	if s.MTU != 0 || len(s.Routes) != 0 {
		t.Fatalf("after unsetting: %+v", s)
	}
	// A record read from the DHT is held to the same rules.
	if err := (NetworkSettings{MTU: 70000}).valid(); err == nil {
		t.Error("a record with an MTU of 70000 passed")
	}
	if err := (NetworkSettings{Routes: map[string]string{"10.0.0.0/8": "fd00::1"}}).valid(); err == nil {
		t.Error("a record with an IPv6 gateway passed")
	}
}

// Every node reads the one settings record: the period grows with the
// network, so that all reads together stay near one a second, and stays
// well inside the record's lease.
func TestSettingsPollGrowsWithTheNetwork(t *testing.T) {
	for _, c := range []struct {
		size float64
		want time.Duration
	}{
		{1, settingsPoll},
		{30, settingsPoll},
		{1000, 1000 * time.Second},
		{1e6, settingsTTL / 8},
	} {
		if got := settingsPollEvery(c.size); got != c.want {
			t.Errorf("settingsPollEvery(%v) = %v, want %v", c.size, got, c.want)
		}
	}
}

// A read of the settings that no holder answers (a network still forming,
// or holders too busy) is tried again within seconds, not a whole poll
// period later: a change made meanwhile would wait that long.
func TestSettingsReadThatFailedIsRetriedSoon(t *testing.T) {
	w := newOverlayNet(t, 4, 47, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	lone := w.nodes[0]
	w.stalled = map[*testNode]bool{} // linked still, but answering nothing
	for _, n := range w.nodes[1:] {
		w.stalled[n] = true
	}
	lone.node.settings.lastRead = time.Time{} // a read is due
	retries := settingsReads(w, lone, settingsPoll) - 1
	if retries < 2 {
		t.Fatalf("with every holder gone, a node retried reading the settings %d times in %v, want at least 2", retries, settingsPoll)
	}
}

// The next read of the settings follows the size estimate of when it is
// due, not of the last read: a node that read while its estimate was a
// first guess (every node, in a cold start) waits as long as the network
// it turned out to be in says. A read no holder answered comes sooner.
func TestTheNextSettingsReadFollowsTheSizeEstimate(t *testing.T) {
	if due := (&settingsState{}).due(1000); !due.IsZero() {
		t.Fatalf("a node that never read the settings reads them at %v, want at once", due)
	}
	read := time.Unix(1_000_000, 0)
	st := settingsState{lastRead: read, share: 0.5}
	for _, c := range []struct {
		size float64
		want time.Duration
	}{{10, settingsPoll / 2}, {1000, 500 * time.Second}} {
		if got := st.due(c.size).Sub(read); got != c.want {
			t.Errorf("at a size estimate of %v the next read is %v after the last, want %v", c.size, got, c.want)
		}
	}
	st.retryAt = read.Add(settingsRetry)
	if got := st.due(1000); !got.Equal(st.retryAt) {
		t.Errorf("after a failed read the next is at %v, want the retry at %v", got, st.retryAt)
	}
}

// A read of the settings answered before the node had its place on the
// ring may have asked nodes that hold no copy, as in a cold start, where
// every node reads at once: it is read again within seconds, and only an
// answer read once the node settled holds for a poll period.
func TestASettingsReadBeforeTheNodeSettledIsReadAgainSoon(t *testing.T) {
	w := newOverlayNet(t, 1, 48, overlay.Params{Successors: 2, LongDistance: 1})
	st := &w.nodes[0].node.settings
	reads := settingsReads(w, w.nodes[0], settingsPoll)
	if !w.nodes[0].node.ov.formation.settled.IsZero() {
		t.Fatal("a node alone settled")
	}
	if reads < 3 {
		t.Fatalf("a node that never settled read the settings %d times in %v, want at least 3", reads, settingsPoll)
	}
	w.add("second", 49, OverlayConfig{Params: overlay.Params{Successors: 2, LongDistance: 1}, Bootstrap: []netip.AddrPort{w.nodes[0].addr}})
	w.settle(t, 60*time.Second)
	st.lastRead = time.Time{} // a read is due
	w.advance(time.Second, 100*time.Millisecond)
	read := st.lastRead
	w.advance(settingsPoll/2-2*time.Second, 100*time.Millisecond)
	if st.lastRead != read {
		t.Fatalf("a settled node read the settings again %v after reading them", st.lastRead.Sub(read))
	}
}

// settingsReads advances the network by d in 100 ms steps and counts the
// reads of the settings n began meanwhile.
func settingsReads(w *testNet, n *testNode, d time.Duration) int {
	st := &n.node.settings
	reads, last := 0, st.lastRead
	for range int(d / (100 * time.Millisecond)) {
		w.advance(100*time.Millisecond, 100*time.Millisecond)
		if st.lastRead != last {
			reads, last = reads+1, st.lastRead
		}
	}
	return reads
}
