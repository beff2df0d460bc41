// Package link runs burrow's encrypted links: Noise handshakes that
// authenticate both certificates, transport sessions with 64-bit counters
// and a sliding replay window, rekeying on time and volume, keepalives and
// dead-peer detection. It is pure: the caller passes the time, supplies
// randomness, and carries the datagrams this package asks it to send.
//
// All links of a node share one socket; a link is identified by the peer's
// node ID once the handshake has proven it.
package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"burrow/nid"
	"burrow/ratelimit"
	"burrow/wire"
)

// Timers are the link timing parameters.
type Timers struct {
	Keepalive          time.Duration // send a keepalive when nothing was sent for this long
	DeadAfter          time.Duration // declare the peer dead after this much silence
	HandshakeRetry     time.Duration // first handshake retry interval; doubles per failure
	MaxHandshakeRetry  time.Duration // cap of the retry interval
	DirectHeadStart    time.Duration // how long a dial tries only its direct endpoints before relays join
	RekeyAfter         time.Duration // start a new handshake when the session is this old
	RekeyAfterMessages uint64        // or when this many messages used its keys
	RejectAfter        time.Duration // never use a session older than this
}

// DefaultTimers are used for every zero field of a Config's Timers.
func DefaultTimers() Timers {
	return Timers{
		Keepalive:         2 * time.Second,
		DeadAfter:         6 * time.Second,
		HandshakeRetry:    time.Second,
		MaxHandshakeRetry: 30 * time.Second,
		// Long enough for a direct answer across a continent, short
		// enough that a pair whose holes are not punched yet gets a
		// relayed link at once and moves to the direct path later.
		DirectHeadStart:    250 * time.Millisecond,
		RekeyAfter:         2 * time.Minute,
		RekeyAfterMessages: 1 << 40,
		RejectAfter:        3 * time.Minute,
	}
}

func (t Timers) withDefaults() Timers {
	d := DefaultTimers()
	pick := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&t.Keepalive, d.Keepalive)
	pick(&t.DeadAfter, d.DeadAfter)
	pick(&t.HandshakeRetry, d.HandshakeRetry)
	pick(&t.MaxHandshakeRetry, d.MaxHandshakeRetry)
	pick(&t.DirectHeadStart, d.DirectHeadStart)
	pick(&t.RekeyAfter, d.RekeyAfter)
	pick(&t.RejectAfter, d.RejectAfter)
	if t.RekeyAfterMessages == 0 {
		t.RekeyAfterMessages = d.RekeyAfterMessages
	}
	return t
}

// Peer is what a verified certificate says about the other side.
type Peer struct {
	ID        nid.ID
	Name      string
	Addresses []netip.Prefix
	NotAfter  time.Time
}

// Config configures a Manager.
type Config struct {
	Handshake HandshakeConfig
	// Verify checks a peer's certificate against the network's CA at now,
	// and that it was issued for the Noise-authenticated static key.
	Verify func(cert []byte, static [32]byte, now time.Time) (Peer, error)
	Timers Timers
	// Handshakes answered per second, per source address and in total.
	HandshakesPerSource, HandshakesTotal float64
}

// Events is how the Manager talks to its owner. The datagram passed to
// SendDatagram is only valid during the call.
type Events interface {
	SendDatagram(to Endpoint, datagram []byte)
	LinkUp(l *Link)
	LinkDown(l *Link, reason string)
	// SessionsChanged says the set of sessions or their roles changed, so
	// the data path's snapshot must be rebuilt.
	SessionsChanged()
	// DialFailed reports a dial given up after its attempts ran out.
	DialFailed(d *Dial)
}

// Link is an authenticated association with one peer.
type Link struct {
	Port     uint32 // switch port number, unique for the node's lifetime
	Peer     Peer
	Counters Counters
	Since    time.Time // when the link came up
	// RTT is the round trip of the last handshake on the link, a cheap
	// measure of the path for choosing relays.
	RTT time.Duration

	endpoint atomic.Pointer[Endpoint]
	// candidates are the peer's known endpoints; a link on a worse path
	// keeps trying them to upgrade.
	candidates []Endpoint
	upgradeAt  time.Time
	upgradeGap time.Duration // grows from firstUpgrade to upgradeEvery
	up         bool
	current    *Session   // used for sending
	sessions   []*Session // accepted for receiving, newest last
	rekey      *pending   // handshake in flight to replace current
	rekeyAt    time.Time  // earliest next rekey attempt
	created    time.Time
}

