package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/dht"
	"burrow/flood"
	"burrow/ipam"
	"burrow/l2"
	"burrow/warrens"
	"burrow/wire"
)

// holdersNet is a ring of four members that serve DHCP on 10.9.0.0/24
// (leases from .100-.199) and claim IPv4 container subnets: v holds a
// lease and a subnet, m tries to use them, n watches, and r's certificate
// has RouterGroup. The members named in withoutDHCP serve none.
func holdersNet(t *testing.T, withoutDHCP ...string) (w *testNet, v, m, n, r *testNode) {
	t.Helper()
	w = &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{},
		groups: map[string][]string{"r": {RouterGroup}}, services: map[string]ServicesConfig{}}
	names := []string{"v", "m", "n", "r"}
	for i, name := range names {
		w.services[name] = ServicesConfig{
			DHCP: &ipam.Config{Network: netip.MustParsePrefix("10.9.0.0/24"),
				RangeStart: netip.MustParseAddr("10.9.0.100"), RangeEnd: netip.MustParseAddr("10.9.0.199"),
				ServerMAC: l2.MAC{2, 0xd, 0, 0, 0, byte(i)}, ServerIP: netip.MustParseAddr("10.9.0.1")},
			Subnets: []warrens.ClaimConfig{{MachineID: fmt.Sprintf("%032x", i+1), Family: warrens.IPv4}},
		}
		if slices.Contains(withoutDHCP, name) {
			c := w.services[name]
			c.DHCP = nil
			w.services[name] = c
		}
	}
	var nodes []*testNode
	for i, name := range names {
		ov := OverlayConfig{}
		if i > 0 {
			ov.Bootstrap = []netip.AddrPort{nodes[0].addr}
		}
		nodes = append(nodes, w.add(name, 90+uint64(i), ov))
	}
	w.settle(t, 30*time.Second)
	w.advance(5*time.Second, 250*time.Millisecond) // the subnet claims
	return w, nodes[0], nodes[1], nodes[2], nodes[3]
}

// claimed is the container subnet tn holds.
func (tn *testNode) claimed(t *testing.T) netip.Prefix {
	t.Helper()
	st := tn.node.svc.claimers[0].Status()
	if st.State != warrens.Claimed {
		t.Fatalf("%s's subnet %v is %v, not claimed", tn.name, st.Prefix, st.State)
	}
	return st.Prefix
}

// lease writes a DHCP lease of ip for client as tn's DHCP server does.
func (tn *testNode) lease(t *testing.T, ip netip.Addr, client l2.MAC) {
	t.Helper()
	var got dht.Result
	tn.node.WithDHT(tn.w.now, func(kv dht.Client) {
		kv.PutIfAbsent(tn.node.svc.dhcp.Key(ip), []byte(client.String()+" host"), time.Hour, tn.w.now, func(r dht.Result) { got = r })
	})
	tn.w.advance(time.Second, 100*time.Millisecond)
	if got.Status != dht.OK {
		t.Fatalf("%s's lease of %v: %v", tn.name, ip, got.Status)
	}
}

