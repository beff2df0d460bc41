package sim

import (
	"crypto/ecdh"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"burrow/l2"
	"burrow/link"
	"burrow/nid"
	"burrow/node"
	"burrow/overlay"
)

// NodeConfig is one node's settings. Nodes may differ (experiment E5).
type NodeConfig struct {
	Params   overlay.Params
	OnDemand node.OnDemandConfig
	// StabilizeEvery and HealEvery override the core's defaults when set.
	StabilizeEvery, HealEvery time.Duration
	Timers                    link.Timers
	// MaxMACs bounds the learning table; small tables keep 10,000 nodes in
	// memory. Zero means the core's default.
	MaxMACs int
	// Bootstrap are the nodes (by index) it contacts to join.
	Bootstrap []int
}

// Node is one simulated machine: a node core, its address on the
// simulated network, and one virtual host behind its TAP whose MAC is the
// node's configured MAC. The core is replaced on every restart; the key,
// ID, address and MAC stay.
type Node struct {
	sim    *Sim
	Index  int
	Name   string
	ID     nid.ID
	MAC    l2.MAC
	Addr   netip.AddrPort
	Config NodeConfig

	priv, pub [32]byte
	cert      []byte
	core      *node.Node
	up        bool
	leaving   bool  // stopped gracefully, draining until it is killed
	group     int32 // side of a partition; only equal sides reach each other
	// remembered carries what the last incarnation knew to the next, as
	// the daemon keeps it on disk.
	remembered []overlay.Info
	// revocations are those the node kept, as the daemon keeps them in
	// its state directory; RevocationsLearned says when it learned each.
	revocations        [][]byte
	RevocationsLearned []RevocationLearned

	timerAt    int64
	timerArmed bool
	timerGen   uint32
	lastTick   int64
	// ticksAtLast counts the ticks at lastTick.
	ticksAtLast int
	slow        []node.Event

	traffic Traffic
	// tag is the flow whatever the node does counts toward, -1 for none.
	tag int32
	// What the core did with the datagram being delivered, to classify it.
	rxInner byte
	rxData  bool
}

// AddNode creates a node that is not running yet; Start it. Its key
// derives from the seed and its index, so it is the same on every run and
// after restarts.
func (s *Sim) AddNode(cfg NodeConfig) *Node {
	i := len(s.nodes)
	if i >= 1<<24-2 {
		panic("sim: too many nodes")
	}
	n := &Node{
		sim:    s,
		Index:  i,
		Name:   fmt.Sprintf("n%d", i),
		Addr:   addrOf(i),
		MAC:    l2.MAC{0x02, 0x5b, 0, byte(i >> 16), byte(i >> 8), byte(i)},
		Config: cfg,
		cert:   binary.BigEndian.AppendUint32([]byte("sim-cert"), uint32(i)),
		tag:    -1,
	}
	var seed [32]byte
	for w := range 4 {
		binary.LittleEndian.PutUint64(seed[8*w:], splitmix64(s.cfg.Seed^uint64(i)<<20^uint64(w)))
	}
	rand.NewChaCha8(seed).Read(n.priv[:])
	key, err := ecdh.X25519().NewPrivateKey(n.priv[:])
	if err != nil {
		panic(err) // 32 bytes are always a valid X25519 key
	}
	copy(n.pub[:], key.PublicKey().Bytes())
	s.dh.statics[n.priv] = n.pub
	n.ID = nid.FromPublicKey(n.pub)
	s.nodes = append(s.nodes, n)
	return n
}

// addrOf gives node i the address 10.x.y.z:4000 with xyz = i+1, so the
// engine finds a node from an address without a map.
func addrOf(i int) netip.AddrPort {
	v := i + 1
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(v >> 16), byte(v >> 8), byte(v)}), 4000)
}