// Endpoint is where the peer's datagrams currently come from.
func (l *Link) Endpoint() Endpoint { return *l.endpoint.Load() }

// SetEndpoint records where an authenticated datagram of the peer came
// from (roaming, NAT rebinding, an upgraded path). A worse kind of path
// does not replace a better one: the better one may just be quieter.
func (l *Link) SetEndpoint(ep Endpoint) {
	if cur := l.endpoint.Load(); cur == nil || (*cur != ep && ep.rank() >= cur.rank()) {
		moved := ep // copied here so that only a change allocates
		l.endpoint.Store(&moved)
	}
}

// forceEndpoint replaces the path, e.g. when the current one stopped working.
func (l *Link) forceEndpoint(ep Endpoint) { l.endpoint.Store(&ep) }

// AddCandidates records more endpoints of the peer, for path upgrades.
func (l *Link) AddCandidates(eps []Endpoint) {
	for _, ep := range eps {
		if !slices.Contains(l.candidates, ep) {
			l.candidates = append(l.candidates, ep)
		}
	}
}

// betterCandidates are the candidates on a better kind of path than the
// current one.
func (l *Link) betterCandidates() []Endpoint {
	cur := l.Endpoint().rank()
	var out []Endpoint
	for _, c := range l.candidates {
		if c.rank() > cur {
			out = append(out, c)
		}
	}
	return out
}

// Up reports whether the link carries traffic.
func (l *Link) Up() bool { return l.up }

// Current is the session used for sending, nil while the link is down.
func (l *Link) Current() *Session { return l.current }

// Sessions are the sessions accepted for receiving.
func (l *Link) Sessions() []*Session { return l.sessions }

// Dial is a standing wish to have a link to an endpoint: the Manager keeps
// retrying, with backoff, while no link to that peer is up.
type Dial struct {
	// Endpoints are tried together; relayed ones only from the second
	// attempt on, so that a direct path wins when there is one.
	Endpoints []Endpoint
	Key       *[32]byte // if set, only this static key is accepted
	Peer      nid.ID    // expected, or learned from the first successful handshake
	known     bool
	attempts  int // give up after this many failed attempts; 0 = never
	tries     int

	attempt *pending
	next    time.Time
	backoff time.Duration
	// LastError is why the last attempt failed, for status.
	LastError string
}

// DialOptions qualify a dial.
type DialOptions struct {
	// Key pins the peer's static key.
	Key *[32]byte
	// Peer, when not zero, is the node ID that must answer.
	Peer nid.ID
	// Attempts bounds the failed attempts before the dial is given up and
	// reported with DialFailed; 0 retries forever.
	Attempts int
}

type pending struct {
	localIndex  uint32
	remoteIndex uint32
	endpoints   []Endpoint
	started     time.Time
	expires     time.Time
	initiator   *Initiator
	responder   *Responder
	dial        *Dial
	rekeyOf     *Link
}

// Stats count handshake outcomes and drops in the control path.
type Stats struct {
	HandshakesStarted, HandshakesCompleted atomic.Uint64
	HandshakeRejected                      atomic.Uint64 // certificate refused
	HandshakeInvalid                       atomic.Uint64 // not a valid Noise message
	HandshakeRateLimited                   atomic.Uint64
	HandshakeUnknownIndex                  atomic.Uint64
	Malformed                              atomic.Uint64
}

// Manager owns every link, dial and handshake of one node. It is not safe
// for concurrent use; Session methods are.
type Manager struct {
	cfg      Config
	timers   Timers
	events   Events
	self     nid.ID
	links    map[nid.ID]*Link
	byPort   map[uint32]*Link
	nextPort uint32
	sessions map[uint32]*Session
	pending  map[uint32]*pending
	dials    []*Dial
	limiter  *ratelimit.Limiter
	stats    Stats
	buf      []byte
}

const (
	responderTimeout = 5 * time.Second
	maxPending       = 1024
	// sessionGrace keeps a replaced session open for late packets.
	sessionGrace = 10 * time.Second
	// A link on a relay, TURN or WebSocket path tries the peer's direct
	// candidates again: soon after it came up — both ends do, at about the
	// same time, which is what opens two NATs to each other — then less
	// and less often, up to every upgradeEvery.
	firstUpgrade = 200 * time.Millisecond
	upgradeEvery = 10 * time.Second
)

