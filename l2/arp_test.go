package l2

import (
	"bytes"
	"net/netip"
	"testing"
)

// A request from 10.0.0.1 for 10.0.0.2, as on the wire.
var arpRequest = []byte{
	0, 1, 8, 0, 6, 4, 0, 1,
	2, 0, 0, 0, 0, 1, 10, 0, 0, 1,
	0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
}

func TestParseARP(t *testing.T) {
	a, err := ParseARP(append(append([]byte{}, arpRequest...), make([]byte, 18)...))
	want := ARP{
		Op:        ARPRequest,
		SenderMAC: MAC{2, 0, 0, 0, 0, 1},
		SenderIP:  netip.MustParseAddr("10.0.0.1"),
		TargetIP:  netip.MustParseAddr("10.0.0.2"),
	}
	if err != nil || a != want {
		t.Fatalf("got %+v, %v; want %+v", a, err, want)
	}
	for i, mutate := range []func(b []byte){
		func(b []byte) { b[1] = 6 },    // not Ethernet
		func(b []byte) { b[2] = 0x86 }, // not IPv4
		func(b []byte) { b[4] = 8 },    // hardware length
		func(b []byte) { b[5] = 16 },   // protocol length
		func(b []byte) { b[7] = 3 },    // RARP
		func(b []byte) { b[6], b[7] = 1, 1 },
	} {
		b := append([]byte{}, arpRequest...)
		mutate(b)
		if _, err := ParseARP(b); err == nil {
			t.Errorf("mutation %d accepted", i)
		}
	}
	if _, err := ParseARP(arpRequest[:ARPLen-1]); err == nil {
		t.Error("short packet accepted")
	}
}

func TestAppendARP(t *testing.T) {
	a, err := ParseARP(arpRequest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := AppendARP([]byte{0xee}, a)
	if err != nil || !bytes.Equal(got, append([]byte{0xee}, arpRequest...)) {
		t.Fatalf("got %x, %v", got, err)
	}
	reply := ARP{
		Op:        ARPReply,
		SenderMAC: MAC{2, 0, 0, 0, 0, 2},
		SenderIP:  netip.MustParseAddr("::ffff:10.0.0.2"),
		TargetMAC: MAC{2, 0, 0, 0, 0, 1},
		TargetIP:  netip.MustParseAddr("10.0.0.1"),
	}
	b, err := AppendARP(nil, reply)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseARP(b)
	reply.SenderIP = reply.SenderIP.Unmap()
	if err != nil || back != reply {
		t.Fatalf("reply came back as %+v, %v", back, err)
	}
	reply.TargetIP = netip.MustParseAddr("fd00::1")
	if b, err := AppendARP([]byte{1}, reply); err == nil || len(b) != 1 {
		t.Fatalf("IPv6 target: %x, %v", b, err)
	}
	if _, err := AppendARP(nil, ARP{}); err == nil {
		t.Fatal("zero addresses accepted")
	}
}

func FuzzParseARP(f *testing.F) {
	f.Add(arpRequest)
	f.Add(arpRequest[:20])
	reply := append([]byte{}, arpRequest...)
	reply[7] = 2
	f.Add(reply)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseARP(b)
		if err != nil {
			return
		}
		again, err := AppendARP(nil, a)
		if err != nil || !bytes.Equal(again, b[:ARPLen]) {
			t.Fatalf("%x rebuilt as %x, %v", b[:ARPLen], again, err)
		}
	})
}
