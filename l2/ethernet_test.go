package l2

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func TestParseEthernet(t *testing.T) {
	untagged := []byte{
		1, 2, 3, 4, 5, 6, // dst
		7, 8, 9, 10, 11, 12, // src
		0x86, 0xdd, 0xaa,
	}
	e, err := ParseEthernet(untagged)
	want := Ethernet{Dst: MAC{1, 2, 3, 4, 5, 6}, Src: MAC{7, 8, 9, 10, 11, 12}, EtherType: EtherTypeIPv6, PayloadOffset: 14}
	if err != nil || e != want {
		t.Fatalf("untagged: %+v, %v; want %+v", e, err, want)
	}

	tagged := []byte{
		1, 2, 3, 4, 5, 6,
		7, 8, 9, 10, 11, 12,
		0x81, 0x00, 0xa0, 0x2a, // priority 5, VLAN 42
		0x08, 0x06,
	}
	e, err = ParseEthernet(tagged)
	want = Ethernet{Dst: MAC{1, 2, 3, 4, 5, 6}, Src: MAC{7, 8, 9, 10, 11, 12}, Tagged: true, VLANTag: 0xa02a, EtherType: EtherTypeARP, PayloadOffset: 18}
	if err != nil || e != want {
		t.Fatalf("tagged: %+v, %v; want %+v", e, err, want)
	}
	if e.VLANID() != 42 {
		t.Fatalf("VLAN ID %d, want 42", e.VLANID())
	}
	if got := e.AppendHeader([]byte{0xee}); !bytes.Equal(got, append([]byte{0xee}, tagged...)) {
		t.Fatalf("AppendHeader: %x", got)
	}

	for _, short := range [][]byte{nil, untagged[:13], tagged[:17]} {
		if _, err := ParseEthernet(short); err == nil {
			t.Errorf("%d-byte frame accepted", len(short))
		}
	}
	if _, err := ParseEthernet(tagged[:17]); !errors.Is(err, errShortVLAN) {
		t.Errorf("truncated tag: %v", err)
	}
}

func FuzzParseEthernet(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00, 0x45})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0x00, 0x07, 0x86, 0xdd})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, frame []byte) {
		e, err := ParseEthernet(frame)
		if err != nil {
			return
		}
		if e.PayloadOffset > len(frame) {
			t.Fatalf("payload offset %d beyond %d-byte frame", e.PayloadOffset, len(frame))
		}
		if header := e.AppendHeader(nil); !bytes.Equal(header, frame[:e.PayloadOffset]) {
			t.Fatalf("header %x rebuilt as %x", frame[:e.PayloadOffset], header)
		}
	})
}

func TestSourceAddr(t *testing.T) {
	v4 := make([]byte, 14+20)
	v4[12], v4[13], v4[14] = 0x08, 0x00, 0x45
	copy(v4[14+12:], []byte{10, 9, 0, 2})
	v6 := make([]byte, 14+40)
	v6[12], v6[13], v6[14] = 0x86, 0xdd, 0x60
	v6[14+8], v6[14+23] = 0xfd, 7
	arp, _ := AppendARP([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06},
		ARP{Op: ARPReply, SenderIP: netip.MustParseAddr("10.9.0.3"), TargetIP: netip.MustParseAddr("10.9.0.4")})
	tagged := append(append(append([]byte{}, v4[:12]...), 0x81, 0x00, 0, 5), v4[12:]...)
	for name, c := range map[string]struct {
		frame []byte
		want  string
	}{
		"IPv4": {v4, "10.9.0.2"}, "IPv6": {v6, "fd00::7"}, "ARP sender": {arp, "10.9.0.3"}, "802.1Q": {tagged, "10.9.0.2"},
		"short IPv4": {v4[:30], ""}, "other ethertype": {append([]byte(nil), make([]byte, 12)...), ""},
	} {
		a, ok := SourceAddr(c.frame)
		if (c.want == "") == ok || ok && a.String() != c.want {
			t.Errorf("%s: SourceAddr = %v, %v; want %q", name, a, ok, c.want)
		}
	}
}