// NewManager creates a Manager for the node whose static key is in cfg.
func NewManager(cfg Config, events Events) *Manager {
	if cfg.HandshakesPerSource <= 0 {
		cfg.HandshakesPerSource = 20
	}
	if cfg.HandshakesTotal <= 0 {
		cfg.HandshakesTotal = 500
	}
	return &Manager{
		cfg:      cfg,
		timers:   cfg.Timers.withDefaults(),
		events:   events,
		self:     nid.FromPublicKey(cfg.Handshake.Public),
		links:    make(map[nid.ID]*Link),
		byPort:   make(map[uint32]*Link),
		sessions: make(map[uint32]*Session),
		pending:  make(map[uint32]*pending),
		limiter:  ratelimit.New(cfg.HandshakesPerSource, cfg.HandshakesTotal, 4096),
		buf:      make([]byte, 0, 2048),
	}
}

// Self is this node's ID.
func (m *Manager) Self() nid.ID { return m.self }

// Stats are the handshake counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Timers are the effective timing parameters.
func (m *Manager) Timers() Timers { return m.timers }

// Links returns the links that are up or coming up, by peer.
func (m *Manager) Links() map[nid.ID]*Link { return m.links }

// LinkByPort finds a link by its switch port.
func (m *Manager) LinkByPort(port uint32) *Link { return m.byPort[port] }

// Session finds a session by the index the peer puts in its headers.
func (m *Manager) Session(index uint32) *Session { return m.sessions[index] }

// Dials are the standing dials.
func (m *Manager) Dials() []*Dial { return m.dials }

// AddDial asks for a link to endpoint.
func (m *Manager) AddDial(endpoints []Endpoint, opts DialOptions, now time.Time) *Dial {
	d := &Dial{Endpoints: endpoints, Key: opts.Key, attempts: opts.Attempts, next: now, backoff: m.timers.HandshakeRetry}
	if opts.Key != nil {
		d.Peer, d.known = nid.FromPublicKey(*opts.Key), true
	} else if opts.Peer != (nid.ID{}) {
		d.Peer, d.known = opts.Peer, true
	}
	m.dials = append(m.dials, d)
	return d
}

// RemoveDial drops a standing dial; an established link stays up.
func (m *Manager) RemoveDial(d *Dial) {
	for i, x := range m.dials {
		if x == d {
			m.dials = append(m.dials[:i], m.dials[i+1:]...)
			break
		}
	}
	if d.attempt != nil {
		delete(m.pending, d.attempt.localIndex)
	}
}

// Connected reports whether the dial's peer is linked.
func (d *Dial) connected(m *Manager) bool {
	if !d.known {
		return false
	}
	l := m.links[d.Peer]
	return l != nil && l.up
}

func (m *Manager) newIndex() uint32 {
	var b [4]byte
	for {
		if _, err := m.cfg.Handshake.Rand.Read(b[:]); err != nil {
			panic("link: random source failed: " + err.Error())
		}
		idx := binary.LittleEndian.Uint32(b[:])
		if idx == 0 || m.sessions[idx] != nil || m.pending[idx] != nil {
			continue
		}
		return idx
	}
}

func (m *Manager) send(to Endpoint, h wire.HandshakeHeader, body []byte) {
	m.buf = wire.AppendHandshake(m.buf[:0], h, body)
	m.events.SendDatagram(to, m.buf)
}

// startHandshake sends a first handshake message to every endpoint; the
// first answer through any of them wins.
func (m *Manager) startHandshake(endpoints []Endpoint, now time.Time, retry time.Duration) (*pending, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no endpoint to reach the peer at")
	}
	if len(m.pending) >= maxPending {
		return nil, errors.New("too many handshakes in flight")
	}
	ini, msg, err := StartHandshake(&m.cfg.Handshake)
	if err != nil {
		return nil, err
	}
	p := &pending{localIndex: m.newIndex(), endpoints: endpoints, started: now, expires: now.Add(retry), initiator: ini}
	m.pending[p.localIndex] = p
	m.stats.HandshakesStarted.Add(1)
	for _, ep := range endpoints {
		m.send(ep, wire.HandshakeHeader{Type: wire.TypeHandshakeInit, Sender: p.localIndex}, msg)
	}
	return p, nil
}