func (s *Sim) lookup(ap netip.AddrPort) *Node {
	a := ap.Addr()
	if !a.Is4() || ap.Port() != 4000 {
		return nil
	}
	b := a.As4()
	if b[0] != 10 {
		return nil
	}
	i := int(b[1])<<16 | int(b[2])<<8 | int(b[3]) - 1
	if i < 0 || i >= len(s.nodes) {
		return nil
	}
	return s.nodes[i]
}

// verify is the network's certificate authority: a certificate names a
// node index, and is valid for that node's key only.
func (s *Sim) verify(cert []byte, static [32]byte, now time.Time) (link.Peer, error) {
	const prefix = len("sim-cert")
	if len(cert) != prefix+4 {
		return link.Peer{}, errors.New("sim: not a member")
	}
	i := int(binary.BigEndian.Uint32(cert[prefix:]))
	if i >= len(s.nodes) || s.nodes[i].pub != static {
		return link.Peer{}, errors.New("sim: not a member")
	}
	return link.Peer{ID: s.nodes[i].ID, Name: s.nodes[i].Name}, nil
}

// revocationPrefix starts a simulated revocation, which the CA's
// signature stands for; the revoked node's index follows.
const revocationPrefix = "sim-revoke"

// RevocationLearned is when a node learned that another was revoked.
type RevocationLearned struct {
	Node nid.ID
	At   time.Duration // since the simulation started
}

func (s *Sim) verifyRevocation(raw []byte) (node.RevokedNode, error) {
	if len(raw) != len(revocationPrefix)+4 || string(raw[:len(revocationPrefix)]) != revocationPrefix {
		return node.RevokedNode{}, errors.New("sim: not a revocation by the CA")
	}
	i := int(binary.BigEndian.Uint32(raw[len(revocationPrefix):]))
	if i >= len(s.nodes) {
		return node.RevokedNode{}, errors.New("sim: revocation of no node")
	}
	return node.RevokedNode{ID: s.nodes[i].ID, Name: s.nodes[i].Name}, nil
}

// Revoke hands the node at index by a revocation of the node at index
// revoked, as `burrow cert revoke --push` on by would.
func (s *Sim) Revoke(by, revoked int) error {
	raw := binary.BigEndian.AppendUint32([]byte(revocationPrefix), uint32(revoked))
	n := s.nodes[by]
	s.curNode, s.cur = n, cause{flow: n.tag}
	_, _, err := n.core.Revoke(raw, s.Now())
	n.rearm()
	return err
}

// Nodes returns every node ever added, running or not, by index.
func (s *Sim) Nodes() []*Node { return s.nodes }

// Node returns node i.
func (s *Sim) Node(i int) *Node { return s.nodes[i] }

// UpCount is how many nodes are running.
func (s *Sim) UpCount() int {
	c := 0
	for _, n := range s.nodes {
		if n.up {
			c++
		}
	}
	return c
}

// Up reports whether the node is running.
func (n *Node) Up() bool { return n.up }

// Core is the node's current core (nil before the first start). After a
// kill it is the last incarnation's, for inspection only.
func (n *Node) Core() *node.Node { return n.core }

// Traffic is what the node sent so far, by kind.
func (n *Node) Traffic() Traffic { return n.traffic }

