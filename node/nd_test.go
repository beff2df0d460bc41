package node

import (
	"net"
	"net/netip"
	"testing"

	"burrow/l2"

	"github.com/mdlayher/ndp"
)

// hostIP6 is the IPv6 address of node i's host in the ND tests; host 0 is
// a router.
func hostIP6(i int) netip.Addr { return netip.AddrFrom16([16]byte{0xfd, 15: byte(i + 1)}) }

// solicitation is the frame a host sends to resolve target, to target's
// solicited-node group.
func solicitation(srcMAC l2.MAC, src, target netip.Addr) []byte {
	group, _ := ndp.SolicitedNodeMulticast(target)
	g := group.As16()
	ns := &ndp.NeighborSolicitation{TargetAddress: target,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: net.HardwareAddr(srcMAC[:])}}}
	f, err := l2.AppendND(nil, l2.ND{Eth: l2.Ethernet{Dst: l2.MAC{0x33, 0x33, g[12], g[13], g[14], g[15]}, Src: srcMAC}, Src: src, Dst: group, Message: ns})
	if err != nil {
		panic(err)
	}
	return f
}

var ndProtocol = neighborProtocol{
	request: func(w *testNet, i, j int) []byte { return solicitation(w.nodes[i].mac, hostIP6(i), hostIP6(j)) },
	kernel: func(w *testNet, i int, f []byte) []byte {
		nd, err := l2.ParseND(f)
		if err != nil {
			return nil
		}
		ns, ok := nd.Message.(*ndp.NeighborSolicitation)
		if !ok || ns.TargetAddress != hostIP6(i) {
			return nil
		}
		reply, err := l2.AppendNeighborAdvertisement(nil, nd.Eth.Src, nd.Src, w.nodes[i].mac, hostIP6(i), i == 0)
		if err != nil {
			panic(err)
		}
		return reply
	},
	replyFor: func(w *testNet, j int, f []byte) (bool, bool) {
		nd, err := l2.ParseND(f) // checks the checksum too
		if err != nil {
			return false, false
		}
		na, ok := nd.Message.(*ndp.NeighborAdvertisement)
		if !ok || na.TargetAddress != hostIP6(j) {
			return false, false
		}
		mac, ok := nd.LinkLayerAddress()
		return true, ok && mac == w.nodes[j].mac && nd.Eth.Src == w.nodes[j].mac && na.Solicited && na.Router == (j == 0) && nd.Src == hostIP6(j)
	},
	answered: func(n *Node) uint64 { return n.Stats().NDAnswered.Load() },
}

// TestNeighborSolicitationAnsweringSavesMulticasts: IPv6 hosts resolve each
// other as the ARP test's do; the second round is answered by the nodes,
// with the router's advertisement keeping its router flag.
func TestNeighborSolicitationAnsweringSavesMulticasts(t *testing.T) {
	checkNeighborAnswering(t, ndProtocol)
}
