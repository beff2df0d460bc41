package node

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"burrow/l2"
	"burrow/overlay"
)

// ipv4Frame is an IPv4 packet from src to dst (a group: its MAC is the
// group's) carrying proto's payload, with a router alert option when the
// payload is IGMP.
func ipv4Frame(srcMAC l2.MAC, src, dst netip.Addr, proto byte, payload []byte) []byte {
	d := dst.As4()
	f := (l2.Ethernet{Dst: l2.MAC{0x01, 0x00, 0x5e, d[1] & 0x7f, d[2], d[3]}, Src: srcMAC, EtherType: l2.EtherTypeIPv4}).AppendHeader(nil)
	ip := len(f)
	s := src.As4()
	f = append(f, 0x46, 0, 0, byte(24+len(payload)), 0, 0, 0x40, 0, 1, proto, 0, 0, s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3], 0x94, 0x04, 0, 0)
	binary.BigEndian.PutUint16(f[ip+10:], l2.IPv4HeaderChecksum(f[ip:]))
	return append(f, payload...)
}

// igmpV2 is host i's IGMPv2 report (joined) or leave for group.
func (w *testNet) igmpV2(i int, group netip.Addr, joined bool) []byte {
	kind, dst := byte(0x16), group
	if !joined {
		kind, dst = 0x17, netip.MustParseAddr("224.0.0.2")
	}
	msg := append([]byte{kind, 0, 0, 0}, group.AsSlice()...)
	binary.BigEndian.PutUint16(msg[2:], l2.Checksum(msg, 0))
	return ipv4Frame(w.nodes[i].mac, hostIP(i), dst, 2, msg)
}

// TestMulticastGoesOnlyWhereSomeoneListens: of 8 nodes, hosts behind two
// join a group; a stream to it from a third reaches those two TAPs only,
// once each, while a group no one joined and a link-local one reach every
// TAP once. After one listener leaves and the other's membership runs out
// unreported, the group floods everywhere again.
func TestMulticastGoesOnlyWhereSomeoneListens(t *testing.T) {
	w := newOverlayNet(t, 8, 31, overlay.Params{Successors: 2, LongDistance: 1})
	w.settle(t, 60*time.Second)
	w.advance(5*time.Second, 500*time.Millisecond)
	group, other, mdns := netip.MustParseAddr("239.1.2.3"), netip.MustParseAddr("239.9.9.9"), netip.MustParseAddr("224.0.0.251")
	listeners := map[int]bool{2: true, 5: true}
	for i := range listeners {
		w.nodes[i].fromTAP(w.igmpV2(i, group, true))
	}
	w.nodes[3].fromTAP(w.igmpV2(3, mdns, true)) // link-local: not kept, it goes everywhere
	w.advance(time.Second, 100*time.Millisecond)
	for i, n := range w.nodes {
		if st := n.node.Status().Groups; !slices.Equal(st.Reported, []string{group.String()}) {
			t.Errorf("node %d knows of groups %v, want only %v", i, st.Reported, group)
		}
	}
	send := func(to netip.Addr, payload string) {
		w.nodes[0].fromTAP(ipv4Frame(w.nodes[0].mac, hostIP(0), to, 17, []byte(payload)))
		w.advance(500*time.Millisecond, 100*time.Millisecond)
	}
	check := func(payload string, wants func(i int) bool) {
		t.Helper()
		for i, n := range w.nodes[1:] {
			want := 0
			if wants(i + 1) {
				want = 1
			}
			if got := n.countTAP(payload); got != want {
				t.Errorf("%s reached node %d's TAP %d times, want %d", payload, i+1, got, want)
			}
		}
	}
	for k := range 3 {
		send(group, fmt.Sprint("to-group-", k))
		check(fmt.Sprint("to-group-", k), func(i int) bool { return listeners[i] })
	}
	send(other, "to-no-one's-group")
	check("to-no-one's-group", func(int) bool { return true })
	send(mdns, "to-mdns")
	check("to-mdns", func(int) bool { return true })
	var pruned uint64
	for _, n := range w.nodes {
		pruned += n.node.Stats().MulticastPruned.Load()
	}
	if pruned < 3*5 {
		t.Errorf("%d group frames counted pruned, want at least 15", pruned)
	}
	if st := w.nodes[2].node.Status().Groups; len(st.Local) != 1 || st.Local[0] != group.String() {
		t.Errorf("node 2's groups: %+v", st)
	}

	w.nodes[2].fromTAP(w.igmpV2(2, group, false))
	w.advance(time.Second, 100*time.Millisecond)
	send(group, "after-a-leave")
	check("after-a-leave", func(i int) bool { return i == 5 })
	w.advance(groupMembership, time.Second) // node 5's host never reports again
	send(group, "after-it-ran-out")
	check("after-it-ran-out", func(int) bool { return true })
}

// TestEachNodeQueriesItsTAP: a node asks its TAP's hosts for their groups
// (IGMPv3 and MLDv2 general queries) at start, again soon after, and then
// every query interval.
func TestEachNodeQueriesItsTAP(t *testing.T) {
	w := newOverlayNet(t, 1, 32, overlay.Params{})
	n := w.nodes[0]
	queries := func() (igmp, mld int) {
		for _, f := range n.tap {
			if eth, _ := l2.ParseEthernet(f); eth.Src == querierMAC(n.node.Self()) {
				if eth.EtherType == l2.EtherTypeIPv4 {
					igmp++
				} else {
					mld++
				}
			}
		}
		return
	}
	w.advance(time.Second, 100*time.Millisecond)
	if igmp, mld := queries(); igmp != 1 || mld != 1 {
		t.Fatalf("after 1 s: %d IGMP and %d MLD queries, want 1 each", igmp, mld)
	}
	w.advance(groupStartupInterval+groupQueryInterval+time.Second, time.Second)
	if igmp, mld := queries(); igmp != 3 || mld != 3 {
		t.Fatalf("after one query interval: %d IGMP and %d MLD queries, want 3 each", igmp, mld)
	}
}
