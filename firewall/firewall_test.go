package firewall

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"burrow/l2"
)

var (
	dbAddr  = netip.MustParseAddr("10.9.0.5")
	appAddr = netip.MustParseAddr("10.9.0.7")
	app     = Member{Name: "app1", Groups: []string{"app", "prod"}}
	web     = Member{Name: "web1", Groups: []string{"web", "prod"}}
)

// ipv4 builds an Ethernet frame with an IPv4 packet of proto whose first
// payload bytes are l4.
func ipv4(src, dst netip.Addr, proto uint8, l4 []byte) []byte {
	f := make([]byte, 14+20)
	binary.BigEndian.PutUint16(f[12:14], uint16(l2.EtherTypeIPv4))
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(20+len(l4)))
	ip[8], ip[9] = 64, proto
	s, d := src.As4(), dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	return append(f, l4...)
}

func ipv6(src, dst netip.Addr, proto uint8, l4 []byte) []byte {
	f := make([]byte, 14+40)
	binary.BigEndian.PutUint16(f[12:14], uint16(l2.EtherTypeIPv6))
	ip := f[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(l4)))
	ip[6], ip[7] = proto, 64
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	return append(f, l4...)
}

func ports(sport, dport uint16) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b[0:2], sport)
	binary.BigEndian.PutUint16(b[2:4], dport)
	return b
}

func tcp(src, dst netip.Addr, sport, dport uint16) []byte {
	return ipv4(src, dst, ipProtoTCP, ports(sport, dport))
}

func echo(src, dst netip.Addr, typ uint8, id uint16) []byte {
	b := []byte{typ, 0, 0, 0, 0, 0, 0, 1}
	binary.BigEndian.PutUint16(b[4:6], id)
	return ipv4(src, dst, ipProtoICMP, b)
}

const sec = int64(time.Second)

// dbPolicy is the example: TCP 5432 only from group app; the node
// itself may reach anyone.
func dbPolicy() Policy {
	return Policy{
		Inbound:  []Rule{{Proto: ProtoTCP, FirstPort: 5432, LastPort: 5432, Groups: []string{"app"}, ICMPType: AnyICMPType}},
		Outbound: []Rule{{ICMPType: AnyICMPType}},
	}
}

func TestGroupRuleLetsOnlyItsGroupInAndRepliesOut(t *testing.T) {
	f := New(Policy{Inbound: dbPolicy().Inbound}) // no outbound rule: replies pass only as part of a connection
	now := 100 * sec
	if !f.Allow(Inbound, tcp(appAddr, dbAddr, 40000, 5432), app, now) {
		t.Fatal("a member of group app was refused TCP 5432")
	}
	if !f.Allow(Outbound, tcp(dbAddr, appAddr, 5432, 40000), app, now+sec) {
		t.Fatal("the reply of an allowed connection was refused")
	}
	if f.Allow(Inbound, tcp(appAddr, dbAddr, 40001, 5433), app, now) {
		t.Error("another port was allowed")
	}
	if f.Allow(Inbound, tcp(appAddr, dbAddr, 40002, 5432), web, now) {
		t.Error("a member outside group app was allowed TCP 5432")
	}
	if f.Allow(Inbound, tcp(appAddr, dbAddr, 40003, 5432), Member{}, now) {
		t.Error("an unknown member was allowed by a group rule")
	}
	if f.Allow(Outbound, tcp(dbAddr, appAddr, 5000, 80), app, now) {
		t.Error("a new outbound connection passed with no outbound rule")
	}
	if f.Allow(Inbound, ipv4(appAddr, dbAddr, ipProtoUDP, ports(40000, 5432)), app, now) {
		t.Error("UDP passed a TCP rule")
	}
	if o, d := f.Opened.Load(), f.Dropped.Load(); o != 1 || d != 5 {
		t.Errorf("counted %d connections opened and %d frames dropped, want 1 and 5", o, d)
	}
}

func TestConnectionsCloseWhenIdle(t *testing.T) {
	f := New(Policy{Outbound: []Rule{{Proto: ProtoUDP, ICMPType: AnyICMPType}}, UDPTimeout: 30 * time.Second})
	now := 100 * sec
	f.Allow(Outbound, ipv4(dbAddr, appAddr, ipProtoUDP, ports(5000, 53)), app, now)
	if !f.Allow(Inbound, ipv4(appAddr, dbAddr, ipProtoUDP, ports(53, 5000)), app, now+20*sec) {
		t.Fatal("the answer within the timeout was refused")
	}
	// The answer refreshed the connection: 20 s after it, still open.
	if !f.Allow(Inbound, ipv4(appAddr, dbAddr, ipProtoUDP, ports(53, 5000)), app, now+40*sec) {
		t.Fatal("a connection in use closed")
	}
	if f.Allow(Inbound, ipv4(appAddr, dbAddr, ipProtoUDP, ports(53, 5000)), app, now+71*sec) {
		t.Fatal("a connection idle past its timeout still passed")
	}
	f.Sweep(now + 71*sec)
	if n := f.Connections(); n != 0 {
		t.Fatalf("%d connections after the sweep, want 0", n)
	}
}

