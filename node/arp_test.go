package node

import (
	"net/netip"
	"testing"
	"time"

	"burrow/l2"
	"burrow/overlay"
)

// hostIP is the address of node i's host in the ARP tests.
func hostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}) }

func arpFrame(op l2.ARPOp, srcMAC l2.MAC, srcIP netip.Addr, dstMAC l2.MAC, dstIP netip.Addr) []byte {
	ethDst := dstMAC
	if op == l2.ARPRequest {
		ethDst = l2.Broadcast
	}
	f := (l2.Ethernet{Dst: ethDst, Src: srcMAC, EtherType: l2.EtherTypeARP}).AppendHeader(nil)
	f, _ = l2.AppendARP(f, l2.ARP{Op: op, SenderMAC: srcMAC, SenderIP: srcIP, TargetMAC: dstMAC, TargetIP: dstIP})
	return f
}

// neighborProtocol is ARP or IPv6 neighbour discovery as the tests play
// it: the request host i sends for host j's address, the reply host i's
// kernel gives to a frame that reached its TAP (nil when none), and what a
// reply on host i's TAP says about host j: whether it is one, and whether
// it is right.
type neighborProtocol struct {
	request  func(w *testNet, i, j int) []byte
	kernel   func(w *testNet, i int, f []byte) []byte
	replyFor func(w *testNet, j int, f []byte) (isReply, right bool)
	answered func(n *Node) uint64
}

var arpProtocol = neighborProtocol{
	request: func(w *testNet, i, j int) []byte {
		return arpFrame(l2.ARPRequest, w.nodes[i].mac, hostIP(i), l2.MAC{}, hostIP(j))
	},
	kernel: func(w *testNet, i int, f []byte) []byte {
		eth, err := l2.ParseEthernet(f)
		if err != nil || eth.EtherType != l2.EtherTypeARP {
			return nil
		}
		a, err := l2.ParseARP(f[eth.PayloadOffset:])
		if err != nil || a.Op != l2.ARPRequest || a.TargetIP != hostIP(i) {
			return nil
		}
		return arpFrame(l2.ARPReply, w.nodes[i].mac, hostIP(i), a.SenderMAC, a.SenderIP)
	},
	replyFor: func(w *testNet, j int, f []byte) (bool, bool) {
		eth, _ := l2.ParseEthernet(f)
		a, err := l2.ParseARP(f[eth.PayloadOffset:])
		if err != nil || a.Op != l2.ARPReply || a.SenderIP != hostIP(j) {
			return false, false
		}
		return true, a.SenderMAC == w.nodes[j].mac
	},
	answered: func(n *Node) uint64 { return n.Stats().ARPAnswered.Load() },
}

// playKernels has each node's kernel answer what reached its TAP since
// seen; it reports the replies sent.
func (w *testNet) playKernels(p neighborProtocol, seen map[*testNode]int) int {
	replies := 0
	for i, n := range w.nodes {
		for _, f := range n.tap[seen[n]:] {
			if reply := p.kernel(w, i, f); reply != nil {
				n.fromTAP(reply)
				replies++
			}
		}
		seen[n] = len(n.tap)
	}
	return replies
}

// checkNeighborAnswering is the 16-node simulation of answering a neighbour
// protocol: after one round in which every host resolves every other by
// broadcast, a second round (the kernels' caches expired) is answered by
// the nodes themselves, from what they snooped and the DHT, and correctly.
func checkNeighborAnswering(t *testing.T, p neighborProtocol) {
	w := newOverlayNet(t, 16, 21, overlay.Params{Successors: 2, LongDistance: 2})
	for _, n := range w.nodes {
		n.node.cfg.Services.ARPAnswer = true
	}
	w.settle(t, 60*time.Second)
	w.advance(5*time.Second, 500*time.Millisecond)
	seen := map[*testNode]int{}
	round := func() (floods, answered uint64, wrong int) {
		floodsBefore, answeredBefore := uint64(0), uint64(0)
		for _, n := range w.nodes {
			floodsBefore += n.node.Stats().FloodsStarted.Load()
			answeredBefore += p.answered(n.node)
		}
		for i, n := range w.nodes {
			for j := range w.nodes {
				if i == j {
					continue
				}
				mark := len(n.tap)
				n.fromTAP(p.request(w, i, j))
				w.playKernels(p, seen)
				// The reply the requester's kernel sees must name j's MAC.
				found := false
				for _, f := range n.tap[mark:] {
					if isReply, right := p.replyFor(w, j, f); isReply {
						found = right
					}
				}
				if !found {
					wrong++
				}
			}
		}
		for _, n := range w.nodes {
			floods += n.node.Stats().FloodsStarted.Load()
			answered += p.answered(n.node)
		}
		return floods - floodsBefore, answered - answeredBefore, wrong
	}
	f1, a1, wrong1 := round()
	f2, a2, wrong2 := round()
	pairs := len(w.nodes) * (len(w.nodes) - 1)
	t.Logf("%d nodes, %d requests per round: first round %d broadcasts, %d answered locally; second round %d broadcasts, %d answered locally (%d broadcasts saved)",
		len(w.nodes), pairs, f1, a1, f2, a2, a2)
	if wrong1+wrong2 != 0 {
		t.Fatalf("%d requests got no reply or a wrong one", wrong1+wrong2)
	}
	if a2 < uint64(pairs)*9/10 {
		t.Fatalf("second round: only %d of %d requests answered locally", a2, pairs)
	}
	if f2 > uint64(pairs)/10 {
		t.Fatalf("second round still flooded %d times", f2)
	}
}

func TestARPAnsweringSavesBroadcasts(t *testing.T) { checkNeighborAnswering(t, arpProtocol) }
