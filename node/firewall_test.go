package node

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"burrow/firewall"
	"burrow/l2"
	"burrow/overlay"
)

// tcpFrame is an Ethernet frame with an IPv4 TCP segment ending in payload.
func tcpFrame(dst, src l2.MAC, from, to netip.Addr, sport, dport uint16, payload string) []byte {
	f := append(append(append([]byte{}, dst[:]...), src[:]...), 0x08, 0x00)
	ip := make([]byte, 20+20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(ip)+len(payload)))
	ip[8], ip[9] = 64, 6
	a, b := from.As4(), to.As4()
	copy(ip[12:16], a[:])
	copy(ip[16:20], b[:])
	binary.BigEndian.PutUint16(ip[20:22], sport)
	binary.BigEndian.PutUint16(ip[22:24], dport)
	ip[32] = 5 << 4
	return append(append(f, ip...), payload...)
}

// TestFirewallAdmitsOnlyTheGroupOnBothPaths: db's firewall lets TCP 5432
// in from group app only. The first segments cross as floods and through
// the core, the later ones on installed flows in the data path: a member of
// app gets through both ways (db's answers pass as part of the
// connection, with no outbound rule), a member of web does not.
func TestFirewallAdmitsOnlyTheGroupOnBothPaths(t *testing.T) {
	fw := firewall.New(firewall.Policy{Inbound: []firewall.Rule{
		{Proto: firewall.ProtoTCP, FirstPort: 5432, LastPort: 5432, Groups: []string{"app"}, ICMPType: firewall.AnyICMPType},
	}})
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{},
		groups: map[string][]string{"app": {"app"}, "web": {"web"}}, firewalls: map[string]*firewall.Firewall{"db": fw}}
	db := w.add("db", 71, OverlayConfig{Disabled: true})
	app := w.add("app", 72, OverlayConfig{Disabled: true})
	web := w.add("web", 73, OverlayConfig{Disabled: true})
	w.connect(0, 1)
	w.connect(0, 2)
	w.advance(time.Second, 100*time.Millisecond)
	dbIP, appIP, webIP := netip.MustParseAddr("10.9.0.5"), netip.MustParseAddr("10.9.0.7"), netip.MustParseAddr("10.9.0.8")
	for i := range 4 {
		app.fromTAP(tcpFrame(db.mac, app.mac, appIP, dbIP, 40000, 5432, "query"))
		web.fromTAP(tcpFrame(db.mac, web.mac, webIP, dbIP, 40001, 5432, "intrusion"))
		db.fromTAP(tcpFrame(app.mac, db.mac, dbIP, appIP, 5432, 40000, "rows"))
		if got := db.countTAP("query"); got != i+1 {
			t.Fatalf("round %d: db got %d queries from app, want %d", i, got, i+1)
		}
		if got := app.countTAP("rows"); got != i+1 {
			t.Fatalf("round %d: app got %d answers from db, want %d", i, got, i+1)
		}
	}
	if got := db.countTAP("intrusion"); got != 0 {
		t.Fatalf("db's TAP got %d segments from web", got)
	}
	st := db.node.Status().Firewall
	if st == nil || st.Dropped != 4 || st.Connections != 1 || st.InboundRules != 1 {
		t.Fatalf("db's firewall status %+v: want 4 dropped, 1 connection, 1 inbound rule", st)
	}
	if flows := db.handed[EventFromLink]; flows == 0 {
		t.Fatal("no frame went through db's core: the test did not cover the slow path")
	}
}

