package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/curve25519"

	"burrow/identity"
	"burrow/nid"
	"burrow/wire"
)

// testNode is a Manager with a recorder for its events.
type testNode struct {
	m       *Manager
	addr    netip.AddrPort
	outbox  []datagram
	ups     []nid.ID
	downs   []string
	changes int
	got     [][]byte // plaintexts opened by deliver
	failed  []*Dial
	health  []bool // Suspect() at each LinkHealth
	// sequence is every datagram sent (by its type) and every session
	// installed, in order.
	sequence []string
}

type datagram struct {
	from, to netip.AddrPort
	b        []byte
}

func (n *testNode) SendDatagram(to Endpoint, b []byte) {
	n.outbox = append(n.outbox, datagram{n.addr, to.Addr, bytes.Clone(b)})
	n.sequence = append(n.sequence, fmt.Sprintf("sent type %d", b[0]))
}
func (n *testNode) LinkUp(l *Link)                  { n.ups = append(n.ups, l.Peer.ID) }
func (n *testNode) LinkDown(l *Link, reason string) { n.downs = append(n.downs, reason) }
func (n *testNode) SessionsChanged()                { n.changes++ }
func (n *testNode) SessionInstalled()               { n.sequence = append(n.sequence, "installed") }
func (n *testNode) LinkHealth(l *Link)              { n.health = append(n.health, l.Suspect()) }
func (n *testNode) DialFailed(d *Dial)              { n.failed = append(n.failed, d) }

// trustedNames is the fake CA: certificates are just names, and a name is
// valid when listed with the key it was issued for.
type trustedNames map[string][32]byte

func (t trustedNames) verify(cert []byte, static [32]byte, now time.Time) (Peer, error) {
	key, ok := t[string(cert)]
	if !ok {
		return Peer{}, errors.New("unknown certificate")
	}
	if key != static {
		return Peer{}, errors.New("certificate is for another key")
	}
	return Peer{ID: nid.FromPublicKey(static), Name: string(cert)}, nil
}

func newTestNode(t testing.TB, name string, port uint16, seed uint64, ca trustedNames, timers Timers) *testNode {
	t.Helper()
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	var priv [32]byte
	rng.Read(priv[:])
	pub, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{addr: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), port)}
	var pubKey [32]byte
	copy(pubKey[:], pub)
	if _, listed := ca[name]; !listed {
		ca[name] = pubKey
	}
	n.m = NewManager(Config{
		Handshake: HandshakeConfig{Network: "test", Private: priv, Public: pubKey, Cert: []byte(name), AESFast: true, Rand: rng},
		Verify:    ca.verify,
		Timers:    timers,
	}, n)
	return n
}

// net moves datagrams between test nodes, doing for transport messages what
// the data path does.
type testNet struct {
	t     *testing.T
	nodes map[netip.AddrPort]*testNode
	drop  func(datagram) bool
}

func (w *testNet) run(now time.Time) {
	for moved := true; moved; {
		moved = false
		for _, n := range w.nodes {
			out := n.outbox
			n.outbox = nil
			for _, d := range out {
				moved = true
				if w.drop != nil && w.drop(d) {
					continue
				}
				if dst := w.nodes[d.to]; dst != nil {
					dst.deliver(d, now)
				}
			}
		}
	}
}

func (n *testNode) deliver(d datagram, now time.Time) {
	if wire.Type(d.b[0]) != wire.TypeTransport {
		n.m.HandleHandshake(UDPEndpoint(d.from), d.b, now)
		return
	}
	idx, counter, err := wire.ParseTransportHeader(d.b)
	if err != nil {
		return
	}
	s := n.m.Session(idx)
	if s == nil {
		return
	}
	plain, first, err := s.Open(d.b, counter, now.UnixNano())
	if err != nil {
		return
	}
	if first {
		n.m.Confirmed(s, now)
	}
	if len(plain) == 0 {
		return
	}
	// Probes are answered as the data path answers them.
	if stamp, err := wire.ParseProbe(plain); err == nil {
		l := n.m.Links()[s.Peer]
		if wire.Inner(plain[0]) == wire.InnerProbe && l != nil {
			n.m.Send(l, wire.AppendProbe(nil, true, stamp), now)
		} else if l != nil {
			l.Counters.ProbeAnswered(stamp, now.UnixNano())
		}
		return
	}
	n.got = append(n.got, bytes.Clone(plain))
}

