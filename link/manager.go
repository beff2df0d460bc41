package link

import (
	"encoding/binary"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"burrow/nid"
	"burrow/ratelimit"
	"burrow/wire"
)

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
	// LinkHealth says the link turned suspect or answered again.
	LinkHealth(l *Link)
	// SessionsChanged says the set of sessions or their roles changed, so
	// the data path's snapshot must be rebuilt.
	SessionsChanged()
	// SessionInstalled says a handshake installed a session, which the
	// peer uses as soon as the next message of this node reaches it: the
	// data path must know the session before the call returns. Its first
	// datagrams otherwise reached a data path still without it, while the
	// core had yet to publish it, and were dropped.
	SessionInstalled()
	// DialFailed reports a dial given up after its attempts ran out.
	DialFailed(d *Dial)
}

// Stats count handshake outcomes and drops in the control path.
type Stats struct {
	HandshakesStarted, HandshakesCompleted atomic.Uint64
	HandshakeRejected                      atomic.Uint64 // certificate refused
	HandshakeInvalid                       atomic.Uint64 // not a valid Noise message
	HandshakeRateLimited                   atomic.Uint64
	// HandshakeTooShort counts initiations shorter than InitLen, which
	// no burrow node sends: they get no answer.
	HandshakeTooShort atomic.Uint64
	// HandshakeAnswerTooLong counts initiations answered with a cookie
	// because the answer would have been longer than they were.
	HandshakeAnswerTooLong atomic.Uint64
	// CookiesSent counts initiations answered with a cookie: past the
	// rate limits, before any Diffie-Hellman.
	CookiesSent           atomic.Uint64
	HandshakeUnknownIndex atomic.Uint64
	Malformed             atomic.Uint64
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
	// provenLimiter bounds the initiations that came back with a cookie:
	// per address, and not counted against the total.
	provenLimiter *ratelimit.Limiter
	cookies       cookieJar
	stats         Stats
	buf           []byte
	// byID holds the links of the links map sorted by peer ID: ticks
	// visit them in a fixed order without sorting the keys each time.
	byID    []*Link
	ticking []*Link // Tick's snapshot of byID, kept for its capacity
	// keepalivePhase places this node's keepalive rounds (see
	// keepaliveDue): nanoseconds past a multiple of the round, derived
	// from its ID so that nodes do not all send at the same instants.
	keepalivePhase int64
}

const (
	responderTimeout = 5 * time.Second
	// lateAnswers is how long a handshake we started still takes its
	// answer after we made another attempt.
	lateAnswers = 10 * time.Second
	maxPending  = 1024
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
	m := &Manager{
		cfg:           cfg,
		timers:        cfg.Timers.withDefaults(),
		events:        events,
		self:          nid.FromPublicKey(cfg.Handshake.Public),
		links:         make(map[nid.ID]*Link),
		byPort:        make(map[uint32]*Link),
		sessions:      make(map[uint32]*Session),
		pending:       make(map[uint32]*pending),
		limiter:       ratelimit.New(cfg.HandshakesPerSource, cfg.HandshakesTotal, 4096),
		provenLimiter: ratelimit.New(cfg.HandshakesPerSource, math.MaxFloat64/4, 4096),
		cookies:       cookieJar{rand: cfg.Handshake.Rand},
		buf:           make([]byte, 0, 2048),
	}
	m.keepalivePhase = int64(binary.LittleEndian.Uint64(m.self[:8]) % uint64(m.keepaliveRound()))
	return m
}

// Self is this node's ID.
func (m *Manager) Self() nid.ID { return m.self }

// Stats are the handshake counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Timers are the effective timing parameters.
func (m *Manager) Timers() Timers { return m.timers }

// Links returns the links that are up or coming up, by peer.
func (m *Manager) Links() map[nid.ID]*Link { return m.links }

// linkIndex is where the link to id is, or belongs, in byID.
func (m *Manager) linkIndex(id nid.ID) (int, bool) {
	return slices.BinarySearchFunc(m.byID, id, func(l *Link, id nid.ID) int { return l.Peer.ID.Compare(id) })
}

// LinkByPort finds a link by its switch port.
func (m *Manager) LinkByPort(port uint32) *Link { return m.byPort[port] }

// Session finds a session by the index the peer puts in its headers.
func (m *Manager) Session(index uint32) *Session { return m.sessions[index] }

// Dials are the standing dials.
func (m *Manager) Dials() []*Dial { return m.dials }

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
	l.removed = true
	if i, ok := m.linkIndex(l.Peer.ID); ok {
		m.byID = slices.Delete(m.byID, i, i+1)
	}
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
	dgram, err := s.Seal(m.buf[:need], plaintext, now.UnixNano())
	if err != nil {
		return false
	}
	m.events.SendDatagram(l.Endpoint(), dgram)
	return true
}

func (m *Manager) sendKeepalive(l *Link, s *Session, now time.Time) {
	m.sendOn(l, s, nil, now)
}