// Start runs the node now: a new core with the node's key, which joins
// through its bootstrap nodes and, after a restart, the nodes its last
// incarnation remembered.
func (n *Node) Start() {
	if n.leaving {
		n.Kill() // started again before its drain ended: the drain is cut short
	}
	if n.up {
		return
	}
	s := n.sim
	var seed [32]byte
	for w := range 4 {
		binary.LittleEndian.PutUint64(seed[8*w:], s.rng.Uint64())
	}
	ov := node.OverlayConfig{
		Params:         n.Config.Params,
		Advertise:      []netip.AddrPort{n.Addr},
		StabilizeEvery: n.Config.StabilizeEvery,
		HealEvery:      n.Config.HealEvery,
		OnDemand:       n.Config.OnDemand,
		Remembered:     n.remembered,
	}
	for _, b := range n.Config.Bootstrap {
		if b != n.Index {
			ov.Bootstrap = append(ov.Bootstrap, s.nodes[b].Addr)
		}
	}
	// Without AESFast the links choose ChaCha20-Poly1305, whose state is
	// its 32-byte key; an AES-GCM session holds about 1.5 KB of key
	// schedules and tables, a fifth of a simulated node's memory. The
	// datagrams are as long either way.
	core, err := node.New(node.Config{
		Handshake: link.HandshakeConfig{Network: "sim", Private: n.priv, Public: n.pub, Cert: n.cert, Rand: rand.NewChaCha8(seed), DH: &s.dh},
		Verify:    s.verify,
		Timers:    n.Config.Timers,
		MAC:       n.MAC,
		MaxMACs:   n.Config.MaxMACs,
		Trace:     node.Trace{Delivered: n.delivered},
		Overlay:   ov,
		Revocations: node.RevocationConfig{Verify: s.verifyRevocation, Known: n.revocations, Learned: func(raw []byte, r node.RevokedNode) {
			n.revocations = append(n.revocations, raw)
			n.RevocationsLearned = append(n.RevocationsLearned, RevocationLearned{Node: r.ID, At: s.Elapsed()})
		}},
	}, (*output)(n), s.Now())
	if err != nil {
		panic(err) // the engine always supplies Verify and Rand
	}
	n.core, n.up = core, true
	n.timerArmed = false
	n.rearm()
}

// Kill stops the node silently: it neither processes nor receives from now
// on, and its neighbours find out by its silence.
func (n *Node) Kill() {
	if !n.up {
		return
	}
	n.leaving = false
	n.remembered = n.core.Remembered()
	n.up = false
	n.timerGen++ // its pending tick is stale now
	clear(n.slow)
	n.slow = n.slow[:0]
}

// Stop leaves gracefully: the core tells its neighbours, keeps switching
// for node.LeaveDrain as the daemon does, then stops.
func (n *Node) Stop() {
	if !n.up || n.leaving {
		return
	}
	s := n.sim
	s.curNode, s.cur = n, cause{flow: n.tag}
	n.core.Leave(s.Now())
	n.leaving = true
	core := n.core
	s.push(event{at: s.now + int64(node.LeaveDrain), kind: evCall, fn: func() {
		if n.core == core {
			n.Kill()
		}
	}})
}

// output carries a core's actions into the simulation.
type output Node

func (o *output) SendDatagram(to link.Endpoint, b []byte) {
	n := (*Node)(o)
	n.sim.send(n, to, b)
}

func (o *output) WriteFrame(frame []byte, off l2.Offload) {
	n := (*Node)(o)
	n.sim.toHost(n, frame)
}

// hostSink receives the frames the data path writes to the TAP of the
// node being handled.
type hostSink Sim

func (h *hostSink) Frame(frame []byte, off l2.Offload) {
	s := (*Sim)(h)
	s.curNode.rxData = true
	s.toHost(s.curNode, frame)
}

// slowEvent keeps what the data path of the node being handled passes to
// its core.
func (s *Sim) slowEvent(ev node.Event) {
	n := s.curNode
	if ev.Kind == node.EventFromLink && len(ev.Data) > 0 {
		n.rxInner = ev.Data[0]
	}
	n.slow = append(n.slow, ev)
}

// handleSlowAndRearm hands the core what its data path could not finish,
// at the same virtual instant, sends what either produced, and reschedules
// the core's tick if the core ran. Like the daemon, which resets its timer
// only after the core handled something, it leaves the tick alone after
// the data path alone: that only receives and sends on links, which moves
// deadlines later (keepalive and dead-peer timers), so the armed tick is
// at worst early, and asking the core for its deadline after every
// keepalive was a seventh of the run.
func (s *Sim) handleSlowAndRearm(n *Node) {
	handled := len(n.slow) > 0
	for i := 0; i < len(n.slow); i++ {
		n.core.Handle(n.slow[i], s.Now())
	}
	clear(n.slow)
	n.slow = n.slow[:0]
	s.flush()
	if handled {
		n.rearm()
	}
}

