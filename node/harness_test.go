package node

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/curve25519"

	"burrow/firewall"
	"burrow/l2"
	"burrow/link"
	"burrow/nid"
	"burrow/wire"
)

// testNet runs several nodes over an in-memory network, driving each core
// and data path the way the runtime does, one event at a time.
type testNet struct {
	t      testing.TB
	now    time.Time
	nodes  []*testNode
	byAddr map[netip.AddrPort]*testNode
	queue  []packet
	down   map[*testNode]bool
	keys   map[string][32]byte
	// blocked drops datagrams between two addresses (from, to), as a
	// firewall or NAT that lets nothing through would.
	blocked map[[2]netip.AddrPort]bool
	// transportBlocked drops the transport datagrams (data, keepalives,
	// probes) between two addresses but lets handshakes through: a peer
	// whose answer to a handshake comes before its first message.
	transportBlocked map[[2]netip.AddrPort]bool
	// nats are the NAT routers nodes sit behind, by public address.
	nats map[netip.Addr]*testNAT
	// stalled nodes' cores get no ticks and handle no events, as on a
	// machine too loaded to run them, while their data paths go on.
	stalled map[*testNode]bool
	// groups are the certificate groups of nodes by name, and firewalls
	// the firewalls of nodes added after they are set.
	groups    map[string][]string
	firewalls map[string]*firewall.Firewall
	// addresses are the fixed addresses of nodes' certificates by name.
	addresses map[string][]netip.Prefix
	// services are the services of nodes added after they are set.
	services map[string]ServicesConfig
	// cards, when set, is the rendezvous server of nodes added after it
	// is, and rendezvous their configuration.
	cards      *cardServer
	rendezvous RendezvousConfig
}

type packet struct {
	from, to netip.AddrPort
	b        []byte
}

type testNode struct {
	w      *testNet
	name   string
	addr   netip.AddrPort
	mac    l2.MAC
	node   *Node
	worker *Worker
	tap    [][]byte // frames written to the TAP
	slow   []Event
	// handed counts the events the data path handed to the core, by kind.
	handed map[EventKind]int
	// learnedRevocations are the revocations the node asked to keep.
	learnedRevocations []RevokedNode
	// addr6, when valid, is the node's IPv6 address: datagrams to IPv6
	// addresses leave from it (giveIPv6).
	addr6 netip.AddrPort
	// nat, when set, is the NAT router the node sits behind (behindNAT).
	nat *testNAT
	// seed, overlay and reach are what the node was made with, for restart.
	seed    uint64
	overlay OverlayConfig
	reach   ReachConfig
}

func (n *testNode) SendDatagram(to link.Endpoint, b []byte) {
	if to.IsRelay() {
		n.w.t.Fatalf("%s: the core handed a relayed endpoint to its output", n.name)
	}
	from := n.addr
	if to.Addr.Addr().Is6() {
		if from = n.addr6; !from.IsValid() {
			return // no IPv6 route
		}
	}
	if n.nat != nil {
		from = n.nat.translate(insideSocket{n, to.Via == link.Spare, to.Socket}, to.Addr)
	}
	n.w.queue = append(n.w.queue, packet{from, to.Addr, bytes.Clone(b)})
}

// giveIPv6 makes n dual-stack: an IPv6 address it advertises beside its
// IPv4 one, and sends from to IPv6 destinations.
func (w *testNet) giveIPv6(n *testNode) {
	n.addr6 = netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", len(w.byAddr)+1)), n.addr.Port())
	w.byAddr[n.addr6] = n
	n.node.ov.cfg.Advertise = append(n.node.ov.cfg.Advertise, n.addr6)
}

func (n *testNode) WriteFrame(frame []byte, off l2.Offload) {
	n.tap = append(n.tap, bytes.Clone(frame))
}

func (n *testNode) Frame(frame []byte, off l2.Offload) { n.WriteFrame(frame, off) }

func (w *testNet) verify(cert []byte, static [32]byte, now time.Time) (link.Peer, error) {
	if key, ok := w.keys[string(cert)]; !ok || key != static {
		return link.Peer{}, errors.New("not a member")
	}
	return link.Peer{ID: nid.FromPublicKey(static), Name: string(cert), Groups: w.groups[string(cert)], Addresses: w.addresses[string(cert)]}, nil
}

// revocationPrefix starts a test revocation; the revoked node's name
// follows. The CA's signature is the runtime's to check.
const revocationPrefix = "revoke:"

func (w *testNet) verifyRevocation(raw []byte) (RevokedNode, error) {
	name, ok := strings.CutPrefix(string(raw), revocationPrefix)
	key, known := w.keys[name]
	if !ok || !known {
		return RevokedNode{}, errors.New("not a revocation by the CA")
	}
	return RevokedNode{ID: nid.FromPublicKey(key), Name: name}, nil
}

// newTestNet makes n nodes with self-organization off: tests link them.
func newTestNet(t testing.TB, n int, seed uint64) *testNet {
	w := &testNet{t: t, now: time.Unix(1_000_000, 0), byAddr: map[netip.AddrPort]*testNode{}, down: map[*testNode]bool{}, keys: map[string][32]byte{}}
	for i := range n {
		w.add(fmt.Sprintf("n%d", i), seed*1000+uint64(i), OverlayConfig{Disabled: true})
	}
	return w
}

func (w *testNet) add(name string, seed uint64, ov OverlayConfig) *testNode {
	return w.addWith(name, seed, ov, ReachConfig{})
}

