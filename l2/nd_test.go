package l2

import (
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/ndp"
)

var (
	ndAsker  = netip.MustParseAddr("fe80::1")
	ndTarget = netip.MustParseAddr("fd42::2")
)

func TestNeighborAdvertisementRoundTrip(t *testing.T) {
	asker, target := MAC{2, 0, 0, 0, 0, 1}, MAC{2, 0, 0, 0, 0, 2}
	f, err := AppendNeighborAdvertisement(nil, asker, ndAsker, target, ndTarget, true)
	if err != nil {
		t.Fatal(err)
	}
	nd, err := ParseND(f)
	if err != nil {
		t.Fatal(err)
	}
	na, ok := nd.Message.(*ndp.NeighborAdvertisement)
	mac, hasMAC := nd.LinkLayerAddress()
	if !ok || !na.Router || !na.Solicited || na.TargetAddress != ndTarget || nd.Src != ndTarget || nd.Dst != ndAsker ||
		nd.Eth.Dst != asker || nd.Eth.Src != target || !hasMAC || mac != target {
		t.Fatalf("parsed %+v %+v", nd, nd.Message)
	}
	for _, bad := range []func([]byte){
		func(b []byte) { b[14+7] = 64 },  // hop limit: forwarded by a router
		func(b []byte) { b[len(b)-1]++ }, // checksum
		func(b []byte) { b[14+6] = 17 },  // not ICMPv6
	} {
		g := append([]byte(nil), f...)
		bad(g)
		if _, err := ParseND(g); err == nil {
			t.Fatalf("accepted %x", g)
		}
	}
}

func FuzzParseND(f *testing.F) {
	na, _ := AppendNeighborAdvertisement(nil, MAC{2, 0, 0, 0, 0, 1}, ndAsker, MAC{2, 0, 0, 0, 0, 2}, ndTarget, false)
	f.Add(na)
	ns, _ := AppendND(nil, ND{Eth: Ethernet{Dst: MAC{0x33, 0x33, 0xff, 0, 0, 2}, Src: MAC{2, 0, 0, 0, 0, 1}}, Src: ndAsker,
		Dst: netip.MustParseAddr("ff02::1:ff00:2"), Message: &ndp.NeighborSolicitation{TargetAddress: ndTarget,
			Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}}}})
	f.Add(ns)
	f.Add(na[:60])
	f.Fuzz(func(t *testing.T, b []byte) {
		target, advertised := AdvertisedAddr(b)
		nd, err := ParseND(b)
		if err != nil {
			return
		}
		switch m := nd.Message.(type) {
		case *ndp.NeighborSolicitation:
			if advertised {
				t.Fatalf("a solicitation read as advertising %v", target)
			}
		case *ndp.NeighborAdvertisement:
			if !advertised || target != m.TargetAddress {
				t.Fatalf("an advertisement of %v read as advertising %v (%v)", m.TargetAddress, target, advertised)
			}
		default:
			t.Fatalf("parsed a %T", nd.Message)
		}
		nd.LinkLayerAddress()
	})
}

func TestAdvertisedAddr(t *testing.T) {
	na, _ := AppendNeighborAdvertisement(nil, MAC{2, 0, 0, 0, 0, 1}, ndAsker, MAC{2, 0, 0, 0, 0, 2}, ndTarget, false)
	ns, _ := AppendND(nil, ND{Eth: Ethernet{Dst: MAC{0x33, 0x33, 0xff, 0, 0, 2}, Src: MAC{2, 0, 0, 0, 0, 1}}, Src: ndAsker,
		Dst: netip.MustParseAddr("ff02::1:ff00:2"), Message: &ndp.NeighborSolicitation{TargetAddress: ndTarget}})
	for _, c := range []struct {
		name  string
		frame []byte
		want  netip.Addr
	}{{"advertisement", na, ndTarget}, {"solicitation", ns, netip.Addr{}}, {"TCP", bulkFrame(), netip.Addr{}}, {"short", na[:70], netip.Addr{}}} {
		if got, ok := AdvertisedAddr(c.frame); got != c.want || ok != c.want.IsValid() {
			t.Errorf("%s: %v %v, want %v", c.name, got, ok, c.want)
		}
	}
}

func TestAnnouncesAddress(t *testing.T) {
	na, _ := AppendNeighborAdvertisement(nil, MAC{2, 0, 0, 0, 0, 1}, ndAsker, MAC{2, 0, 0, 0, 0, 2}, ndTarget, false)
	ns, _ := AppendND(nil, ND{Eth: Ethernet{Dst: MAC{0x33, 0x33, 0xff, 0, 0, 2}, Src: MAC{2, 0, 0, 0, 0, 1}}, Src: ndAsker,
		Dst: netip.MustParseAddr("ff02::1:ff00:2"), Message: &ndp.NeighborSolicitation{TargetAddress: ndTarget}})
	arp := (Ethernet{Dst: Broadcast, Src: MAC{2, 0, 0, 0, 0, 1}, EtherType: EtherTypeARP}).AppendHeader(nil)
	for _, c := range []struct {
		name  string
		frame []byte
		want  bool
	}{{"ARP", arp, true}, {"advertisement", na, true}, {"solicitation", ns, false}, {"TCP", bulkFrame(), false}, {"short", na[:20], false}} {
		if got := AnnouncesAddress(c.frame); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// bulkFrame is a full-sized IPv6 TCP frame.
func bulkFrame() []byte {
	frame := (Ethernet{Dst: MAC{2, 0, 0, 0, 0, 2}, Src: MAC{2, 0, 0, 0, 0, 1}, EtherType: EtherTypeIPv6}).AppendHeader(nil)
	frame = append(frame, make([]byte, 1400)...)
	frame[14], frame[14+6], frame[14+7] = 6<<4, 6, 64
	return frame
}

// BenchmarkAnnouncesAddressBulkFrame is what deciding whether the core must
// see a frame costs each frame of a flow.
func BenchmarkAnnouncesAddressBulkFrame(b *testing.B) {
	frame := bulkFrame()
	for b.Loop() {
		if AnnouncesAddress(frame) {
			b.Fatal("a TCP frame announces an address")
		}
	}
}