// HandleHandshake processes a handshake datagram from the socket.
func (m *Manager) HandleHandshake(from Endpoint, datagram []byte, now time.Time) {
	h, body, err := wire.ParseHandshake(datagram)
	if err != nil {
		m.stats.Malformed.Add(1)
		return
	}
	switch h.Type {
	case wire.TypeHandshakeInit:
		m.handleInit(from, h, body, now)
	case wire.TypeHandshakeReply:
		m.handleReply(from, h, body, now)
	case wire.TypeHandshakeFinish:
		m.handleFinish(from, h, body, now)
	}
}

func (m *Manager) handleInit(from Endpoint, h wire.HandshakeHeader, body []byte, now time.Time) {
	if !m.limiter.Allow(rateKey(from), now) {
		m.stats.HandshakeRateLimited.Add(1)
		return
	}
	if len(m.pending) >= maxPending {
		m.expirePending(now)
		if len(m.pending) >= maxPending {
			m.stats.HandshakeRateLimited.Add(1)
			return
		}
	}
	r, reply, err := RespondHandshake(&m.cfg.Handshake, body)
	if err != nil {
		m.stats.HandshakeInvalid.Add(1)
		return
	}
	p := &pending{localIndex: m.newIndex(), remoteIndex: h.Sender, endpoints: []Endpoint{from}, started: now,
		expires: now.Add(responderTimeout), responder: r}
	m.pending[p.localIndex] = p
	m.send(from, wire.HandshakeHeader{Type: wire.TypeHandshakeReply, Sender: p.localIndex, Receiver: h.Sender}, reply)
}

func (m *Manager) handleReply(from Endpoint, h wire.HandshakeHeader, body []byte, now time.Time) {
	p := m.pending[h.Receiver]
	if p == nil || p.initiator == nil {
		m.stats.HandshakeUnknownIndex.Add(1)
		return
	}
	hello, err := p.initiator.ReadReply(body)
	if err != nil {
		// A forged reply must not cancel the real one, so p stays.
		m.stats.HandshakeInvalid.Add(1)
		return
	}
	delete(m.pending, p.localIndex)
	peer, err := m.verify(hello, p, now)
	if err != nil {
		m.fail(p, err, now)
		return
	}
	msg, s, err := p.initiator.Finish()
	if err != nil {
		m.fail(p, err, now)
		return
	}
	m.send(from, wire.HandshakeHeader{Type: wire.TypeHandshakeFinish, Sender: p.localIndex, Receiver: h.Sender}, msg)
	s.LocalIndex, s.RemoteIndex = p.localIndex, h.Sender
	m.install(peer, s, from, p, now)
}

func (m *Manager) handleFinish(from Endpoint, h wire.HandshakeHeader, body []byte, now time.Time) {
	p := m.pending[h.Receiver]
	if p == nil || p.responder == nil || p.remoteIndex != h.Sender {
		m.stats.HandshakeUnknownIndex.Add(1)
		return
	}
	hello, s, err := p.responder.ReadFinish(body)
	if err != nil {
		m.stats.HandshakeInvalid.Add(1)
		return
	}
	delete(m.pending, p.localIndex)
	peer, err := m.verify(hello, p, now)
	if err != nil {
		m.fail(p, err, now)
		return
	}
	s.LocalIndex, s.RemoteIndex = p.localIndex, p.remoteIndex
	// The initiator proved its keys with this very message.
	s.confirmed.Store(true)
	l := m.install(peer, s, from, p, now)
	m.sendKeepalive(l, s, now)
}

func (m *Manager) verify(hello PeerHello, p *pending, now time.Time) (Peer, error) {
	if p.dial != nil && p.dial.Key != nil && *p.dial.Key != hello.Static {
		return Peer{}, errors.New("peer's key differs from the configured one")
	}
	peer, err := m.cfg.Verify(hello.Cert, hello.Static, now)
	if err != nil {
		return Peer{}, err
	}
	if p.dial != nil && p.dial.known && p.dial.Peer != peer.ID {
		return Peer{}, fmt.Errorf("node %s answered instead of %s", peer.ID.Short(), p.dial.Peer.Short())
	}
	if peer.ID == m.self {
		return Peer{}, errors.New("peer has this node's own key")
	}
	if p.rekeyOf != nil && p.rekeyOf.Peer.ID != peer.ID {
		return Peer{}, errors.New("a different node answered at the peer's endpoint")
	}
	return peer, nil
}

