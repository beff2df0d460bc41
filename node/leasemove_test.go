package node

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"burrow/dht"
	"burrow/l2"
	"burrow/l2/udp4"
)

// dhcpRequest is a client's broadcast DHCPREQUEST for ip, as after a move
// (INIT-REBOOT: no server named).
func dhcpRequest(t *testing.T, client l2.MAC, ip netip.Addr) []byte {
	t.Helper()
	p, err := dhcpv4.New(dhcpv4.WithHwAddr(net.HardwareAddr(client[:])), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IP(ip.AsSlice()))))
	if err != nil {
		t.Fatal(err)
	}
	frame, err := udp4.Append(nil, udp4.Datagram{SrcMAC: client, DstMAC: l2.Broadcast,
		Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67"), Payload: p.ToBytes()})
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// TestALeaseMovesWithItsClient: v holds the lease of a client; the client
// shows up on m's TAP and asks m's DHCP server for its address, or only
// announces itself with a gratuitous ARP (a live migration). While the
// client still answers v's ARP probes on v's TAP, v keeps the lease and
// n drops m's frames as the client's; once it answers no more, v lets the
// lease go, m takes it over, and n, looking the holder up again when its
// answer drops frames, passes the client's frames from m within seconds.
func TestALeaseMovesWithItsClient(t *testing.T) {
	leased, client := netip.MustParseAddr("10.9.0.150"), l2.MAC{2, 0xc1, 0, 0, 0, 7}
	for _, arrival := range []struct {
		name  string
		frame []byte
	}{
		{"asking m's DHCP server", dhcpRequest(t, client, leased)},
		{"announced by gratuitous ARP", arpFrame(l2.ARPRequest, client, leased, l2.MAC{}, leased)},
	} {
		t.Run(arrival.name, func(t *testing.T) { leaseMovesWithItsClient(t, leased, client, arrival.frame) })
	}
}

func leaseMovesWithItsClient(t *testing.T, leased netip.Addr, client l2.MAC, arrival []byte) {
	w, v, m, n, _ := holdersNet(t)
	nIP := netip.MustParseAddr("10.9.0.3")
	v.lease(t, leased, client)
	n.fromTAP(ethFrame(l2.Broadcast, n.mac, "n is here"))
	send := func(from *testNode, payload string) {
		from.fromTAP(arpFrame(l2.ARPRequest, client, leased, l2.MAC{}, nIP))
		from.fromTAP(tcpFrame(n.mac, client, leased, nIP, 40000, 22, payload))
		w.advance(200*time.Millisecond, 100*time.Millisecond)
	}
	send(v, "from v")
	if got := n.countTAP("from v"); got != 1 {
		t.Fatalf("n's TAP got %d frames of the client at v, want 1", got)
	}
	holder := func() dht.Result {
		var got dht.Result
		n.node.WithDHT(w.now, func(kv dht.Client) {
			kv.Get(n.node.svc.dhcp.Key(leased), w.now, func(r dht.Result) { got = r })
		})
		w.advance(time.Second, 100*time.Millisecond)
		return got
	}
	// v answers its own probes as the client still on its TAP would.
	answering := true
	probes := 0
	answer := func() {
		for _, f := range v.tap {
			if len(f) <= 14 || f[12] != 0x08 || f[13] != 0x06 {
				continue
			}
			if a, err := l2.ParseARP(f[14:]); err == nil && a.Op == l2.ARPRequest && a.TargetIP == leased {
				probes++
				if answering {
					v.fromTAP(arpFrame(l2.ARPReply, client, leased, a.SenderMAC, a.SenderIP))
				}
			}
		}
		v.tap = nil
	}
	// The daemon ticks the core at its next deadline: while v probes, that
	// must come by the next probe.
	moveTo := func(to *testNode) {
		to.fromTAP(arrival)
		for range 30 {
			w.advance(100*time.Millisecond, 100*time.Millisecond)
			if len(v.node.svc.moves.checks) > 0 {
				if next := v.node.NextDeadline(w.now); next.Sub(w.now) > moveProbeGap {
					t.Fatalf("while v probes for its client, its next tick is %v away, after its next probe is due", next.Sub(w.now))
				}
			}
			answer()
		}
	}

	moveTo(m)
	if probes == 0 {
		t.Fatal("v sent no ARP probe for its client when m said it moved")
	}
	if r := holder(); r.Status != dht.OK || r.Owner != v.node.Self() {
		t.Fatalf("while the client answers at v, its lease is %v held by %v, want v's", r.Status, r.Owner.Short())
	}
	send(m, "from m, the client still at v")
	if got := n.countTAP("from m, the client still at v"); got != 0 {
		t.Fatalf("n's TAP got %d frames of m as the client that answers at v", got)
	}

	answering = false
	w.advance(moveToldEvery, 250*time.Millisecond)
	moveTo(m)
	if r := holder(); r.Status != dht.OK || r.Owner != m.node.Self() {
		t.Fatalf("after the client left v, its lease is %v held by %v, want m's", r.Status, r.Owner.Short())
	}
	var passed time.Duration
	for ; passed < 10*time.Second && n.countTAP("from m") == 0; passed += 200 * time.Millisecond {
		send(m, "from m")
	}
	if n.countTAP("from m") == 0 {
		t.Fatalf("n's TAP got no frame of the client at m %v after the lease moved", passed)
	}
	t.Logf("n passed the client's frames from m %v after the lease moved", passed)
}