func pair(t *testing.T, timers Timers) (*testNet, *testNode, *testNode) {
	ca := trustedNames{}
	a := newTestNode(t, "a", 1, 1, ca, timers)
	b := newTestNode(t, "b", 2, 2, ca, timers)
	return &testNet{t: t, nodes: map[netip.AddrPort]*testNode{a.addr: a, b.addr: b}}, a, b
}

// linkedPair is pair with a's link to b up.
func linkedPair(t *testing.T, timers Timers) (*testNet, *testNode, *testNode, *Link, time.Time) {
	w, a, b := pair(t, timers)
	now := time.Unix(1000, 0)
	a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{}, now)
	a.m.Tick(now)
	w.run(now)
	return w, a, b, a.m.Links()[b.m.Self()], now
}

func TestHandshakeBringsLinkUpOnBothSides(t *testing.T) {
	w, a, b, la, now := linkedPair(t, Timers{})
	if len(a.ups) != 1 || len(b.ups) != 1 {
		t.Fatalf("ups: a=%v b=%v, want one each", a.ups, b.ups)
	}
	lb := b.m.Links()[a.m.Self()]
	if la == nil || lb == nil || la.Peer.Name != "b" || lb.Peer.Name != "a" {
		t.Fatalf("links not keyed by verified peer: %+v %+v", la, lb)
	}
	if la.Current().Cipher != AES256GCM {
		t.Errorf("cipher = %v, want AES-256-GCM when both sides have AES", la.Current().Cipher)
	}
	if !a.m.Send(la, []byte("hello"), now) {
		t.Fatal("send on an up link failed")
	}
	w.run(now)
	if len(b.got) != 1 || string(b.got[0]) != "hello" {
		t.Fatalf("b got %q", b.got)
	}
}

func TestCipherFallsBackWithoutAES(t *testing.T) {
	ca := trustedNames{}
	a := newTestNode(t, "a", 1, 1, ca, Timers{})
	b := newTestNode(t, "b", 2, 2, ca, Timers{})
	b.m.cfg.Handshake.AESFast = false
	w := &testNet{t: t, nodes: map[netip.AddrPort]*testNode{a.addr: a, b.addr: b}}
	now := time.Unix(1000, 0)
	a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{}, now)
	a.m.Tick(now)
	w.run(now)
	l := a.m.Links()[b.m.Self()]
	if l == nil || !l.Up() || l.Current().Cipher != ChaCha20Poly1305 {
		t.Fatalf("want an up ChaCha20-Poly1305 link, got %+v", l)
	}
}

func TestUnknownCertificateIsRefused(t *testing.T) {
	ca := trustedNames{}
	a := newTestNode(t, "a", 1, 1, ca, Timers{})
	b := newTestNode(t, "b", 2, 2, ca, Timers{})
	delete(ca, "b") // b's certificate is not from our CA
	w := &testNet{t: t, nodes: map[netip.AddrPort]*testNode{a.addr: a, b.addr: b}}
	now := time.Unix(1000, 0)
	d := a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{}, now)
	a.m.Tick(now)
	w.run(now)
	if len(a.ups)+len(b.ups) != 0 {
		t.Fatalf("a link came up with an unknown certificate: %v %v", a.ups, b.ups)
	}
	if a.m.Stats().HandshakeRejected.Load() != 1 || d.LastError == "" {
		t.Fatalf("rejection not counted/explained: %d %q", a.m.Stats().HandshakeRejected.Load(), d.LastError)
	}
}

func TestPinnedKeyMismatchIsRefused(t *testing.T) {
	w, a, b := pair(t, Timers{})
	now := time.Unix(1000, 0)
	wrong := [32]byte{9}
	a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{Key: &wrong}, now)
	a.m.Tick(now)
	w.run(now)
	if len(a.ups) != 0 {
		t.Fatal("link up although the peer's key differs from the pinned one")
	}
}