func (m *Manager) fail(p *pending, err error, now time.Time) {
	m.stats.HandshakeRejected.Add(1)
	if d := p.dial; d != nil {
		d.attempt = nil
		d.LastError = err.Error()
		m.backoff(d, now)
		m.giveUpIfExhausted(d)
	}
	if p.rekeyOf != nil {
		p.rekeyOf.rekey = nil
	}
}

// attemptEndpoints are the endpoints the next attempt tries: direct ones
// first, relayed ones too once a direct attempt went unanswered.
func (d *Dial) attemptEndpoints() []Endpoint {
	if d.tries > 0 {
		return d.Endpoints
	}
	var direct []Endpoint
	for _, ep := range d.Endpoints {
		if !ep.IsRelay() {
			direct = append(direct, ep)
		}
	}
	if len(direct) == 0 {
		return d.Endpoints
	}
	return direct
}

// rateKey is what handshake rate limits count by: the source address, or
// for relayed handshakes the originating node.
func rateKey(from Endpoint) netip.Addr {
	if from.IsRelay() {
		return netip.AddrFrom16(from.Peer)
	}
	return from.Addr.Addr()
}

// giveUpIfExhausted drops a dial whose attempts ran out and reports it.
func (m *Manager) giveUpIfExhausted(d *Dial) {
	if d.attempts > 0 && d.tries >= d.attempts {
		m.RemoveDial(d)
		m.events.DialFailed(d)
	}
}

func (m *Manager) backoff(d *Dial, now time.Time) {
	d.next = now.Add(d.backoff)
	d.backoff = min(2*d.backoff, m.timers.MaxHandshakeRetry)
}

// install attaches a new session to the peer's link, creating the link.
func (m *Manager) install(peer Peer, s *Session, from Endpoint, p *pending, now time.Time) *Link {
	m.stats.HandshakesCompleted.Add(1)
	l := m.links[peer.ID]
	if l == nil {
		m.nextPort++
		l = &Link{Port: m.nextPort, Peer: peer, created: now}
		m.links[peer.ID] = l
		m.byPort[l.Port] = l
	}
	l.Peer = peer
	l.RTT = now.Sub(p.started)
	if cur := l.endpoint.Load(); cur == nil || from.rank() >= cur.rank() || !l.up {
		l.forceEndpoint(from)
	}
	s.Peer, s.Created, s.Counters = peer.ID, now, &l.Counters
	l.sessions = append(l.sessions, s)
	m.sessions[s.LocalIndex] = s
	if p.dial != nil {
		l.AddCandidates(p.dial.Endpoints)
		p.dial.attempt = nil
		p.dial.tries = 0
		p.dial.Peer, p.dial.known = peer.ID, true
		p.dial.backoff = m.timers.HandshakeRetry
		p.dial.LastError = ""
		// Give the peer time to confirm before dialing again.
		p.dial.next = now.Add(m.timers.HandshakeRetry)
	}
	if l.rekey == p {
		l.rekey = nil
	}
	if s.Confirmed() {
		m.promote(l, s, now)
	}
	m.events.SessionsChanged()
	return l
}

// Confirmed is called when the data path opened the first message of a
// session we initiated: the peer holds the keys, so the session can carry
// traffic.
func (m *Manager) Confirmed(s *Session, now time.Time) {
	if l := m.links[s.Peer]; l != nil && m.sessions[s.LocalIndex] == s {
		m.promote(l, s, now)
		m.events.SessionsChanged()
	}
}

func (m *Manager) promote(l *Link, s *Session, now time.Time) {
	if l.current == nil || s.Created.After(l.current.Created) || l.current.Created.Equal(s.Created) {
		l.current = s
	}
	if !l.up {
		l.up, l.Since = true, now
		l.upgradeAt, l.upgradeGap = now.Add(firstUpgrade), 0
		m.events.LinkUp(l)
	}
}

