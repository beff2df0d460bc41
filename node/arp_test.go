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

// answerARPs plays each node's kernel: an ARP request for the host's
// address that reached its TAP gets a reply. It reports the replies sent.
func (w *testNet) answerARPs(seen map[*testNode]int) int {
	replies := 0
	for i, n := range w.nodes {
		for _, f := range n.tap[seen[n]:] {
			eth, err := l2.ParseEthernet(f)
			if err != nil || eth.EtherType != l2.EtherTypeARP {
				continue
			}
			a, err := l2.ParseARP(f[eth.PayloadOffset:])
			if err == nil && a.Op == l2.ARPRequest && a.TargetIP == hostIP(i) {
				n.fromTAP(arpFrame(l2.ARPReply, n.mac, hostIP(i), a.SenderMAC, a.SenderIP))
				replies++
			}
		}
		seen[n] = len(n.tap)
	}
	return replies
}

// TestARPAnsweringSavesBroadcasts is the 16-node simulation of ARP
// answering: after one round in which every host resolves every other by
// broadcast, a second round (the kernels' caches expired) is answered by
// the nodes themselves, from what they snooped, and correctly.
func TestARPAnsweringSavesBroadcasts(t *testing.T) {
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
			answeredBefore += n.node.Stats().ARPAnswered.Load()
		}
		for i, n := range w.nodes {
			for j := range w.nodes {
				if i == j {
					continue
				}
				mark := len(n.tap)
				n.fromTAP(arpFrame(l2.ARPRequest, n.mac, hostIP(i), l2.MAC{}, hostIP(j)))
				w.answerARPs(seen)
				// The reply the requester's kernel sees must name j's MAC.
				found := false
				for _, f := range n.tap[mark:] {
					eth, _ := l2.ParseEthernet(f)
					if a, err := l2.ParseARP(f[eth.PayloadOffset:]); err == nil && a.Op == l2.ARPReply && a.SenderIP == hostIP(j) {
						found = a.SenderMAC == w.nodes[j].mac
					}
				}
				if !found {
					wrong++
				}
			}
		}
		for _, n := range w.nodes {
			floods += n.node.Stats().FloodsStarted.Load()
			answered += n.node.Stats().ARPAnswered.Load()
		}
		return floods - floodsBefore, answered - answeredBefore, wrong
	}
	f1, a1, wrong1 := round()
	f2, a2, wrong2 := round()
	pairs := len(w.nodes) * (len(w.nodes) - 1)
	t.Logf("%d nodes, %d ARP requests per round: first round %d broadcasts, %d answered locally; second round %d broadcasts, %d answered locally (%d broadcasts saved)",
		len(w.nodes), pairs, f1, a1, f2, a2, a2)
	if wrong1+wrong2 != 0 {
		t.Fatalf("%d ARP requests got no reply or a wrong MAC", wrong1+wrong2)
	}
	if a2 < uint64(pairs)*9/10 {
		t.Fatalf("second round: only %d of %d requests answered locally", a2, pairs)
	}
	if f2 > uint64(pairs)/10 {
		t.Fatalf("second round still flooded %d times", f2)
	}
}
