package link

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"burrow/wire"
)

type pending struct {
	localIndex  uint32
	remoteIndex uint32
	endpoints   []Endpoint
	started     time.Time
	// retryAt is when the dial or rekey stops waiting for this attempt
	// and makes another; expires is when a late answer is no longer
	// taken. A peer slowed down by its load answers late, and throwing its
	// work away only to ask it again feeds the load.
	retryAt   time.Time
	expires   time.Time
	initiator *Initiator
	responder *Responder
	dial      *Dial
	rekeyOf   *Link
	// fallback: the handshake tries the worse direct paths of rekeyOf,
	// whose direct IPv6 path went quiet (see Link.fallbackCandidates).
	fallback bool
	// initMsg is the initiation with its cookie slot, kept to send again
	// with a cookie in the slot.
	initMsg []byte
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
	// The cookie slot, empty at first, makes the initiation as long as
	// the answer of a typical certificate, which a responder then gives
	// without proof of the address first (see InitLen).
	msg = append(msg, make([]byte, CookieLen)...)
	p := &pending{localIndex: m.newIndex(), endpoints: endpoints, started: now, retryAt: now.Add(retry),
		expires: now.Add(max(retry, lateAnswers)), initiator: ini, initMsg: msg}
	m.pending[p.localIndex] = p
	m.stats.HandshakesStarted.Add(1)
	for _, ep := range endpoints {
		m.send(ep, wire.HandshakeHeader{Type: wire.TypeHandshakeInit, Sender: p.localIndex}, msg)
	}
	return p, nil
}

// Punch sends one handshake to every endpoint in eps for link l, once,
// beside the link's current path and whatever upgrade it tries: a batch
// of hole-punching probes. Should an answer come back through one of
// them, the link moves there without a gap.
func (m *Manager) Punch(l *Link, eps []Endpoint, now time.Time) error {
	p, err := m.startHandshake(eps, now, lateAnswers)
	if err != nil {
		return err
	}
	p.rekeyOf = l
	return nil
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
	case wire.TypeHandshakeCookie:
		m.handleCookie(from, h, body)
	}
}

func (m *Manager) handleInit(from Endpoint, h wire.HandshakeHeader, body []byte, now time.Time) {
	received := wire.HandshakeHeaderLen + len(body)
	if received < InitLen {
		m.stats.HandshakeTooShort.Add(1)
		return
	}
	body, cookie := splitCookie(body)
	// An initiation is answered with a cookie, which costs a hash and is
	// shorter than the initiation, past the rate limits or when the
	// answer would be longer than the initiation; only one that comes
	// back with it, from an address that receives, is then taken on
	// (past the limits, within the limit for proven addresses).
	proven := func() bool { return cookie != nil && m.cookies.valid(cookie, from, now) }
	switch {
	case !m.limiter.Allow(from.Source(), now):
		if !proven() || !m.provenLimiter.Allow(from.Source(), now) {
			m.stats.HandshakeRateLimited.Add(1)
			m.sendCookie(from, h, now)
			return
		}
	case replyLen(m.cfg.Handshake.Cert) > received && !proven():
		m.stats.HandshakeAnswerTooLong.Add(1)
		m.sendCookie(from, h, now)
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
		retryAt: now.Add(responderTimeout), expires: now.Add(responderTimeout), responder: r}
	m.pending[p.localIndex] = p
	m.send(from, wire.HandshakeHeader{Type: wire.TypeHandshakeReply, Sender: p.localIndex, Receiver: h.Sender}, reply)
}

// sendCookie answers an initiation with a cookie for its address.
func (m *Manager) sendCookie(from Endpoint, h wire.HandshakeHeader, now time.Time) {
	m.stats.CookiesSent.Add(1)
	m.send(from, wire.HandshakeHeader{Type: wire.TypeHandshakeCookie, Receiver: h.Sender}, m.cookies.make(from, now))
}

// handleCookie sends the initiation a busy peer answered with a cookie
// again, with the cookie: the peer then takes it on. A cookie is taken
// only from where the initiation went: from anywhere else, a forged one
// would have this node send its initiation to an address of the forger's
// choosing.
func (m *Manager) handleCookie(from Endpoint, h wire.HandshakeHeader, cookie []byte) {
	p := m.pending[h.Receiver]
	if p == nil || p.initiator == nil || len(cookie) != CookieLen || !p.sentTo(from) {
		m.stats.HandshakeUnknownIndex.Add(1)
		return
	}
	msg := len(p.initMsg) - CookieLen
	m.send(from, wire.HandshakeHeader{Type: wire.TypeHandshakeInit, Sender: p.localIndex}, append(p.initMsg[:msg:msg], cookie...))
}

