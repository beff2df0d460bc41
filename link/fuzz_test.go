package link

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"burrow/wire"
)

// FuzzHandleHandshake sprays arbitrary datagrams at a node that has a
// handshake of its own in flight: nothing may panic, and no link may come
// up from garbage.
func FuzzHandleHandshake(f *testing.F) {
	ca := trustedNames{}
	seeder := newTestNode(f, "seed", 9, 9, ca, Timers{})
	_, init, _ := StartHandshake(&seeder.m.cfg.Handshake)
	f.Add(wire.AppendHandshake(nil, wire.HandshakeHeader{Type: wire.TypeHandshakeInit, Sender: 5}, init))
	f.Add(wire.AppendHandshake(nil, wire.HandshakeHeader{Type: wire.TypeHandshakeReply, Sender: 5, Receiver: 1}, make([]byte, 96)))
	f.Add(wire.AppendHandshake(nil, wire.HandshakeHeader{Type: wire.TypeHandshakeFinish, Sender: 5, Receiver: 1}, make([]byte, 64)))
	f.Add([]byte{0xB3})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.Clone(b)
		ca := trustedNames{}
		n := newTestNode(t, "n", 1, 1, ca, Timers{})
		now := time.Unix(1000, 0)
		n.m.AddDial([]Endpoint{UDPEndpoint(netip.MustParseAddrPort("192.0.2.9:9"))}, DialOptions{}, now)
		n.m.Tick(now)
		// Aim replies and finishes at the indexes the node actually uses.
		for idx := range n.m.pending {
			if len(b) >= wire.HandshakeHeaderLen && (b[0] == byte(wire.TypeHandshakeReply) || b[0] == byte(wire.TypeHandshakeFinish)) {
				b[8], b[9], b[10], b[11] = byte(idx), byte(idx>>8), byte(idx>>16), byte(idx>>24)
			}
		}
		n.m.HandleHandshake(UDPEndpoint(netip.MustParseAddrPort("192.0.2.7:7")), b, now)
		if len(n.ups) != 0 {
			t.Fatal("a link came up from a fuzzed datagram")
		}
	})
}