func TestEchoRepliesFollowTheirRequests(t *testing.T) {
	f := New(Policy{Outbound: []Rule{{Proto: ProtoICMP, ICMPType: 8}}})
	now := 5 * sec
	if !f.Allow(Outbound, echo(dbAddr, appAddr, 8, 77), web, now) {
		t.Fatal("echo request refused by an ICMP type 8 rule")
	}
	if !f.Allow(Inbound, echo(appAddr, dbAddr, 0, 77), web, now) {
		t.Fatal("echo reply to our request refused")
	}
	if f.Allow(Inbound, echo(appAddr, dbAddr, 0, 78), web, now) {
		t.Error("an echo reply with another identifier passed")
	}
	if f.Allow(Inbound, echo(appAddr, dbAddr, 8, 79), web, now) {
		t.Error("an inbound echo request passed with no inbound rule")
	}
	if f.Allow(Outbound, echo(dbAddr, appAddr, 13, 0), web, now) {
		t.Error("ICMP type 13 passed a type 8 rule")
	}
}

func TestHostAndCIDRRules(t *testing.T) {
	f := New(Policy{Inbound: []Rule{
		{Host: "app1", ICMPType: AnyICMPType},
		{CIDR: netip.MustParsePrefix("10.9.1.0/24"), Proto: ProtoTCP, FirstPort: 22, LastPort: 23, ICMPType: AnyICMPType},
	}})
	now := sec
	if v := f.Explain(Inbound, tcp(appAddr, dbAddr, 1, 9999), app, now); !v.Allowed || v.Rule != 0 {
		t.Errorf("host rule: %+v", v)
	}
	if v := f.Explain(Inbound, tcp(netip.MustParseAddr("10.9.1.4"), dbAddr, 1, 23), web, now); !v.Allowed || v.Rule != 1 {
		t.Errorf("CIDR and port range rule: %+v", v)
	}
	if v := f.Explain(Inbound, tcp(netip.MustParseAddr("10.9.2.4"), dbAddr, 1, 22), web, now); v.Allowed {
		t.Errorf("an address outside the CIDR: %+v", v)
	}
	if f.Connections() != 0 || f.Opened.Load() != 0 {
		t.Error("Explain opened connections or counted")
	}
}