func (w *testNet) addWith(name string, seed uint64, ov OverlayConfig, reach ReachConfig) *testNode {
	i := len(w.nodes)
	tn := &testNode{w: w, name: name, addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, byte(2 + i/250), byte(i%250 + 1)}), 4000),
		mac: l2.MAC{2, 0, 0, 0, byte(i >> 8), byte(i + 1)}, seed: seed, overlay: ov, reach: reach}
	w.start(tn, 0)
	w.nodes = append(w.nodes, tn)
	w.byAddr[tn.addr] = tn
	return tn
}

// restart starts tn afresh, as a daemon that was killed and started
// again: the same key and address, nothing else kept.
func (w *testNet) restart(tn *testNode) {
	tn.slow, tn.tap = nil, nil
	w.start(tn, len(w.nodes)+1)
	delete(w.down, tn)
}

// start makes tn's node from its seed; boot varies the node's randomness
// (and so its boot ID) but not its key.
func (w *testNet) start(tn *testNode, boot int) {
	seed, name, ov := tn.seed, tn.name, tn.overlay
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	var priv, pub [32]byte
	rng.Read(priv[:])
	p, _ := curve25519.X25519(priv[:], curve25519.Basepoint)
	copy(pub[:], p)
	w.keys[name] = pub
	if boot > 0 {
		rng = rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(boot), byte(boot >> 8), 1})
	}
	ov.Advertise = []netip.AddrPort{tn.addr}
	node, err := New(Config{
		Name:      name,
		Handshake: link.HandshakeConfig{Network: "test", Private: priv, Public: pub, Cert: []byte(name), AESFast: true, Rand: rng},
		Verify:    w.verify,
		Revocations: RevocationConfig{Verify: w.verifyRevocation, Learned: func(raw []byte, r RevokedNode) {
			tn.learnedRevocations = append(tn.learnedRevocations, r)
		}},
		MAC:        tn.mac,
		Overlay:    ov,
		Reach:      tn.reach,
		Rendezvous: w.rendezvous,
		Firewall:   w.firewalls[name],
		Services:   w.services[name],
	}, tn, w.now)
	if err != nil {
		w.t.Fatal(err)
	}
	tn.node = node
	tn.handed = map[EventKind]int{}
	tn.worker = &Worker{Frames: tn, Slow: func(ev Event) {
		tn.slow = append(tn.slow, ev)
		tn.handed[ev.Kind]++
	}}
	tn.worker.Tx = NewTxBatch(128, 2048, func(msgs []TxMsg) {
		for _, m := range msgs {
			tn.SendDatagram(m.To, m.Buf)
		}
	})
}

// connect makes a dial from a to b (links are bidirectional once up).
func (w *testNet) connect(a, b int) {
	pub := w.keys[w.nodes[b].name]
	w.nodes[a].node.Links().AddDial([]link.Endpoint{link.UDPEndpoint(w.nodes[b].addr)}, link.DialOptions{Key: &pub}, w.now)
}

// drain delivers queued datagrams and slow-path events until quiet.
func (w *testNet) drain() {
	for steps := 0; ; steps++ {
		if steps > 1_000_000 {
			w.t.Fatal("network never went quiet (a loop?)")
		}
		progressed := false
		for _, n := range w.nodes {
			for len(n.slow) > 0 && !w.stalled[n] {
				ev := n.slow[0]
				n.slow = n.slow[1:]
				n.node.Handle(ev, w.now)
				progressed = true
			}
			n.worker.Tx.Flush()
		}
		if w.cards != nil && w.cards.deliver() {
			progressed = true
		}
		if len(w.queue) == 0 {
			if !progressed {
				return
			}
			continue
		}
		p := w.queue[0]
		w.queue = w.queue[1:]
		dst, from := w.byAddr[p.to], link.UDPEndpoint(p.from)
		if dst == nil {
			dst, from = w.throughNAT(p)
		}
		if dst == nil || w.down[dst] || w.down[w.byAddr[p.from]] || w.blocked[[2]netip.AddrPort{p.from, p.to}] ||
			w.transportBlocked[[2]netip.AddrPort{p.from, p.to}] && wire.Type(p.b[0]) == wire.TypeTransport {
			continue
		}
		dst.node.Dataplane().FromNetwork(dst.worker, from, p.b, w.now.UnixNano())
	}
}

// advance moves time forward in steps, ticking every live node.
func (w *testNet) advance(d, step time.Duration) {
	for end := w.now.Add(d); w.now.Before(end); {
		w.now = w.now.Add(step)
		for _, n := range w.nodes {
			if !w.down[n] && !w.stalled[n] {
				n.node.Tick(w.now)
			}
		}
		w.drain()
	}
}

// fromTAP injects a frame as if the local kernel wrote it to the TAP.
func (n *testNode) fromTAP(frame []byte) {
	n.node.Dataplane().FromTAP(n.worker, l2.VirtioNetHdr{}, frame, n.w.now.UnixNano())
	n.w.drain()
}

func ethFrame(dst, src l2.MAC, payload string) []byte {
	f := append(append(append([]byte{}, dst[:]...), src[:]...), 0x88, 0xb5)
	return append(f, payload...)
}

func (n *testNode) countTAP(payload string) int {
	c := 0
	for _, f := range n.tap {
		if bytes.HasSuffix(f, []byte(payload)) {
			c++
		}
	}
	return c
}
