package kernelpath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// The programs run here on crafted frames with BPF_PROG_TEST_RUN: the
// kernel executes them on a real skb and hands back the bytes and the
// verdict, without any device. Needs root and a kernel with the eBPF
// features of the kernel path; skipped with the reason otherwise.

const (
	tcActUnspec   = 0xffffffff // TC_ACT_UNSPEC, -1: go on, not ours
	tcActShot     = 2
	tcActRedirect = 7
	testPort      = 51821
)

var (
	tapMAC  = [6]byte{0x02, 0xaa, 0, 0, 0, 1}
	peerMAC = [6]byte{0x02, 0xbb, 0, 0, 0, 2}
	self    = netip.MustParseAddr("10.200.1.2")
	peer    = netip.MustParseAddr("10.200.1.3")
)

func loadForTest(t *testing.T) *Path {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the kernel path's programs need root to load")
	}
	if err := Available(); err != nil {
		t.Skipf("no kernel path on this kernel: %v", err)
	}
	p, err := Load(Options{Port: testPort, TAP: 7, UnderlayMTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func run(t *testing.T, prog *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(in)+256)
	opts := ebpf.RunOptions{Data: in, DataOut: out}
	ret, err := prog.Run(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return ret, opts.DataOut
}

// ipv4 builds an IPv4 header with a valid checksum.
func ipv4(src, dst netip.Addr, proto byte, payload int) []byte {
	h := make([]byte, 20)
	h[0], h[8], h[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(h[2:], uint16(20+payload))
	copy(h[12:], src.AsSlice())
	copy(h[16:], dst.AsSlice())
	binary.BigEndian.PutUint16(h[10:], ^sum16(h))
	return h
}

func sum16(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// udpChecksumOK checks the UDP checksum of an IPv4 packet (0: none).
func udpChecksumOK(ip []byte) bool {
	udp := ip[20:]
	if binary.BigEndian.Uint16(udp[6:]) == 0 {
		return true
	}
	pseudo := append(append([]byte{}, ip[12:20]...), 0, 17, byte(len(udp)>>8), byte(len(udp)))
	return sum16(append(pseudo, udp...)) == 0xffff
}

func withUDPChecksum(ip []byte) []byte {
	udp := ip[20:]
	udp[6], udp[7] = 0, 0
	pseudo := append(append([]byte{}, ip[12:20]...), 0, 17, byte(len(udp)>>8), byte(len(udp)))
	binary.BigEndian.PutUint16(udp[6:], ^sum16(append(pseudo, udp...)))
	return ip
}

func ether(dst, src [6]byte, typ uint16, payload ...[]byte) []byte {
	b := append(append(append([]byte{}, dst[:]...), src[:]...), byte(typ>>8), byte(typ))
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

func udp(sport, dport uint16, payload []byte) []byte {
	h := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint16(h[4:], uint16(8+len(payload)))
	return append(h, payload...)
}

// innerFrame is a frame the host sends to the peer's MAC: ICMP echo.
func innerFrame() []byte {
	icmp := append([]byte{8, 0, 0, 0, 0, 1, 0, 1}, bytes.Repeat([]byte{0x5a}, 56)...)
	return ether(peerMAC, tapMAC, 0x0800, ipv4(netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2"), 1, len(icmp)), icmp)
}

func TestEgressEncapsulatesFramesForKnownMACs(t *testing.T) {
	p := loadForTest(t)
	if err := p.SetMAC(peerMAC, Dest{Peer: peer, Source: self, Ifindex: 3}); err != nil {
		t.Fatal(err)
	}
	frame := innerFrame()
	ret, out := run(t, p.objs.KpEgress, frame)
	if ret != tcActRedirect {
		t.Fatalf("verdict %#x, want redirect", ret)
	}
	if len(out) != 14+Overhead-14+len(frame) {
		t.Fatalf("%d bytes out of %d in, want %d more", len(out), len(frame), Overhead)
	}
	if out[12] != 0x08 || out[13] != 0 || out[0]&1 != 0 {
		t.Errorf("outer Ethernet header % x: want IPv4 and a unicast destination", out[:14])
	}
	ip := out[14:34]
	if ip[0] != 0x45 || ip[9] != 17 || ip[8] != 64 || ip[6]&0x40 == 0 {
		t.Errorf("outer IPv4 header % x: want version 4, UDP, TTL 64, DF", ip)
	}
	if got := int(binary.BigEndian.Uint16(ip[2:])); got != len(out)-14 {
		t.Errorf("outer total length %d, want %d", got, len(out)-14)
	}
	if sum16(ip) != 0xffff {
		t.Errorf("outer IPv4 checksum wrong: % x", ip)
	}
	if netip.AddrFrom4([4]byte(ip[12:16])) != self || netip.AddrFrom4([4]byte(ip[16:20])) != peer {
		t.Errorf("outer addresses %v → %v, want %v → %v", netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), self, peer)
	}
	u := out[34:42]
	if dport := binary.BigEndian.Uint16(u[2:]); dport != testPort {
		t.Errorf("UDP destination port %d, want %d", dport, testPort)
	}
	if sport := binary.BigEndian.Uint16(u[0:]); sport < 49152 {
		t.Errorf("UDP source port %d outside the ephemeral range", sport)
	}
	if l := int(binary.BigEndian.Uint16(u[4:])); l != 8+len(frame) {
		t.Errorf("UDP length %d, want %d", l, 8+len(frame))
	}
	if !bytes.Equal(out[42:], frame) {
		t.Errorf("the frame inside differs:\n got % x\nwant % x", out[42:], frame)
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TxPackets != 1 || st.TxBytes != uint64(len(frame)) {
		t.Errorf("stats %+v, want one frame of %d bytes sent", st, len(frame))
	}
}

func TestEgressLeavesTheRestToTheDaemon(t *testing.T) {
	p := loadForTest(t)
	if err := p.SetMAC(peerMAC, Dest{Peer: peer, Source: self, Ifindex: 3}); err != nil {
		t.Fatal(err)
	}
	arp := ether(peerMAC, tapMAC, 0x0806, make([]byte, 28))
	big := ether(peerMAC, tapMAC, 0x0800, ipv4(self, peer, 17, 1480-20), make([]byte, 1480-20))
	for name, frame := range map[string][]byte{
		"unknown MAC": ether([6]byte{0x02, 0xcc, 0, 0, 0, 3}, tapMAC, 0x0800, innerFrame()[14:]),
		"broadcast":   ether([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, tapMAC, 0x0800, innerFrame()[14:]),
		"ARP":         arp,
		"too big":     big,
	} {
		ret, out := run(t, p.objs.KpEgress, frame)
		if ret != tcActUnspec || !bytes.Equal(out, frame) {
			t.Errorf("%s: verdict %#x, frame changed %v; want it passed on untouched", name, ret, !bytes.Equal(out, frame))
		}
	}
	st, _ := p.Stats()
	if st.TxPackets != 0 || st.TxDaemon != 2 {
		t.Errorf("stats %+v, want nothing sent and 2 frames (ARP, too big) to kernel-path MACs left to the daemon", st)
	}
}

// encapsulated is what a peer's kernel path sends: frame in UDP from src.
func encapsulated(src netip.Addr, port uint16, payload []byte) []byte {
	u := udp(50000, port, payload)
	return ether([6]byte{0x02, 0, 0, 0, 0, 0x10}, [6]byte{0x02, 0, 0, 0, 0, 0x11}, 0x0800, ipv4(src, self, 17, len(u)), u)
}

func TestIngressDecapsulatesFramesFromPeersOnly(t *testing.T) {
	p := loadForTest(t)
	if err := p.SetPeer(peer); err != nil {
		t.Fatal(err)
	}
	frame := innerFrame()
	ret, out := run(t, p.objs.KpIngress, encapsulated(peer, testPort, frame))
	if ret != tcActRedirect || !bytes.Equal(out, frame) {
		t.Fatalf("from the peer: verdict %#x, out\n% x\nwant redirect of\n% x", ret, out, frame)
	}

	stranger := encapsulated(netip.MustParseAddr("10.200.1.9"), testPort, frame)
	otherPort := encapsulated(peer, testPort+1, frame)
	for name, in := range map[string][]byte{"stranger": stranger, "other port": otherPort} {
		ret, out := run(t, p.objs.KpIngress, in)
		if ret != tcActUnspec || !bytes.Equal(out, in) {
			t.Errorf("%s: verdict %#x; want the datagram passed on untouched", name, ret)
		}
	}
	bcast := ether([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, tapMAC, 0x0800, frame[14:])
	if ret, _ := run(t, p.objs.KpIngress, encapsulated(peer, testPort, bcast)); ret != tcActShot {
		t.Errorf("a broadcast inside: verdict %#x, want dropped", ret)
	}
	if err := p.DeletePeer(peer); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, p.objs.KpIngress, encapsulated(peer, testPort, frame)); ret != tcActUnspec {
		t.Errorf("after DeletePeer: verdict %#x, want passed on", ret)
	}
	st, _ := p.Stats()
	if st.RxPackets != 1 || st.RxBytes != uint64(len(frame)) || st.RxUntrusted != 2 || st.RxErrors != 1 {
		t.Errorf("stats %+v, want 1 frame in, 2 untrusted, 1 error", st)
	}
}

func TestProbeIsAnsweredInPlaceWithItsChecksum(t *testing.T) {
	p := loadForTest(t)
	if err := p.SetPeer(peer); err != nil {
		t.Fatal(err)
	}
	in := encapsulated(peer, testPort, AppendProbe(nil, 0x1122334455667788))
	withUDPChecksum(in[14:])
	ret, out := run(t, p.objs.KpIngress, in)
	if ret != tcActRedirect {
		t.Fatalf("verdict %#x, want redirect back out", ret)
	}
	if !bytes.Equal(out[0:6], in[6:12]) || !bytes.Equal(out[6:12], in[0:6]) {
		t.Errorf("Ethernet addresses not swapped: % x", out[:12])
	}
	ip := out[14:]
	if netip.AddrFrom4([4]byte(ip[12:16])) != self || netip.AddrFrom4([4]byte(ip[16:20])) != peer {
		t.Errorf("IPv4 addresses not swapped: % x", ip[12:20])
	}
	if binary.BigEndian.Uint16(ip[20:]) != testPort || binary.BigEndian.Uint16(ip[22:]) != 50000 {
		t.Errorf("ports not swapped: % x", ip[20:24])
	}
	if sum16(ip[:20]) != 0xffff || !udpChecksumOK(ip) {
		t.Errorf("checksums broken by the answer")
	}
	nonce, ok := ParseAnswer(ip[28:])
	if !ok || nonce != 0x1122334455667788 {
		t.Errorf("answer % x: nonce %#x ok %v", ip[28:], nonce, ok)
	}
	if ret, _ := run(t, p.objs.KpIngress, encapsulated(netip.MustParseAddr("10.200.1.9"), testPort, AppendProbe(nil, 1))); ret != tcActUnspec {
		t.Errorf("a stranger's probe: verdict %#x, want passed on unanswered", ret)
	}
}

func TestProbeCodec(t *testing.T) {
	b := AppendProbe(nil, 42)
	if len(b) != ProbeLen {
		t.Fatalf("probe is %d bytes", len(b))
	}
	if _, ok := ParseAnswer(b); ok {
		t.Error("a question parsed as an answer")
	}
	// What the kernel does to it.
	b[5], b[7] = probeAnswer, 0
	if n, ok := ParseAnswer(b); !ok || n != 42 {
		t.Errorf("answer: %d %v", n, ok)
	}
	if sum16(AppendProbe(nil, 42)) != sum16(b) {
		t.Error("the answer changes the one's-complement sum")
	}
}