func TestAlwaysAndOtherEthertypes(t *testing.T) {
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:14], uint16(l2.EtherTypeARP))
	ns := ipv6(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::1:ff00:5"), ipProtoICMPv6, []byte{135, 0, 0, 0, 0, 0, 0, 0})
	lldp := make([]byte, 60)
	binary.BigEndian.PutUint16(lldp[12:14], 0x88cc)
	igmp := ipv4(netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("224.0.0.22"), ipProtoIGMP, []byte{0x22, 0, 0, 0, 0, 0, 0, 0})
	mld := ipv6(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::16"), ipProtoICMPv6, []byte{143, 0, 0, 0, 0, 0, 0, 0})
	strict := New(Policy{})
	for name, frame := range map[string][]byte{"ARP": arp, "neighbour solicitation": ns, "IGMP report": igmp, "MLD report": mld} {
		if !strict.Allow(Inbound, frame, Member{}, 0) || !strict.Allow(Outbound, frame, Member{}, 0) {
			t.Errorf("%s did not pass a firewall with no rules", name)
		}
	}
	if strict.Allow(Inbound, lldp, Member{}, 0) {
		t.Error("another ethertype passed with other_ethertypes off")
	}
	if !New(Policy{OtherEthertypes: true}).Allow(Inbound, lldp, Member{}, 0) {
		t.Error("another ethertype refused with other_ethertypes on")
	}
	tagged := tcp(appAddr, dbAddr, 40000, 5432)
	tagged = append(append(append([]byte{}, tagged[:12]...), 0x81, 0x00, 0x00, 0x05), tagged[12:]...)
	if !New(dbPolicy()).Allow(Inbound, tagged, app, 0) {
		t.Error("an 802.1Q-tagged packet was not read through its tag")
	}
	v6 := ipv6(netip.MustParseAddr("fd00::7"), netip.MustParseAddr("fd00::5"), ipProtoTCP, ports(40000, 5432))
	if !New(dbPolicy()).Allow(Inbound, v6, app, 0) {
		t.Error("IPv6 TCP 5432 from group app refused")
	}
}

func TestFragmentsAfterTheFirstMatchOnlyRulesForAnyPort(t *testing.T) {
	frag := tcp(appAddr, dbAddr, 40000, 5432)
	binary.BigEndian.PutUint16(frag[14+6:14+8], 100) // offset 800 bytes
	if New(dbPolicy()).Allow(Inbound, frag, app, 0) {
		t.Error("a later fragment passed a port rule it cannot be checked against")
	}
	if !New(Policy{Inbound: []Rule{{Proto: ProtoTCP, Groups: []string{"app"}, ICMPType: AnyICMPType}}}).Allow(Inbound, frag, app, 0) {
		t.Error("a later fragment refused by a rule for any port")
	}
}

// A new policy applies to connections it no longer allows at their next
// packet; those it still allows go on.
func TestReloadClosesWhatTheNewPolicyRefuses(t *testing.T) {
	f := New(dbPolicy())
	now := sec
	f.Allow(Inbound, tcp(appAddr, dbAddr, 40000, 5432), app, now)
	f.Allow(Outbound, tcp(dbAddr, appAddr, 6000, 443), web, now)
	f.SetPolicy(Policy{Inbound: []Rule{{Proto: ProtoTCP, FirstPort: 5432, LastPort: 5432, Groups: []string{"admins"}, ICMPType: AnyICMPType}},
		Outbound: []Rule{{Proto: ProtoTCP, FirstPort: 443, LastPort: 443, ICMPType: AnyICMPType}}})
	if f.Allow(Outbound, tcp(dbAddr, appAddr, 5432, 40000), app, now+sec) {
		t.Error("a connection the new policy refuses stayed open")
	}
	if !f.Allow(Inbound, tcp(appAddr, dbAddr, 443, 6000), web, now+sec) {
		t.Error("a connection the new policy still allows was closed")
	}
}

func TestConcurrentChecks(t *testing.T) {
	f := New(dbPolicy())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				f.Allow(Inbound, tcp(appAddr, dbAddr, uint16(10000+w*2000+i), 5432), app, int64(i))
				if i%500 == 0 {
					f.SetPolicy(dbPolicy())
					f.Sweep(int64(i))
				}
			}
		}()
	}
	wg.Wait()
	if f.Opened.Load() != 8000 || f.Dropped.Load() != 0 {
		t.Fatalf("opened %d connections of 8000, dropped %d frames", f.Opened.Load(), f.Dropped.Load())
	}
}

func FuzzAllow(f *testing.F) {
	f.Add(tcp(appAddr, dbAddr, 40000, 5432))
	f.Add(echo(appAddr, dbAddr, 8, 1))
	f.Add(ipv6(netip.MustParseAddr("fd00::7"), netip.MustParseAddr("fd00::5"), 44, make([]byte, 16)))
	f.Fuzz(func(t *testing.T, frame []byte) {
		fw := New(dbPolicy())
		in := fw.Allow(Inbound, frame, app, 1)
		if v := fw.Explain(Inbound, frame, app, 2); v.Allowed != in {
			t.Fatalf("Explain after Allow says %+v, Allow said %v", v, in)
		}
	})
}

// The data path checks every frame: deciding allocates nothing, whether
// the frame opens a connection, belongs to one or is dropped.
func TestAllowAllocatesNothing(t *testing.T) {
	f := New(dbPolicy())
	query, answer, intruder := tcp(appAddr, dbAddr, 40000, 5432), tcp(dbAddr, appAddr, 5432, 40000), tcp(appAddr, dbAddr, 40001, 22)
	f.Allow(Inbound, query, app, 1) // the connection's map entry exists from here on
	allocs := testing.AllocsPerRun(1000, func() {
		f.Allow(Inbound, query, app, 2)
		f.Allow(Outbound, answer, app, 2)
		f.Allow(Inbound, intruder, web, 2)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round of three frames", allocs)
	}
}

// BenchmarkAllowConnection is the cost per frame of a connection in use,
// both directions from parallel workers, as the data path checks it.
func BenchmarkAllowConnection(b *testing.B) {
	f := New(dbPolicy())
	query, answer := tcp(appAddr, dbAddr, 40000, 5432), tcp(dbAddr, appAddr, 5432, 40000)
	f.Allow(Inbound, query, app, 1)
	b.RunParallel(func(pb *testing.PB) {
		now := int64(2)
		for pb.Next() {
			now++
			f.Allow(Inbound, query, app, now)
			f.Allow(Outbound, answer, app, now)
		}
	})
}