func TestDeadPeerIsDetectedAndRedialed(t *testing.T) {
	w, a, b, _, now := linkedPair(t, Timers{Keepalive: time.Second, DeadAfter: 3 * time.Second, HandshakeRetry: time.Second})
	silent := false
	w.drop = func(datagram) bool { return silent }
	for i := 0; i < 10; i++ {
		now = now.Add(500 * time.Millisecond)
		a.m.Tick(now)
		b.m.Tick(now)
		w.run(now)
	}
	if len(a.downs) != 0 {
		t.Fatalf("link went down while keepalives flowed: %v", a.downs)
	}
	silent = true
	for i := 0; i < 8; i++ {
		now = now.Add(500 * time.Millisecond)
		a.m.Tick(now)
		b.m.Tick(now)
		w.run(now)
	}
	if len(a.downs) != 1 || len(b.downs) != 1 {
		t.Fatalf("downs after 4s of silence: a=%v b=%v", a.downs, b.downs)
	}
	silent = false
	for i := 0; i < 6; i++ {
		now = now.Add(500 * time.Millisecond)
		a.m.Tick(now)
		b.m.Tick(now)
		w.run(now)
	}
	if len(a.ups) != 2 {
		t.Fatalf("dial did not bring the link back: ups=%v", a.ups)
	}
}

func TestRekeyKeepsTrafficFlowing(t *testing.T) {
	w, a, b, la, now := linkedPair(t, Timers{Keepalive: time.Second, DeadAfter: 5 * time.Second, RekeyAfter: 10 * time.Second, RejectAfter: 15 * time.Second})
	first := la.Current()
	for i := 0; i < 60; i++ {
		now = now.Add(500 * time.Millisecond)
		a.m.Tick(now)
		b.m.Tick(now)
		if !a.m.Send(la, []byte{byte(i)}, now) {
			t.Fatalf("send failed at step %d", i)
		}
		w.run(now)
	}
	if la.Current() == first {
		t.Fatal("session was never replaced after 30s with RekeyAfter 10s")
	}
	if len(b.got) != 60 {
		t.Fatalf("b got %d of 60 messages across rekeys", len(b.got))
	}
	if len(a.downs)+len(b.downs) != 0 {
		t.Fatalf("link went down during rekey: %v %v", a.downs, b.downs)
	}
	if n := len(la.Sessions()); n > 2 {
		t.Fatalf("%d sessions kept; old ones must be dropped", n)
	}
}

// Drivers sleep until NextDeadline; it must never ask for "now" again
// after a tick, least of all while a rekey waits for a silent peer or a
// new session waits to be confirmed.
func TestNextDeadlineIsAfterATickThroughARekey(t *testing.T) {
	w, a, b, _, now := linkedPair(t, Timers{Keepalive: time.Second, DeadAfter: 5 * time.Second, RekeyAfter: 10 * time.Second, RejectAfter: 15 * time.Second, HandshakeRetry: time.Second})
	silent := false
	w.drop = func(datagram) bool { return silent }
	for i := range 60 {
		now = now.Add(250 * time.Millisecond)
		silent = i >= 38 && i < 44 // the peer is silent as the first rekey starts
		for _, n := range []*testNode{a, b} {
			n.m.Tick(now)
			if next := n.m.NextDeadline(now); !next.After(now) {
				t.Fatalf("%v at step %d: NextDeadline %v right after a tick at %v", n.addr, i, next, now)
			}
		}
		w.run(now)
	}
	if len(a.downs)+len(b.downs) != 0 {
		t.Fatalf("link went down: %v %v", a.downs, b.downs)
	}
}

func TestReplayedTransportIsRejected(t *testing.T) {
	w, a, b, la, now := linkedPair(t, Timers{})
	a.m.Send(la, []byte("once"), now)
	d := a.outbox[0]
	replay := bytes.Clone(d.b)
	w.run(now)
	idx, counter, _ := wire.ParseTransportHeader(replay)
	if _, _, err := b.m.Session(idx).Open(replay, counter, now.UnixNano()); !errors.Is(err, ErrReplay) {
		t.Fatalf("replayed datagram: err = %v, want ErrReplay", err)
	}
	forged := bytes.Clone(d.b)
	forged[len(forged)-1] ^= 1
	if _, _, err := b.m.Session(idx).Open(forged, counter+1, now.UnixNano()); !errors.Is(err, ErrAuth) {
		t.Fatalf("forged datagram: err = %v, want ErrAuth", err)
	}
}