// sentTo reports whether the initiation went to from's address.
func (p *pending) sentTo(from Endpoint) bool {
	return slices.ContainsFunc(p.endpoints, func(e Endpoint) bool {
		return e.Via == from.Via && e.Addr == from.Addr && e.Relay == from.Relay
	})
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
	s.LocalIndex, s.RemoteIndex = p.localIndex, h.Sender
	m.install(peer, hello.Boot, s, from, p, now)
	m.send(from, wire.HandshakeHeader{Type: wire.TypeHandshakeFinish, Sender: p.localIndex, Receiver: h.Sender}, msg)
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
	l := m.install(peer, hello.Boot, s, from, p, now)
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

// install attaches a new session to the peer's link, creating the link.
func (m *Manager) install(peer Peer, boot uint64, s *Session, from Endpoint, p *pending, now time.Time) *Link {
	m.stats.HandshakesCompleted.Add(1)
	l := m.links[peer.ID]
	if l != nil && l.peerBoot != boot {
		// The peer restarted: all it knew of the old link, and all that
		// was learned through it, is gone. Down, then up again.
		m.Down(l, "peer restarted")
		l = nil
	}
	if l == nil {
		m.nextPort++
		l = &Link{Port: m.nextPort, Peer: peer, created: now, peerBoot: boot, bestCandidate: -1}
		m.links[peer.ID] = l
		i, _ := m.linkIndex(peer.ID)
		m.byID = slices.Insert(m.byID, i, l)
		m.byPort[l.Port] = l
	}
	l.Peer = peer
	l.RTT = now.Sub(p.started)
	// The peer's half of a handshake is a message from it like any other:
	// a link quiet for a while, whose peer has just redialed on it, is not
	// dead.
	storeIfLater(&l.Counters.lastRx, now.UnixNano())
	if l.Counters.ProbeRTT() == 0 {
		l.Counters.ProbeAnswered(p.started.UnixNano(), now.UnixNano())
	}
	if cur := l.endpoint.Load(); cur == nil || from.rank() >= cur.rank() || !l.up || m.fellBack(l, cur, from, p, now) {
		l.forceEndpoint(from)
	}
	if *l.endpoint.Load() == from {
		// The peer answered on the path the link uses: it is alive there,
		// whatever went unanswered before. A suspect link whose fallback
		// handshake was answered at once went down at its next tick (its
		// wait for the fallback over, its wait for the peer long past)
		// before the peer's first message on the new path arrived.
		l.Counters.health.heard()
	}
	s.Peer, s.Created, s.Counters = peer.ID, now, &l.Counters
	l.sessions = append(l.sessions, s)
	l.sessionsChanged(m.timers)
	m.sessions[s.LocalIndex] = s
	m.events.SessionInstalled()
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
	m.endDialsUntilUp(peer.ID)
	if s.Confirmed() {
		m.promote(l, s, now)
	}
	m.events.SessionsChanged()
	return l
}

// fellBack reports whether a handshake completed over from, a worse path
// than cur, is a fallback from a dead IPv6 path that the link follows: our
// own fallback, or, as responder, a peer's completed over a worse direct
// path while we use its IPv6 address — a peer only does that when IPv6
// went quiet for it (rekeys take the current path, upgrades better ones).
// In the link's first handshake retry interval, the handshakes of both
// ends' dials, sent over every family at once, may still be completing:
// those are no fallback.
func (m *Manager) fellBack(l *Link, cur *Endpoint, from Endpoint, p *pending, now time.Time) bool {
	if !cur.IsBest() || from.Via != UDP || from.IsRelay() {
		return false
	}
	return p.fallback || (p.responder != nil && now.Sub(l.Since) >= m.timers.HandshakeRetry)
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
		l.sessionsChanged(m.timers)
	}
	if !l.up {
		l.up, l.Since = true, now
		l.upgradeAt, l.upgradeGap = now.Add(firstUpgrade), 0
		m.events.LinkUp(l)
	}
}
