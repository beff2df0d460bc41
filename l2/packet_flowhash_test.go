package l2

import (
	"net/netip"
	"testing"
)

func TestFlowHashTellsFlowsApart(t *testing.T) {
	tcp := func(sport, dport uint16, payload int) []byte {
		return packetSpec{
			srcIP: netip.MustParseAddr("10.0.0.1"), dstIP: netip.MustParseAddr("10.0.0.2"),
			srcPort: sport, dstPort: dport, ttl: 64, flags: tcpACK, payload: make([]byte, payload),
		}.build()
	}
	a, b := FlowHash(tcp(1000, 22, 10)), FlowHash(tcp(1000, 22, 1400))
	if a != b {
		t.Errorf("two segments of one TCP flow hash apart: %#x, %#x", a, b)
	}
	if c := FlowHash(tcp(1001, 22, 10)); c == a {
		t.Errorf("another source port hashes alike: %#x", c)
	}
	if d := FlowHash(tcp(1000, 80, 10)); d == a {
		t.Errorf("another destination port hashes alike: %#x", d)
	}
	for _, garbage := range [][]byte{nil, {1, 2, 3}, make([]byte, 14), make([]byte, 60)} {
		FlowHash(garbage)
	}
	frame := tcp(1, 2, 3)
	if n := testing.AllocsPerRun(100, func() { FlowHash(frame) }); n != 0 {
		t.Errorf("FlowHash allocates %v times", n)
	}
}
