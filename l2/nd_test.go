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
		nd, err := ParseND(b)
		if err != nil {
			return
		}
		switch nd.Message.(type) {
		case *ndp.NeighborSolicitation, *ndp.NeighborAdvertisement:
		default:
			t.Fatalf("parsed a %T", nd.Message)
		}
		nd.LinkLayerAddress()
	})
}