// initiation is a handshake initiation from n, as it leaves n's socket.
func initiation(t *testing.T, n *testNode) []byte {
	t.Helper()
	_, msg, err := StartHandshake(&n.m.cfg.Handshake)
	if err != nil {
		t.Fatal(err)
	}
	return wire.AppendHandshake(nil, wire.HandshakeHeader{Type: wire.TypeHandshakeInit, Sender: 7}, msg)
}

func TestHandshakeFloodIsRateLimited(t *testing.T) {
	_, a, b := pair(t, Timers{})
	now := time.Unix(1000, 0)
	init := initiation(t, a)
	for i := 0; i < 1000; i++ {
		b.m.HandleHandshake(UDPEndpoint(a.addr), init, now)
	}
	answered, cookies := 0, 0
	for _, d := range b.outbox {
		switch wire.Type(d.b[0]) {
		case wire.TypeHandshakeReply:
			answered++
		case wire.TypeHandshakeCookie:
			cookies++
			if len(d.b) >= len(init) {
				t.Fatalf("a cookie of %d bytes answers an initiation of %d", len(d.b), len(init))
			}
		}
	}
	if answered > 2*int(b.m.cfg.HandshakesPerSource) {
		t.Fatalf("answered %d initiations from one source in one instant", answered)
	}
	if b.m.Stats().HandshakeRateLimited.Load() == 0 || cookies == 0 {
		t.Fatalf("rate limiting not counted, or no cookies (%d) sent past it", cookies)
	}
}

// TestUnderAFloodAnInitiatorThatReceivesGetsThrough: past the rate limits
// a node answers initiations with cookies instead of doing their
// Diffie-Hellman; a real initiator sends its initiation again with the
// cookie and the handshake completes, while one that sends a wrong cookie
// still gets none of that work.
func TestUnderAFloodAnInitiatorThatReceivesGetsThrough(t *testing.T) {
	w, a, b := pair(t, Timers{})
	now := time.Unix(1000, 0)
	_, flood, err := StartHandshake(&a.m.cfg.Handshake)
	if err != nil {
		t.Fatal(err)
	}
	init := wire.AppendHandshake(nil, wire.HandshakeHeader{Type: wire.TypeHandshakeInit, Sender: 7}, flood)
	for range 1000 {
		b.m.HandleHandshake(UDPEndpoint(a.addr), init, now)
	}
	b.outbox = nil
	forged := append(slices.Clone(init), make([]byte, CookieLen)...)
	b.m.HandleHandshake(UDPEndpoint(a.addr), forged, now)
	if len(b.outbox) != 1 || wire.Type(b.outbox[0].b[0]) != wire.TypeHandshakeCookie {
		t.Fatalf("an initiation with a wrong cookie got %d answers, want one cookie", len(b.outbox))
	}
	b.outbox = nil
	a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{}, now)
	a.m.Tick(now)
	w.run(now)
	if len(a.ups) != 1 || len(b.ups) != 1 {
		t.Fatalf("ups: a=%v b=%v; the initiator that came back with its cookie must link", a.ups, b.ups)
	}
}

// A cookie comes back only from where the initiation went: one from any
// other address is ignored, or anyone guessing an index could have the
// initiator send its initiation to an address of their choosing.
func TestACookieFromElsewhereIsIgnored(t *testing.T) {
	_, a, b := pair(t, Timers{})
	now := time.Unix(1000, 0)
	a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{}, now)
	a.m.Tick(now)
	if len(a.outbox) != 1 {
		t.Fatalf("a sent %d initiations, want 1", len(a.outbox))
	}
	index := binary.LittleEndian.Uint32(a.outbox[0].b[4:8])
	a.outbox = nil
	cookie := wire.AppendHandshake(nil, wire.HandshakeHeader{Type: wire.TypeHandshakeCookie, Receiver: index}, make([]byte, CookieLen))
	elsewhere := netip.MustParseAddrPort("192.0.2.99:4000")
	a.m.HandleHandshake(UDPEndpoint(elsewhere), cookie, now)
	if len(a.outbox) != 0 {
		t.Fatalf("a cookie from %v had a send %d datagrams, want none", elsewhere, len(a.outbox))
	}
	a.m.HandleHandshake(UDPEndpoint(b.addr), cookie, now)
	if len(a.outbox) != 1 || a.outbox[0].to != b.addr {
		t.Fatalf("a cookie from the peer had a send %v, want its initiation again to %v", a.outbox, b.addr)
	}
}