// Down tears a link down (the overlay no longer wants it, or the peer left).
func (m *Manager) Down(l *Link, reason string) {
	if m.links[l.Peer.ID] != l {
		return
	}
	for _, s := range l.sessions {
		delete(m.sessions, s.LocalIndex)
	}
	if l.rekey != nil {
		delete(m.pending, l.rekey.localIndex)
	}
	delete(m.links, l.Peer.ID)
	delete(m.byPort, l.Port)
	wasUp := l.up
	l.up, l.current, l.sessions, l.rekey = false, nil, nil, nil
	m.events.SessionsChanged()
	if wasUp {
		m.events.LinkDown(l, reason)
	}
}

// Seal encrypts plaintext for l's current session into a datagram and hands
// it to SendDatagram. It reports false when the link cannot send.
func (m *Manager) Send(l *Link, plaintext []byte, now time.Time) bool {
	s := l.current
	if s == nil {
		return false
	}
	return m.sendOn(l, s, plaintext, now)
}

func (m *Manager) sendOn(l *Link, s *Session, plaintext []byte, now time.Time) bool {
	need := wire.TransportOverhead + len(plaintext)
	if cap(m.buf) < need {
		m.buf = make([]byte, 0, need)
	}
	buf := m.buf[:need]
	copy(buf[wire.TransportHeaderLen:], plaintext)
	dgram, err := s.Seal(buf, len(plaintext), now.UnixNano())
	if err != nil {
		return false
	}
	m.events.SendDatagram(l.Endpoint(), dgram)
	return true
}

func (m *Manager) sendKeepalive(l *Link, s *Session, now time.Time) {
	m.sendOn(l, s, nil, now)
}

// Tick runs the timers due at now.
func (m *Manager) Tick(now time.Time) {
	m.expirePending(now)
	for _, d := range m.dials {
		if d.attempt != nil || d.connected(m) || now.Before(d.next) {
			continue
		}
		endpoints, wait := d.attemptEndpoints(), d.backoff
		if len(endpoints) < len(d.Endpoints) {
			wait = min(wait, m.timers.DirectHeadStart)
		}
		p, err := m.startHandshake(endpoints, now, wait)
		if err != nil {
			d.LastError = err.Error()
			m.backoff(d, now)
			continue
		}
		d.tries++
		p.dial, d.attempt = d, p
	}
	for _, id := range nid.SortedKeys(m.links) {
		if l := m.links[id]; l != nil {
			m.tickLink(l, now)
		}
	}
}

func (m *Manager) expirePending(now time.Time) {
	indexes := make([]uint32, 0, len(m.pending))
	for idx := range m.pending {
		indexes = append(indexes, idx)
	}
	slices.Sort(indexes)
	for _, idx := range indexes {
		p := m.pending[idx]
		if p == nil || now.Before(p.expires) {
			continue
		}
		delete(m.pending, idx)
		if d := p.dial; d != nil && d.attempt == p {
			// The wait for an answer was the pause: try again at once, but
			// wait longer for the next answer.
			d.attempt = nil
			d.LastError = "no answer"
			d.next = now
			d.backoff = min(2*d.backoff, m.timers.MaxHandshakeRetry)
			m.giveUpIfExhausted(d)
		}
		if p.rekeyOf != nil && p.rekeyOf.rekey == p {
			p.rekeyOf.rekey = nil
		}
	}
}

func (m *Manager) tickLink(l *Link, now time.Time) {
	t := m.timers
	if !l.up {
		if now.Sub(l.created) >= t.DeadAfter {
			m.Down(l, "handshake never confirmed")
		}
		return
	}
	lastRx := l.Counters.LastRx()
	if lastRx.Before(l.Since) {
		lastRx = l.Since
	}
	if now.Sub(lastRx) >= t.DeadAfter {
		m.Down(l, fmt.Sprintf("no message for %v", now.Sub(lastRx).Round(time.Millisecond)))
		return
	}
	m.dropOldSessions(l, now)
	if l.current == nil {
		m.Down(l, "sessions expired")
		return
	}
	if l.rekey == nil && !now.Before(l.upgradeAt) {
		l.upgradeGap = min(max(2*l.upgradeGap, firstUpgrade), upgradeEvery)
		l.upgradeAt = now.Add(l.upgradeGap)
		if better := l.betterCandidates(); len(better) > 0 {
			// Probe a better path with a fresh handshake; when it completes,
			// its session moves the link there without a gap.
			if p, err := m.startHandshake(better, now, t.HandshakeRetry); err == nil {
				p.rekeyOf, l.rekey = l, p
			}
		}
	}
	if m.needsRekey(l, now) && l.rekey == nil && !now.Before(l.rekeyAt) {
		if p, err := m.startHandshake([]Endpoint{l.Endpoint()}, now, t.HandshakeRetry); err == nil {
			p.rekeyOf, l.rekey = l, p
		}
		l.rekeyAt = now.Add(t.HandshakeRetry)
	}
	if now.Sub(l.Counters.LastTx()) >= t.Keepalive {
		m.sendKeepalive(l, l.current, now)
	}
}

