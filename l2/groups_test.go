package l2

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
)

var reportHost = MAC{2, 0, 0, 0, 0, 7}

// igmpFrame wraps an IGMP message from reportHost in IPv4 with a router
// alert option, to dst.
func igmpFrame(dst netip.Addr, msg []byte) []byte {
	b := (Ethernet{Dst: MAC{0x01, 0x00, 0x5e, 0, 0, 0x16}, Src: reportHost, EtherType: EtherTypeIPv4}).AppendHeader(nil)
	ip := len(b)
	d := dst.As4()
	b = append(b, 0x46, 0xc0, 0, byte(24+len(msg)), 0, 0, 0x40, 0, 1, protoIGMP, 0, 0, 10, 0, 0, 7, d[0], d[1], d[2], d[3], 0x94, 0x04, 0, 0)
	binary.BigEndian.PutUint16(b[ip+10:], IPv4HeaderChecksum(b[ip:]))
	return append(b, msg...)
}

// mldFrame wraps an MLD message in IPv6 with a hop-by-hop router alert.
func mldFrame(msg []byte) []byte {
	b := (Ethernet{Dst: MAC{0x33, 0x33, 0, 0, 0, 0x16}, Src: reportHost, EtherType: EtherTypeIPv6}).AppendHeader(nil)
	b = append(b, 6<<4, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(8+len(msg)))
	b = append(b, protoHopOpt, 1)
	src, dst := netip.MustParseAddr("fe80::7").As16(), netip.MustParseAddr("ff02::16").As16()
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	b = append(b, protoICMPv6, 0, 5, 2, 0, 0, 1, 0)
	return append(b, msg...)
}

// record is an IGMPv3 or MLDv2 group record without sources.
func record(kind byte, group netip.Addr, sources int) []byte {
	b := append([]byte{kind, 0}, byte(sources>>8), byte(sources))
	b = append(b, group.AsSlice()...)
	for range sources {
		b = append(b, group.AsSlice()...) // any address of the family
	}
	return b
}

func TestParseGroupReport(t *testing.T) {
	g1, g2 := netip.MustParseAddr("239.1.1.1"), netip.MustParseAddr("239.2.2.2")
	v6a, v6b := netip.MustParseAddr("ff05::1:3"), netip.MustParseAddr("ff0e::42")
	igmpV3 := append([]byte{0x22, 0, 0, 0, 0, 0, 0, 3}, record(4, g1, 0)...)
	igmpV3 = append(igmpV3, record(3, g2, 0)...)
	igmpV3 = append(igmpV3, record(1, g2, 1)...)
	mldV2 := append([]byte{icmpMLDv2Report, 0, 0, 0, 0, 0, 0, 2}, record(2, v6a, 0)...)
	mldV2 = append(mldV2, record(3, v6b, 0)...)
	for _, c := range []struct {
		name         string
		frame        []byte
		joined, left []netip.Addr
	}{
		{"IGMPv2 report", igmpFrame(g1, append([]byte{0x16, 0, 0, 0}, g1.AsSlice()...)), []netip.Addr{g1}, nil},
		{"IGMPv2 leave", igmpFrame(netip.MustParseAddr("224.0.0.2"), append([]byte{0x17, 0, 0, 0}, g1.AsSlice()...)), nil, []netip.Addr{g1}},
		{"IGMPv3 report", igmpFrame(netip.MustParseAddr("224.0.0.22"), igmpV3), []netip.Addr{g1, g2}, []netip.Addr{g2}},
		{"MLDv1 report", mldFrame(append([]byte{icmpMLDv1Report, 0, 0, 0, 0, 0, 0, 0}, v6a.AsSlice()...)), []netip.Addr{v6a}, nil},
		{"MLDv1 done", mldFrame(append([]byte{icmpMLDv1Done, 0, 0, 0, 0, 0, 0, 0}, v6a.AsSlice()...)), nil, []netip.Addr{v6a}},
		{"MLDv2 report", mldFrame(mldV2), []netip.Addr{v6a}, []netip.Addr{v6b}},
	} {
		r, err := ParseGroupReport(c.frame)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if r.Host != reportHost || !slices.Equal(r.Joined, c.joined) || !slices.Equal(r.Left, c.left) {
			t.Errorf("%s: host %v joined %v left %v, want %v %v", c.name, r.Host, r.Joined, r.Left, c.joined, c.left)
		}
		if !AnnouncesAddress(c.frame) {
			t.Errorf("%s: not taken for an announcement", c.name)
		}
	}
	for name, f := range map[string][]byte{
		"IGMP query":       AppendIGMPQuery(nil, reportHost, 100),
		"MLD query":        AppendMLDQuery(nil, reportHost, netip.MustParseAddr("fe80::1"), 10000),
		"IPv4 group in v6": mldFrame(append([]byte{icmpMLDv1Report, 0, 0, 0, 0, 0, 0, 0}, netip.MustParseAddr("::ffff:239.1.1.1").AsSlice()...)),
		"truncated v3":     igmpFrame(netip.MustParseAddr("224.0.0.22"), igmpV3[:20]),
	} {
		if r, err := ParseGroupReport(f); err == nil {
			t.Errorf("%s parsed as a report: %+v", name, r)
		}
	}
}