func TestOneDialMakesOneHandshake(t *testing.T) {
	w, a, b := pair(t, Timers{})
	now := time.Unix(1000, 0)
	a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{}, now)
	a.m.Tick(now)
	// The reply arrives, but the confirming keepalive is still in flight
	// when a ticks again.
	w.drop = func(d datagram) bool { return d.from == b.addr && wire.Type(d.b[0]) == wire.TypeTransport }
	w.run(now)
	a.m.Tick(now.Add(10 * time.Millisecond))
	w.drop = nil
	w.run(now.Add(20 * time.Millisecond))
	if got := b.m.Stats().HandshakesCompleted.Load(); got != 1 {
		t.Fatalf("b completed %d handshakes for one dial, want 1", got)
	}
}

func TestDialWithExpectedIDGivesUpAndReports(t *testing.T) {
	w, a, b := pair(t, Timers{HandshakeRetry: time.Second})
	now := time.Unix(1000, 0)
	a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{Peer: nid.ID{1}, Attempts: 2}, now)
	for i := 0; i < 10 && len(a.failed) == 0; i++ {
		a.m.Tick(now)
		w.run(now)
		now = now.Add(time.Second)
	}
	if len(a.failed) != 1 || len(a.m.Dials()) != 0 {
		t.Fatalf("dial for the wrong node: failed=%d, dials left %d", len(a.failed), len(a.m.Dials()))
	}
	if len(a.ups) != 0 {
		t.Fatal("a link came up with a node other than the expected one")
	}
}

// When both ends handshake at once, each may send on a different new
// session; a replaced session the peer still sends on must stay until the
// peer stops using it, and waiting for that must not make the driver spin.
func TestReplacedSessionStaysWhileThePeerSendsOnIt(t *testing.T) {
	w, a, b, la, now := linkedPair(t, Timers{Keepalive: time.Second, DeadAfter: 5 * time.Second, RekeyAfter: 10 * time.Second, RejectAfter: 5 * time.Minute})
	old := la.Current()
	step := func(peerUsesOld bool) {
		now = now.Add(250 * time.Millisecond)
		if peerUsesOld {
			old.received.Add(1) // as the data path counts a message opened on it
		}
		for _, n := range []*testNode{a, b} {
			n.m.Tick(now)
			if next := n.m.NextDeadline(now); !next.After(now) {
				t.Fatalf("%v: NextDeadline %v right after a tick at %v", n.addr, next, now)
			}
		}
		a.m.Send(la, []byte{1}, now)
		w.run(now)
	}
	for la.Current() == old {
		step(true)
	}
	for range 120 { // 30 s, three times sessionGrace
		step(true)
	}
	if !slices.Contains(la.Sessions(), old) {
		t.Fatal("the session the peer still sends on was dropped")
	}
	for range 60 {
		step(false)
	}
	if slices.Contains(la.Sessions(), old) {
		t.Fatal("the replaced session stayed after the peer stopped using it")
	}
}

