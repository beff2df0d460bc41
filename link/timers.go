package link

import (
	"fmt"
	"slices"
	"time"
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
		Keepalive:      2 * time.Second,
		DeadAfter:      6 * time.Second,
		HandshakeRetry: time.Second,
		// A cap of a few seconds: a node joining through a contact that
		// hundreds join through at once gets answers late, and a longer
		// cap left it waiting up to half a minute after the rush.
		MaxHandshakeRetry: 8 * time.Second,
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
	// A snapshot: ticking a link may take links down. It is taken out of
	// m while in use, should a callback tick again.
	links := append(m.ticking[:0], m.byID...)
	m.ticking = nil
	for _, l := range links {
		if l.removed {
			// Taken down meanwhile: tick the peer's new link, if any.
			if l = m.links[l.Peer.ID]; l == nil {
				continue
			}
		}
		m.tickLink(l, now)
	}
	clear(links) // links that went down are garbage
	m.ticking = links
}

func (m *Manager) expirePending(now time.Time) {
	indexes := make([]uint32, 0, len(m.pending))
	for idx := range m.pending {
		indexes = append(indexes, idx)
	}
	slices.Sort(indexes)
	for _, idx := range indexes {
		p := m.pending[idx]
		if p == nil || now.Before(p.retryAt) {
			continue
		}
		if !now.Before(p.expires) {
			delete(m.pending, idx)
		}
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
	if l.suspect && m.tickSuspect(l, now) {
		return
	}
	m.tryFallback(l, now)
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
	if !now.Before(m.keepaliveDue(l)) {
		m.sendKeepalive(l, l.current, now)
	}
}

// keepaliveDue is when l sends its next keepalive: at the first of the
// node's keepalive rounds, half an interval apart, more than half an
// interval after l last sent. Each link falling due at its own moment
// woke an idle node with a dozen links a dozen times per interval; now
// it wakes at most once per round. An idle link still sends once per
// interval, and none waits longer than that, so the peer's dead-peer
// timer is as safe as before; a link that just stopped carrying traffic
// sends its first keepalive up to half an interval early.
func (m *Manager) keepaliveDue(l *Link) time.Time {
	last := l.Counters.lastTx.Load()
	if last == 0 {
		return time.Time{}
	}
	round := m.keepaliveRound()
	return time.Unix(0, ((last+round-m.keepalivePhase)/round+1)*round+m.keepalivePhase)
}

// keepaliveRound is the time between keepalive rounds, in nanoseconds.
func (m *Manager) keepaliveRound() int64 { return max(int64(m.timers.Keepalive/2), 1) }

// tryFallback starts a handshake over the worse direct paths of a link
// whose direct IPv6 path went quiet, once per handshake retry interval,
// or suspect, at once: a suspect link is about to be declared dead, and
// may be so soon after the last fallback (IPv6 failing again right after
// the link came back to it); l.rekey keeps it to one handshake at a
// time. When it completes, the link moves there without going down, and
// the upgrade probes bring it back to IPv6 once that works again.
func (m *Manager) tryFallback(l *Link, now time.Time) {
	t := m.timers
	if !l.hasFallbackCandidate() || l.rekey != nil || !l.suspect && (now.Before(l.fallbackAt) || now.Before(l.fallbackDue(t))) {
		return // without a fallback candidate, there is nothing to try
	}
	l.fallbackAt = now.Add(t.HandshakeRetry)
	if p, err := m.startHandshake(l.fallbackCandidates(), now, t.HandshakeRetry); err == nil {
		p.rekeyOf, p.fallback, l.rekey = l, true, p
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
	l.sessionsChanged(m.timers)
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
		if p.retryAt.After(now) {
			earlier(p.retryAt)
		} else {
			earlier(p.expires)
		}
	}
	for _, d := range m.dials {
		if d.attempt == nil && !d.connected(m) {
			earlier(d.next)
		}
	}
	t := m.timers
	for _, l := range m.byID {
		if !l.up {
			earlier(l.created.Add(t.DeadAfter))
			continue
		}
		earlier(m.keepaliveDue(l))
		if l.rekey == nil && l.upgradeAt.Before(next) && l.hasBetterCandidate() {
			next = l.upgradeAt
		}
		if l.rekey == nil && l.hasFallbackCandidate() {
			due := l.fallbackDue(t)
			if due.Before(l.fallbackAt) {
				due = l.fallbackAt
			}
			earlier(due)
		}
		lastRx := l.Counters.LastRx()
		if lastRx.Before(l.Since) {
			lastRx = l.Since
		}
		earlier(lastRx.Add(t.DeadAfter))
		if l.suspect {
			earlier(l.suspectDeadline())
		}
		// A rekey in flight is timed by its pending handshake; a failed one
		// is retried at rekeyAt. (Without this the rekey time, passed
		// already, would ask for a tick now until the peer answers.)
		if l.current != nil && l.rekey == nil {
			due := l.rekeyDue
			if due.Before(l.rekeyAt) {
				due = l.rekeyAt
			}
			earlier(due)
		}
		if !l.sessionsDue.IsZero() {
			earlier(l.sessionsDue)
		}
	}
	if next.Before(now) {
		return now
	}
	return next
}