// TestFramesAreBoundToLeaseAndSubnetHolders: v's leased client and a
// container in v's subnet reach n; m using the client's address or MAC,
// or an address of v's subnet, gets nothing to n's TAP, counted as
// spoofed, once n has looked the holders up. An address of the DHCP range
// that no lease gives passes from r, whose certificate has RouterGroup,
// and is dropped as unheld from m.
func TestFramesAreBoundToLeaseAndSubnetHolders(t *testing.T) {
	w, v, m, n, r := holdersNet(t)
	var logged bytes.Buffer
	n.node.log = slog.New(slog.NewTextHandler(&logged, nil))
	nIP := netip.MustParseAddr("10.9.0.3")
	leased, client := netip.MustParseAddr("10.9.0.150"), l2.MAC{2, 0xc1, 0, 0, 0, 1}
	v.lease(t, leased, client)
	container := v.claimed(t).Addr().Next()
	n.fromTAP(ethFrame(l2.Broadcast, n.mac, "n is here"))
	send := func(from *testNode, mac l2.MAC, src netip.Addr, payload string) {
		from.fromTAP(arpFrame(l2.ARPRequest, mac, src, l2.MAC{}, nIP))
		from.fromTAP(tcpFrame(n.mac, mac, src, nIP, 40000, 22, payload))
		w.advance(200*time.Millisecond, 100*time.Millisecond) // any lookup the frames start
	}
	drops := func() (spoofed, unheld uint64) {
		d := n.node.Stats().Drops()
		return d["spoofed"], d["unheld"]
	}

	// The holders' frames pass; the first ones have n look the holders up.
	for range 2 {
		send(v, client, leased, "v's client")
		send(v, v.mac, container, "v's container")
	}
	if got := n.countTAP("v's client") + n.countTAP("v's container"); got != 4 {
		t.Fatalf("n's TAP got %d of the 4 TCP segments of v's client and container", got)
	}
	if s, u := drops(); s != 0 || u != 0 {
		t.Fatalf("n dropped v's own frames: %d spoofed, %d unheld", s, u)
	}

	// m as v's client (by address, then by MAC) and in v's subnet.
	send(m, m.mac, leased, "m as the client's address")
	send(m, client, netip.MustParseAddr("10.9.0.20"), "m as the client's MAC")
	send(m, m.mac, container.Next(), "m in v's subnet")
	for _, p := range []string{"m as the client's address", "m as the client's MAC", "m in v's subnet"} {
		if got := n.countTAP(p); got != 0 {
			t.Errorf("n's TAP got %d frames of %q", got, p)
		}
	}
	if s, u := drops(); s != 6 || u != 0 {
		t.Fatalf("n counted %d spoofed (want 6: two frames of each) and %d unheld", s, u)
	}

	// An address of the range no lease gives: n looks it up at the first
	// frame (an ARP request), which waits for the answer; they pass only
	// from the router.
	unleased := netip.MustParseAddr("10.9.0.160")
	send(m, m.mac, unleased, "m unleased")
	send(m, m.mac, unleased, "m unleased")
	lanHost := l2.MAC{2, 0x1a, 0, 0, 0, 1}
	lanAddr := netip.MustParseAddr("10.9.0.170")
	send(r, lanHost, lanAddr, "r's LAN host")
	send(r, lanHost, lanAddr, "r's LAN host")
	if got := n.countTAP("m unleased"); got != 0 {
		t.Errorf("n's TAP got %d TCP segments of m on an unleased address", got)
	}
	if got := n.countTAP("r's LAN host"); got != 2 {
		t.Errorf("n's TAP got %d of r's LAN host's 2 TCP segments", got)
	}
	if s, u := drops(); s != 6 || u != 4 {
		t.Fatalf("n counted %d spoofed (want 6) and %d unheld (want 4: all of m's frames, the first once its lookup answered)", s, u)
	}

	for _, want := range []string{
		"counted as spoofed)\" from=m address=10.9.0.150",
		"counted as unheld); sign its certificate with burrow cert sign --router if it forwards for a LAN behind it\" from=m address=10.9.0.160",
	} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("n's log lacks %q:\n%s", want, logged.String())
		}
	}
	if strings.Contains(logged.String(), "from=r") {
		t.Errorf("n's log complains of r, a router:\n%s", logged.String())
	}

	// Past the minute the holders are looked up again; the answers kept
	// stand meanwhile, so no frame of m's slips through.
	w.advance(70*time.Second, 250*time.Millisecond)
	send(m, m.mac, leased, "m as the client's address, later")
	if got := n.countTAP("m as the client's address, later"); got != 0 {
		t.Errorf("n's TAP got %d frames of m as the client's address after the refresh", got)
	}
	if s, _ := drops(); s != 8 {
		t.Fatalf("n counted %d spoofed, want 8", s)
	}

	// Nor can m advertise the client as a host behind its bridge.
	advert := flood.AppendLeafAdvert([]byte{byte(wire.InnerFlood)}, m.node.Self(), []l2.MAC{client})
	for _, l := range m.node.Links().Links() {
		if l.Peer.ID == n.node.Self() {
			m.node.Links().Send(l, advert, w.now)
		}
	}
	w.drain()
	if e, ok := n.node.learn.Lookup(client); !ok || e.Root != v.node.Self() {
		t.Errorf("after m's advertisement n has v's client behind %v (known %v), want v", e.Root.Short(), ok)
	}
	if s, _ := drops(); s != 9 {
		t.Errorf("n counted %d spoofed, want 9 with m's advertisement", s)
	}

	// Judging stays free of allocations, looked up or not.
	s := n.node.snap.Load()
	frames := [][]byte{tcpFrame(n.mac, m.mac, leased, nIP, 1, 2, "x"), tcpFrame(n.mac, m.mac, netip.MustParseAddr("10.9.0.199"), nIP, 1, 2, "x")}
	if allocs := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			s.judge(f, m.node.Self())
		}
	}); allocs != 0 {
		t.Errorf("judging a frame allocates %v times", allocs)
	}
}

// TestFramesPassedOnByABridgeAreJudgedAsTheirSender: v's leased client
// talks to n through r, which serves no DHCP and so judges no lease:
// r passes the frames on naming v. Then m sends frames as that client
// through r too, without naming a source. r names m, so n judges them as
// m's and drops them all, rather than taking them for the client's own,
// which came over the same link from r.
func TestFramesPassedOnByABridgeAreJudgedAsTheirSender(t *testing.T) {
	w, v, m, n, r := holdersNet(t, "r")
	nIP := netip.MustParseAddr("10.9.0.3")
	leased, client := netip.MustParseAddr("10.9.0.150"), l2.MAC{2, 0xc1, 0, 0, 0, 9}
	v.lease(t, leased, client)
	n.fromTAP(ethFrame(l2.Broadcast, n.mac, "n is here"))
	w.advance(200*time.Millisecond, 100*time.Millisecond)
	throughR := func(from *testNode, payload string) {
		toR := from.node.Links().Links()[r.node.Self()]
		if toR == nil {
			t.Fatalf("%s has no link to r", from.name)
		}
		from.node.Links().Send(toR, wire.AppendFrame(nil, l2.Offload{}, [16]byte{}, tcpFrame(n.mac, client, leased, nIP, 40000, 22, payload)), w.now)
		w.advance(200*time.Millisecond, 100*time.Millisecond)
	}
	for range 3 {
		throughR(v, "the client")
	}
	if got := n.countTAP("the client"); got != 3 {
		t.Fatalf("n's TAP got %d of the client's 3 segments through r", got)
	}
	before := n.node.Stats().Drops()["spoofed"]
	for range 5 {
		throughR(m, "m as the client")
	}
	if got := n.countTAP("m as the client"); got != 0 {
		t.Errorf("n's TAP got %d of the 5 segments m sent as the client through r", got)
	}
	if got := n.node.Stats().Drops()["spoofed"] - before; got != 5 {
		t.Errorf("n counted %d of m's 5 segments as spoofed", got)
	}
}