// needsRekey: the side that initiated the current session rekeys on time;
// the other side steps in only if that did not happen, to avoid both
// starting at once. Either side rekeys on volume.
func (m *Manager) needsRekey(l *Link, now time.Time) bool {
	s := l.current
	age := now.Sub(s.Created)
	if s.Messages() >= m.timers.RekeyAfterMessages {
		return true
	}
	if s.Initiator {
		return age >= m.timers.RekeyAfter
	}
	return age >= m.timers.RekeyAfter+m.timers.DeadAfter
}

func (m *Manager) dropOldSessions(l *Link, now time.Time) {
	kept := l.sessions[:0]
	changed := false
	for _, s := range l.sessions {
		if n := s.received.Load(); n != s.seenReceived {
			s.seenReceived, s.lastUsed = n, now
		}
		expired := now.Sub(s.Created) >= m.timers.RejectAfter
		// When both ends handshake at once (both try the direct path of a
		// relayed link), each may send on a different new session; a
		// session the peer still sends on is not replaced for it yet.
		replaced := s != l.current && s.Created.Before(l.current.Created) && now.Sub(retiredSince(l.current, s)) >= sessionGrace
		if expired || replaced {
			delete(m.sessions, s.LocalIndex)
			changed = true
			if s == l.current {
				l.current = nil
			}
			continue
		}
		kept = append(kept, s)
	}
	l.sessions = kept
	if l.current == nil {
		for _, s := range kept {
			if s.Confirmed() && (l.current == nil || s.Created.After(l.current.Created)) {
				l.current = s
			}
		}
	}
	if changed {
		m.events.SessionsChanged()
	}
}

// retiredSince is when s, older than current, became unneeded: when
// current was made or the peer last sent on s, whichever is later.
func retiredSince(current, s *Session) time.Time {
	if s.lastUsed.After(current.Created) {
		return s.lastUsed
	}
	return current.Created
}

// NextDeadline is when Tick should run next.
func (m *Manager) NextDeadline(now time.Time) time.Time {
	next := now.Add(time.Hour)
	earlier := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}
	for _, p := range m.pending {
		earlier(p.expires)
	}
	for _, d := range m.dials {
		if d.attempt == nil && !d.connected(m) {
			earlier(d.next)
		}
	}
	t := m.timers
	for _, l := range m.links {
		if !l.up {
			earlier(l.created.Add(t.DeadAfter))
			continue
		}
		earlier(l.Counters.LastTx().Add(t.Keepalive))
		if l.rekey == nil && len(l.betterCandidates()) > 0 {
			earlier(l.upgradeAt)
		}
		lastRx := l.Counters.LastRx()
		if lastRx.Before(l.Since) {
			lastRx = l.Since
		}
		earlier(lastRx.Add(t.DeadAfter))
		// A rekey in flight is timed by its pending handshake; a failed one
		// is retried at rekeyAt. (Without this the rekey time, passed
		// already, would ask for a tick now until the peer answers.)
		if s := l.current; s != nil && l.rekey == nil {
			due := s.Created.Add(t.RekeyAfter)
			if !s.Initiator {
				due = due.Add(t.DeadAfter)
			}
			if due.Before(l.rekeyAt) {
				due = l.rekeyAt
			}
			earlier(due)
		}
		for _, s := range l.sessions {
			earlier(s.Created.Add(t.RejectAfter))
			if l.current != nil && s.Created.Before(l.current.Created) {
				earlier(retiredSince(l.current, s).Add(sessionGrace)) // when dropOldSessions retires s
			}
		}
	}
	if next.Before(now) {
		return now
	}
	return next
}