func TestGeneralQueries(t *testing.T) {
	igmp := AppendIGMPQuery(nil, reportHost, 100)
	p, err := parseIP(igmp)
	if err != nil || Checksum(igmp[p.ipOff:p.l4Off], 0) != 0 || igmp[p.ipOff+8] != 1 || p.l4Off-p.ipOff != 24 {
		t.Fatalf("IGMP query's IP header (TTL 1, router alert): %v %x", err, igmp[p.ipOff:p.l4Off])
	}
	msg := igmp[p.l4Off:p.end]
	// An IGMPv3 query (12 bytes) for every group (0.0.0.0), answer within 10 s.
	if len(msg) != 12 || msg[0] != igmpQuery || msg[1] != 100 || binary.BigEndian.Uint32(msg[4:8]) != 0 || Checksum(msg, 0) != 0 {
		t.Fatalf("IGMP query: %x", msg)
	}
	src := netip.MustParseAddr("fe80::a:1")
	mld := AppendMLDQuery(nil, reportHost, src, 10000)
	icmp, ipv6, ok := groupPacket(mld)
	if !ok || !ipv6 || len(icmp) != 28 || icmp[0] != icmpMLDQuery || mld[14+7] != 1 {
		t.Fatalf("MLD query: %x", mld)
	}
	ip := mld[14:]
	if netip.AddrFrom16([16]byte(ip[8:24])) != src || Checksum(icmp, PseudoHeaderSum(ip[8:24], ip[24:40], protoICMPv6, len(icmp))) != 0 {
		t.Fatal("MLD query source or checksum")
	}
	// An MLDv2 query for every group (::), answer within 10,000 ms.
	if binary.BigEndian.Uint16(icmp[4:6]) != 10000 || !netip.AddrFrom16([16]byte(icmp[8:24])).IsUnspecified() {
		t.Fatalf("MLD query: %x", icmp)
	}
}

func TestSnoopedGroup(t *testing.T) {
	frameTo := func(dst netip.Addr) []byte {
		if dst.Is4() {
			return igmpFrame(dst, []byte{0x16, 0, 0, 0, 0, 0, 0, 0})
		}
		f := mldFrame(nil)
		copy(f[14+24:], dst.AsSlice())
		return f
	}
	for addr, want := range map[string]bool{"239.1.1.1": true, "224.0.0.251": false, "224.0.1.1": true, "ff05::1": true, "ff02::fb": false, "ff01::1": false, "ff0e::1": true} {
		a := netip.MustParseAddr(addr)
		if g, got := SnoopedGroup(frameTo(a)); got != want || got && g != a {
			t.Errorf("%s: %v %v, want %v", addr, g, got, want)
		}
	}
	for addr, want := range map[string]bool{"239.1.1.1": true, "224.0.0.22": false, "ff02::1:ff00:7": false, "ff05::2": true, "10.0.0.1": false} {
		if got := IsSnooped(netip.MustParseAddr(addr)); got != want {
			t.Errorf("IsSnooped(%s) = %v, want %v", addr, got, want)
		}
	}
	unicast := igmpFrame(netip.MustParseAddr("239.1.1.1"), make([]byte, 8))
	unicast[0] = 2
	if _, ok := SnoopedGroup(unicast); ok {
		t.Error("a unicast frame is snooped")
	}
}

func FuzzParseGroupReport(f *testing.F) {
	g := netip.MustParseAddr("239.1.1.1")
	f.Add(igmpFrame(g, append([]byte{0x16, 0, 0, 0}, g.AsSlice()...)))
	f.Add(igmpFrame(g, append([]byte{0x22, 0, 0, 0, 0, 0, 0, 1}, record(4, g, 1)...)))
	f.Add(mldFrame(append([]byte{icmpMLDv2Report, 0, 0, 0, 0, 0, 0, 1}, record(2, netip.MustParseAddr("ff05::1"), 1)...)))
	f.Add(AppendMLDQuery(nil, reportHost, netip.MustParseAddr("fe80::1"), 10000))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseGroupReport(b)
		if err != nil {
			return
		}
		for _, a := range append(slices.Clone(r.Joined), r.Left...) {
			if !a.IsMulticast() || a.Is4() == r.IPv6 {
				t.Fatalf("reported %v (IPv6 %v)", a, r.IPv6)
			}
		}
		SnoopedGroup(b)
	})
}