// TestAMemberCannotUseAnothersCertifiedAddress: v's certificate fixes
// 10.9.0.2. m announces that address by ARP and sends IPv4 from it, to
// another member n: n's TAP gets none of it and counts it as spoofed; v's
// own announcement and packets pass. Frames from m with v's TAP MAC fare
// the same.
func TestAMemberCannotUseAnothersCertifiedAddress(t *testing.T) {
	vIP, nIP := netip.MustParseAddr("10.9.0.2"), netip.MustParseAddr("10.9.0.3")
	vIP6 := netip.MustParseAddr("fd09::2")
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{},
		addresses: map[string][]netip.Prefix{"v": {netip.PrefixFrom(vIP, 24), netip.PrefixFrom(vIP6, 64)}}}
	v := w.add("v", 81, OverlayConfig{Disabled: true})
	m := w.add("m", 82, OverlayConfig{Disabled: true})
	n := w.add("n", 83, OverlayConfig{Disabled: true})
	w.connect(0, 1)
	w.connect(0, 2)
	w.connect(1, 2)
	w.advance(time.Second, 100*time.Millisecond)
	n.fromTAP(ethFrame(l2.Broadcast, n.mac, "n is here")) // everyone learns n's MAC
	for range 3 {
		m.fromTAP(arpFrame(l2.ARPRequest, m.mac, vIP, l2.MAC{}, vIP))
		m.fromTAP(tcpFrame(n.mac, m.mac, vIP, nIP, 40000, 22, "as v"))
	}
	v.fromTAP(arpFrame(l2.ARPRequest, v.mac, vIP, l2.MAC{}, vIP))
	v.fromTAP(tcpFrame(n.mac, v.mac, vIP, nIP, 40000, 22, "really v"))
	var fromM, fromV int
	for _, f := range n.tap {
		switch l2.MAC(f[6:12]) {
		case m.mac:
			fromM++
		case v.mac:
			fromV++
		}
	}
	if fromM != 0 || fromV != 2 {
		t.Fatalf("n's TAP got %d frames from m using v's address (want 0) and %d from v (want 2)", fromM, fromV)
	}
	if got := n.node.Stats().Drops()["spoofed"]; got != 6 {
		t.Fatalf("n counted %d spoofed frames, want 6", got)
	}
	// v's TAP MAC, which its ID gives it, is v's too.
	vMAC := MACFor(v.node.Self())
	m.fromTAP(ethFrame(l2.Broadcast, vMAC, "as v's TAP"))
	m.fromTAP(ethFrame(n.mac, vMAC, "as v's TAP"))
	if got := n.countTAP("as v's TAP"); got != 0 {
		t.Fatalf("n's TAP got %d frames from m with v's MAC", got)
	}
	if got := n.node.Stats().Drops()["spoofed"]; got != 8 {
		t.Fatalf("n counted %d spoofed frames, want 8", got)
	}
	// A neighbour advertisement claims its target address, whatever its
	// source: m's, from m's own link-local address, for v's certified
	// IPv6 address, is spoofed; v's own passes.
	advertise := func(from *testNode, src netip.Addr) {
		na := &ndp.NeighborAdvertisement{Override: true, TargetAddress: vIP6,
			Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: net.HardwareAddr(from.mac[:])}}}
		frame, err := l2.AppendND(nil, l2.ND{Eth: l2.Ethernet{Dst: l2.MAC{0x33, 0x33, 0, 0, 0, 1}, Src: from.mac},
			Src: src, Dst: netip.MustParseAddr("ff02::1"), Message: na})
		if err != nil {
			t.Fatal(err)
		}
		from.fromTAP(frame)
	}
	advertised := func() (count int) {
		for _, f := range n.tap {
			if target, ok := l2.AdvertisedAddr(f); ok && target == vIP6 {
				count++
			}
		}
		return count
	}
	advertise(m, netip.MustParseAddr("fe80::82"))
	if got, spoofed := advertised(), n.node.Stats().Drops()["spoofed"]; got != 0 || spoofed != 9 {
		t.Fatalf("n's TAP got %d of m's advertisements of v's address (want 0), %d frames counted spoofed (want 9)", got, spoofed)
	}
	advertise(v, netip.MustParseAddr("fe80::81"))
	if got := advertised(); got != 1 {
		t.Fatalf("n's TAP got %d of v's advertisements of its own address, want 1", got)
	}
}

// A frame the firewall refuses in the data path for want of its sender's
// certificate (a rule names a group, and no link to the sender's bridge
// is up) has the node ask that bridge for a link, as a refusal in the
// core does: the sender's next try then matches the rule. Here the first
// frame, which nothing refuses, installs the flow; the first TCP segment
// on it is refused by the data path.
func TestARefusalInTheDataPathForWantOfACertificateAsksForALink(t *testing.T) {
	policy := firewall.Policy{OtherEthertypes: true, Inbound: []firewall.Rule{
		{Proto: firewall.ProtoTCP, FirstPort: 5432, LastPort: 5432, Groups: []string{"app"}, ICMPType: firewall.AnyICMPType},
	}, Outbound: []firewall.Rule{{Proto: firewall.ProtoAny, ICMPType: firewall.AnyICMPType}}}
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{},
		groups: map[string][]string{}, firewalls: map[string]*firewall.Firewall{}}
	var first netip.AddrPort
	for i := range 8 {
		name := fmt.Sprintf("n%d", i)
		w.groups[name], w.firewalls[name] = []string{"app"}, firewall.New(policy)
		cfg := OverlayConfig{Params: overlay.Params{Successors: 1}, OnDemand: OnDemandConfig{Enabled: true}}
		if i > 0 {
			cfg.Bootstrap = []netip.AddrPort{first}
		}
		if n := w.add(name, 1100+uint64(i), cfg); i == 0 {
			first = n.addr
		}
	}
	w.settle(t, 30*time.Second)
	w.quiet(t, 5*time.Second, 2*time.Minute)
	live := w.live()
	app, db := live[1], live[4] // two steps apart at least: no link between them
	if db.node.upLink(app.node.Self()) != nil {
		t.Fatalf("%s and %s keep a link: the ring does not test what it should", app.name, db.name)
	}
	appIP, dbIP := netip.MustParseAddr("10.9.0.7"), netip.MustParseAddr("10.9.0.5")
	db.fromTAP(ethFrame(l2.Broadcast, db.mac, "db is here"))
	app.fromTAP(ethFrame(db.mac, app.mac, "hello"))
	if db.countTAP("hello") != 1 {
		t.Fatalf("%s did not get the frame that installs the flow", db.name)
	}
	if db.node.upLink(app.node.Self()) != nil {
		t.Fatal("a frame the firewall let through opened a link")
	}
	handed := db.handed[EventUncertified]
	app.fromTAP(tcpFrame(db.mac, app.mac, appIP, dbIP, 40000, 5432, "syn"))
	if db.countTAP("syn") != 0 {
		t.Fatalf("%s's firewall let a segment through from a member it has no certificate of", db.name)
	}
	if db.handed[EventUncertified] == handed {
		t.Fatalf("%s's data path refused the segment without telling the core", db.name)
	}
	w.advance(time.Second, 50*time.Millisecond)
	if db.node.upLink(app.node.Self()) == nil {
		t.Fatalf("%s asked %s for no link after refusing its segment", db.name, app.name)
	}
	app.fromTAP(tcpFrame(db.mac, app.mac, appIP, dbIP, 40000, 5432, "syn again"))
	if db.countTAP("syn again") != 1 {
		t.Fatalf("%s refused the segment again with a link to %s up", db.name, app.name)
	}
}