// TestAnAnswerIsNeverLongerThanTheInitiation: a node never sends more
// bytes than an unproven initiation brought, even with the largest
// certificate a CA signs: an answer that would be longer is a cookie, and
// only the initiation that comes back with it draws the answer. An
// initiation cut short gets no answer at all, before any cryptography.
// A link still comes up, whatever the certificates' length.
func TestAnAnswerIsNeverLongerThanTheInitiation(t *testing.T) {
	now := time.Unix(1000, 0)
	largestAtOnce := InitLen + CookieLen - replyLen(nil)
	for _, certLen := range []int{1, 150, largestAtOnce, largestAtOnce + 1, identity.MaxCertificateSize} {
		ca := trustedNames{}
		a := newTestNode(t, "a", 1, 1, ca, Timers{})
		b := newTestNode(t, strings.Repeat("b", certLen), 2, 2, ca, Timers{}) // its certificate is its name
		w := &testNet{t: t, nodes: map[netip.AddrPort]*testNode{a.addr: a, b.addr: b}}
		a.m.AddDial([]Endpoint{UDPEndpoint(b.addr)}, DialOptions{}, now)
		a.m.Tick(now)
		init := a.outbox[0].b
		if len(init) != InitLen+CookieLen {
			t.Fatalf("initiation of %d bytes, want InitLen and a cookie slot, %d", len(init), InitLen+CookieLen)
		}
		var first []byte // b's first answer, to the initiation without a cookie
		w.drop = func(d datagram) bool {
			if d.from == b.addr && first == nil {
				first = d.b
			}
			return false
		}
		w.run(now)
		if len(a.ups) != 1 || len(b.ups) != 1 {
			t.Fatalf("certificate of %d bytes: links up a=%v b=%v, want one each", certLen, a.ups, b.ups)
		}
		if len(first) > len(init) {
			t.Errorf("certificate of %d bytes: an answer of %d bytes to an initiation of %d", certLen, len(first), len(init))
		}
		cookies := b.m.Stats().HandshakeAnswerTooLong.Load()
		fits := replyLen(b.m.cfg.Handshake.Cert) <= len(init)
		if wantType := map[bool]wire.Type{true: wire.TypeHandshakeReply, false: wire.TypeHandshakeCookie}[fits]; wire.Type(first[0]) != wantType || fits != (cookies == 0) || cookies > 1 {
			t.Errorf("certificate of %d bytes (answer of %d): first answer of type %#x, %d cookies for a too long answer; want type %#x", certLen, replyLen(b.m.cfg.Handshake.Cert), first[0], cookies, wantType)
		}
	}

	_, a, b := pair(t, Timers{})
	old := initiation(t, a) // without a cookie slot, as older nodes send it
	b.m.HandleHandshake(UDPEndpoint(a.addr), old, now)
	if len(b.outbox) != 1 || len(b.outbox[0].b) > len(old) {
		t.Fatalf("an initiation without a cookie slot: %d answers, want one no longer than it", len(b.outbox))
	}
	b.outbox = nil
	short := old[:wire.HandshakeHeaderLen+60]
	b.m.HandleHandshake(UDPEndpoint(a.addr), short, now)
	if len(b.outbox) != 0 || b.m.Stats().HandshakeTooShort.Load() != 1 {
		t.Fatalf("a %d-byte initiation got %d answers, %d counted too short; want none and one", len(short), len(b.outbox), b.m.Stats().HandshakeTooShort.Load())
	}
	if b.m.Stats().HandshakeInvalid.Load() != 0 {
		t.Fatal("the short initiation reached the Noise decoder")
	}
}

// An idle node's links fall due for keepalives each at its own moment; one
// driven by its NextDeadline, as the daemon and the simulator drive it,
// must still wake at most once per keepalive round (half an interval),
// not once per link, and send no more keepalives for it.
func TestAnIdleNodeWakesOncePerKeepaliveRound(t *testing.T) {
	ca := trustedNames{}
	a := newTestNode(t, "a", 1, 1, ca, Timers{})
	w := &testNet{t: t, nodes: map[netip.AddrPort]*testNode{a.addr: a}}
	peers := make([]*testNode, 6)
	now := time.Unix(1000, 0)
	for i := range peers {
		p := newTestNode(t, string(rune('b'+i)), uint16(2+i), uint64(2+i), ca, Timers{})
		w.nodes[p.addr] = p
		peers[i] = p
		// Each link comes up, and last sends, 300 ms after the one before.
		now = now.Add(300 * time.Millisecond)
		a.m.AddDial([]Endpoint{UDPEndpoint(p.addr)}, DialOptions{}, now)
		a.m.Tick(now)
		w.run(now)
	}
	if len(a.ups) != len(peers) {
		t.Fatalf("%d links up, want %d", len(a.ups), len(peers))
	}
	sent := map[*Link]uint64{}
	for _, l := range a.m.Links() {
		sent[l] = l.Counters.TxPackets.Load()
	}
	const idle = 20 * time.Second
	end, ticks := now.Add(idle), 0
	for {
		now = a.m.NextDeadline(now)
		if now.After(end) {
			break
		}
		ticks++
		a.m.Tick(now)
		for _, p := range peers {
			p.m.Tick(now)
		}
		w.run(now)
	}
	for _, n := range append(peers, a) {
		if len(n.downs) != 0 {
			t.Fatalf("links went down while idle: %v", n.downs)
		}
	}
	keepalive := a.m.Timers().Keepalive
	if most := int(idle/(keepalive/2)) + 1; ticks > most {
		t.Fatalf("ticked %d times in %v idle with %d links, want at most %d: one per keepalive round", ticks, idle, len(peers), most)
	}
	for l, before := range sent {
		if n, most := l.Counters.TxPackets.Load()-before, uint64(idle/keepalive)+1; n > most {
			t.Fatalf("the link to %s sent %d keepalives in %v idle, want at most %d", l.Peer.Name, n, idle, most)
		}
	}
}

