package udp4

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"burrow/l2"

	"pgregory.net/rapid"
)

func genDatagram(t *rapid.T) Datagram {
	addr := func(label string) netip.AddrPort {
		b := rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, label)
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b)), rapid.Uint16().Draw(t, label+" port"))
	}
	mac := func(label string) l2.MAC { return l2.MAC(rapid.SliceOfN(rapid.Byte(), 6, 6).Draw(t, label)) }
	return Datagram{
		SrcMAC: mac("src mac"), DstMAC: mac("dst mac"),
		Src: addr("src"), Dst: addr("dst"),
		Payload: rapid.SliceOfN(rapid.Byte(), 0, 600).Draw(t, "payload"),
	}
}

// checksumsValid verifies a built frame the way a receiving kernel does.
func checksumsValid(frame []byte) bool {
	ip := frame[l2.EthernetHeaderLen:]
	if l2.Checksum(ip[:IPv4HeaderLen], 0) != 0 {
		return false
	}
	udp := ip[IPv4HeaderLen:]
	return l2.Checksum(udp, l2.PseudoHeaderSum(ip[12:16], ip[16:20], protoUDP, len(udp))) == 0
}

func TestAppendParseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDatagram(t)
		frame, err := Append(nil, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(frame) != Overhead+len(d.Payload) {
			t.Fatalf("frame of %d bytes for a %d-byte payload", len(frame), len(d.Payload))
		}
		if !checksumsValid(frame) {
			t.Fatal("checksums do not verify")
		}
		if dst, ok := Peek(frame); !ok || dst != d.Dst {
			t.Fatalf("Peek = %v, %v", dst, ok)
		}
		back, err := Parse(frame)
		if err != nil {
			t.Fatal(err)
		}
		if back.SrcMAC != d.SrcMAC || back.DstMAC != d.DstMAC || back.Src != d.Src || back.Dst != d.Dst || !bytes.Equal(back.Payload, d.Payload) {
			t.Fatalf("round trip: %+v, want %+v", back, d)
		}
	})
}

func TestParseIgnoresLinkPadding(t *testing.T) {
	d := Datagram{Src: netip.MustParseAddrPort("10.0.0.1:68"), Dst: netip.MustParseAddrPort("10.0.0.2:67"), Payload: []byte("x")}
	frame, _ := Append(nil, d)
	frame = append(frame, make([]byte, 20)...)
	back, err := Parse(frame)
	if err != nil || string(back.Payload) != "x" {
		t.Fatalf("Parse = %q, %v", back.Payload, err)
	}
}

func TestParseRejectsMalformedFrames(t *testing.T) {
	d := Datagram{Src: netip.MustParseAddrPort("10.0.0.1:68"), Dst: netip.MustParseAddrPort("10.0.0.2:67"), Payload: []byte("payload")}
	good, _ := Append(nil, d)
	ip := l2.EthernetHeaderLen
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	fixIPSum := func(b []byte) []byte {
		binary.BigEndian.PutUint16(b[ip+10:], 0)
		binary.BigEndian.PutUint16(b[ip+10:], l2.IPv4HeaderChecksum(b[ip:ip+IPv4HeaderLen]))
		return b
	}
	cases := map[string]struct {
		frame []byte
		want  error
	}{
		"short":         {good[:10], ErrNotIPv4},
		"ARP":           {mutate(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }), ErrNotIPv4},
		"IPv6 version":  {mutate(func(b []byte) []byte { b[ip] = 0x65; return b }), ErrMalformed},
		"short IHL":     {mutate(func(b []byte) []byte { b[ip] = 0x44; return b }), ErrMalformed},
		"total too big": {mutate(func(b []byte) []byte { b[ip+2] = 0xff; return b }), ErrMalformed},
		"bad checksum":  {mutate(func(b []byte) []byte { b[ip+10] ^= 1; return b }), ErrChecksum},
		"fragment":      {mutate(func(b []byte) []byte { b[ip+6] = 0x20; return fixIPSum(b) }), ErrFragment},
		"TCP":           {mutate(func(b []byte) []byte { b[ip+9] = 6; return fixIPSum(b) }), ErrNotUDP},
		"UDP length":    {mutate(func(b []byte) []byte { b[ip+IPv4HeaderLen+5] = 200; return b }), ErrMalformed},
		"UDP too short": {mutate(func(b []byte) []byte { b[ip+IPv4HeaderLen+5] = 7; return b }), ErrMalformed},
		"tagged":        {append(append(bytes.Clone(good[:12]), 0x81, 0x00, 0, 5), good[12:]...), ErrNotIPv4},
	}
	for name, c := range cases {
		if _, err := Parse(c.frame); err != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestPeekPassesOverOtherFrames(t *testing.T) {
	d := Datagram{Src: netip.MustParseAddrPort("10.0.0.1:68"), Dst: netip.MustParseAddrPort("10.0.0.2:67")}
	good, _ := Append(nil, d)
	later := bytes.Clone(good)
	later[l2.EthernetHeaderLen+7] = 8 // fragment offset 64 bytes: no UDP header here
	tcp := bytes.Clone(good)
	tcp[l2.EthernetHeaderLen+9] = 6
	for name, f := range map[string][]byte{"later fragment": later, "TCP": tcp, "short": good[:30], "empty": nil} {
		if _, ok := Peek(f); ok {
			t.Errorf("Peek accepted %s", name)
		}
	}
}

func TestAppendRefusesIPv6(t *testing.T) {
	if _, err := Append(nil, Datagram{Src: netip.MustParseAddrPort("[fd00::1]:53"), Dst: netip.MustParseAddrPort("10.0.0.1:53")}); err == nil {
		t.Fatal("accepted an IPv6 source")
	}
}

func FuzzParse(f *testing.F) {
	frame, _ := Append(nil, Datagram{Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67"), Payload: []byte("dhcp")})
	f.Add(frame)
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Append(nil, d)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(again)
		if err != nil || back.Src != d.Src || back.Dst != d.Dst || !bytes.Equal(back.Payload, d.Payload) {
			t.Fatalf("rebuilt frame differs: %+v, %v", back, err)
		}
	})
}