// spinDelay defers a tick the core wants again at an instant it was
// already ticked at twice. The core's NextDeadline stays in the past while
// a rekey handshake is in flight (see docs/simulation.md), and a driver
// taking it literally would tick in a loop without time passing. The
// second tick at one instant is allowed because a tick may schedule new
// work for right now (a stabilization after a new successor).
const spinDelay = int64(10 * time.Millisecond)

// rearm schedules the node's next tick at its NextDeadline, replacing the
// pending one if the deadline moved.
func (n *Node) rearm() {
	if !n.up {
		return
	}
	s := n.sim
	at := n.core.NextDeadline(s.Now()).UnixNano()
	spin := at <= s.now && n.lastTick == s.now && n.ticksAtLast >= 2
	if spin {
		at = s.now + spinDelay
	}
	if n.timerArmed && n.timerAt == at {
		return
	}
	if spin {
		s.stats.Spins++
	}
	n.timerGen++
	n.timerAt, n.timerArmed = at, true
	s.push(event{at: at, kind: evTimer, node: int32(n.Index), gen: n.timerGen})
}

func (s *Sim) tick(e *event) {
	n := s.nodes[e.node]
	if !n.up || e.gen != n.timerGen {
		return // replaced by a later rearm, or the node died
	}
	n.timerArmed = false
	if n.lastTick == s.now {
		n.ticksAtLast++
	} else {
		n.lastTick, n.ticksAtLast = s.now, 1
	}
	s.stats.Ticks++
	s.curNode, s.cur = n, cause{flow: n.tag}
	n.core.Tick(s.Now())
	s.flush()
	n.rearm()
}

// StartStaggered starts nodes one after the other, every apart from now,
// each joining through contacts random nodes that have found their place
// on the ring (or, while none has, any that are up; the first node alone
// starts a new ring).
func (s *Sim) StartStaggered(nodes []*Node, every time.Duration, contacts int) {
	for k, n := range nodes {
		s.After(time.Duration(k)*every, func() {
			n.Config.Bootstrap = s.contacts(contacts)
			n.Start()
		})
	}
}

// contacts picks up to count distinct random running nodes, preferring
// those that have joined the ring. It samples rather than scanning, so
// that starting many nodes stays linear.
func (s *Sim) contacts(count int) []int {
	var picked []int
	pick := func(ok func(*Node) bool) {
		for try := 0; try < 64 && len(picked) < count; try++ {
			n := s.nodes[s.rng.IntN(len(s.nodes))]
			if n.up && ok(n) && !slices.Contains(picked, n.Index) {
				picked = append(picked, n.Index)
			}
		}
	}
	pick(func(n *Node) bool { return n.core.Joined() })
	pick(func(*Node) bool { return true })
	for _, n := range s.nodes {
		if len(picked) == count {
			break
		}
		if n.up && !slices.Contains(picked, n.Index) {
			picked = append(picked, n.Index)
		}
	}
	return picked
}

// ColdStart starts nodes spread evenly over the next over, each with its
// successor on the ring-to-be as bootstrap contact, as a provisioning
// tool that knows every key would set them up. A whole overlay then
// forms in a few round trips instead of growing one join at a time.
func (s *Sim) ColdStart(nodes []*Node, over time.Duration) {
	ring := slices.Clone(nodes)
	slices.SortFunc(ring, func(a, b *Node) int { return a.ID.Compare(b.ID) })
	for i, n := range ring {
		n.Config.Bootstrap = []int{ring[(i+1)%len(ring)].Index}
	}
	for k, n := range nodes {
		s.After(time.Duration(k)*over/time.Duration(len(nodes)), n.Start)
	}
}