// TestEachStreamIsASourceOfItsOwn: streams (WebSocket, TCP) have no
// address; one that floods initiations must not use up another's limit.
func TestEachStreamIsASourceOfItsOwn(t *testing.T) {
	_, a, b := pair(t, Timers{})
	now := time.Unix(1000, 0)
	init := initiation(t, a)
	for range 1000 {
		b.m.HandleHandshake(Endpoint{Via: Stream, Stream: 1}, init, now)
	}
	b.outbox = nil
	b.m.HandleHandshake(Endpoint{Via: Stream, Stream: 2}, initiation(t, a), now)
	if len(b.outbox) != 1 || wire.Type(b.outbox[0].b[0]) != wire.TypeHandshakeReply {
		t.Fatalf("another stream's initiation was not answered with a reply: %d datagrams sent", len(b.outbox))
	}
}

// A handshake the peer completes on a link proves it alive, as any
// message does. A node whose link had been quiet for nearly DeadAfter,
// and that answered the peer's new handshake on it, took the link down a
// moment later for want of a message: the peer, which had given up on the
// link first and dialed again, kept the new session, and the node dialed
// anew on a path of its own (through another relay, in e2e's member-relay
// test).
func TestAHandshakeThePeerCompletesKeepsTheLinkUp(t *testing.T) {
	timers := Timers{Keepalive: time.Second, DeadAfter: 3 * time.Second, HandshakeRetry: time.Second}
	w, a, b, _, now := linkedPair(t, timers)
	w.drop = func(d datagram) bool { return wire.Type(d.b[0]) == wire.TypeTransport }
	now = now.Add(2500 * time.Millisecond)
	b.m.Down(b.m.Links()[a.m.Self()], "given up")
	b.m.AddDial([]Endpoint{UDPEndpoint(a.addr)}, DialOptions{}, now)
	b.m.Tick(now)
	w.run(now)
	if a.m.Links()[b.m.Self()].Current() == nil || len(a.m.Links()[b.m.Self()].Sessions()) < 2 {
		t.Fatalf("a did not take b's new handshake on its link")
	}
	now = now.Add(time.Second)
	a.m.Tick(now)
	if len(a.downs) != 0 {
		t.Fatalf("a took the link down a second after b's handshake on it: %v", a.downs)
	}
	w.drop = nil
	for range 6 {
		now = now.Add(500 * time.Millisecond)
		a.m.Tick(now)
		b.m.Tick(now)
		w.run(now)
	}
	if len(a.downs) != 0 || len(b.ups) != 2 {
		t.Fatalf("a's downs %v, b's ups %d (want the one new link up)", a.downs, len(b.ups))
	}
}

// Each end hands a new session to its data path (SessionInstalled) before
// it sends the message after which the peer uses the session: the
// initiator its Finish, the responder its first transport message. The
// peer's first datagrams on the session were otherwise dropped for an
// unknown index while the core had yet to publish it, and the link came
// up at the other end only a second later, at the next try.
func TestASessionReachesTheDataPathBeforeThePeerCanUseIt(t *testing.T) {
	_, a, b, la, _ := linkedPair(t, Timers{})
	if la == nil || !la.Up() {
		t.Fatal("the link did not come up")
	}
	for _, c := range []struct {
		node   *testNode
		before wire.Type
	}{{a, wire.TypeHandshakeFinish}, {b, wire.TypeTransport}} {
		installed := slices.Index(c.node.sequence, "installed")
		sent := slices.Index(c.node.sequence, fmt.Sprintf("sent type %d", c.before))
		if installed < 0 || sent < 0 || installed > sent {
			t.Errorf("%s: %v; want the session installed before the first datagram of type %d", c.node.m.cfg.Handshake.Cert, c.node.sequence, c.before)
		}
	}
}
