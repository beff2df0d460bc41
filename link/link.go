// Package link runs burrow's encrypted links: Noise XX handshakes that
// authenticate both certificates, transport sessions with 64-bit counters
// and a sliding replay window, rekeying on time and volume, keepalives and
// dead-peer detection. It is pure: the caller passes the time, supplies
// randomness, and carries the datagrams this package asks it to send.
//
// Links are the tunnels between neighbours of the EdgeVPN seed's overlay
// (section 3.3 builds them on WebRTC; burrow on Noise sessions). All links
// of a node share one socket; a link is identified by the peer's node ID
// once the handshake has proven it. A link on a relayed, TURN or WebSocket
// path keeps trying the peer's direct endpoints and moves to a better path
// without a gap.
package link

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"burrow/nid"
)

// Peer is what a verified certificate says about the other side.
type Peer struct {
	ID        nid.ID
	Name      string
	Addresses []netip.Prefix
	Groups    []string
	NotAfter  time.Time
}

// Link is an authenticated association with one peer.
type Link struct {
	// NextDeadline and Tick read these fields of every link, when the
	// links are mostly out of the cache: they come first, together,
	// followed by Counters, whose first fields they read too.
	up bool
	// suspect: the peer stopped answering probes; the data path sends
	// around it until it answers or the link goes down.
	suspect bool
	// unanswered: the link went down because its probes were not answered.
	unanswered bool
	removed    bool // Down took it out of the Manager
	// rankedRank is the rank of rankedEndpoint, the endpoint the core
	// last looked at: the core ranks the path on every tick, and reading
	// the endpoint itself costs a cache miss per link. Only the core
	// touches these two; the data path only moves endpoint.
	rankedRank int8
	// bestCandidate is the highest rank among the candidates (-1 for
	// none), fallbackCandidate whether one is a fallback, so that timers
	// and deadlines need not go through them.
	bestCandidate     int8
	fallbackCandidate bool
	current           *Session // used for sending
	rekey             *pending // handshake in flight to replace current
	endpoint          atomic.Pointer[Endpoint]
	rankedEndpoint    *Endpoint
	sessions          []*Session // accepted for receiving, newest last
	upgradeAt         time.Time
	rekeyAt           time.Time // earliest next rekey attempt
	// rekeyDue and sessionsDue are the deadlines that come from the
	// sessions, kept by sessionsChanged: reading the sessions themselves
	// after every event would take a cache line or two per session.
	rekeyDue    time.Time // when current is old enough to rekey
	sessionsDue time.Time // when dropOldSessions drops a session; zero for none
	Since       time.Time // when the link came up
	Counters    Counters

	Port uint32 // switch port number, unique for the node's lifetime
	Peer Peer
	// RTT is the round trip of the last handshake on the link, a cheap
	// measure of the path for choosing relays.
	RTT time.Duration
	// candidates are the peer's known endpoints; a link on a worse path
	// keeps trying them to upgrade.
	candidates []Endpoint
	upgradeGap time.Duration // grows from firstUpgrade to upgradeEvery
	fallbackAt time.Time     // earliest next fallback handshake
	created    time.Time
	// peerBoot is the peer's boot stamp from the handshake: a new one
	// means the peer restarted.
	peerBoot uint64
}

// Endpoint is where the peer's datagrams currently come from.
func (l *Link) Endpoint() Endpoint { return *l.endpoint.Load() }

// pathRank is the rank of the current endpoint. The core only: it keeps
// the rank of the endpoint it saw last, which the data path may replace
// (always with a new pointer) but does not change.
func (l *Link) pathRank() int {
	if ep := l.endpoint.Load(); ep != l.rankedEndpoint {
		l.rankedEndpoint, l.rankedRank = ep, int8(ep.rank())
	}
	return int(l.rankedRank)
}

// Relayed reports whether the link's datagrams travel inside another
// link. The core only, like pathRank.
func (l *Link) Relayed() bool { return l.pathRank() == 0 }

// OnBestPath reports whether no kind of path beats the link's current
// one. The core only, like pathRank.
func (l *Link) OnBestPath() bool { return l.pathRank() == bestRank }

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
			l.bestCandidate = max(l.bestCandidate, int8(ep.rank()))
			l.fallbackCandidate = l.fallbackCandidate || isFallback(ep)
		}
	}
}

// betterCandidates are the candidates on a better kind of path than the
// current one.
func (l *Link) betterCandidates() []Endpoint {
	cur := l.pathRank()
	var out []Endpoint
	for _, c := range l.candidates {
		if c.rank() > cur {
			out = append(out, c)
		}
	}
	return out
}

// fallbackCandidates are, for a link on a direct IPv6 path, the peer's
// direct candidates on a worse path (IPv4): tried when the IPv6 path goes
// quiet, so the link moves there before it would be declared dead.
// Relays are left to the dial that follows a link gone down.
func (l *Link) fallbackCandidates() []Endpoint {
	if !l.OnBestPath() {
		return nil
	}
	var out []Endpoint
	for _, c := range l.candidates {
		if isFallback(c) {
			out = append(out, c)
		}
	}
	return out
}

// hasFallbackCandidate reports whether fallbackCandidates has any, without
// building them.
func (l *Link) hasFallbackCandidate() bool {
	return l.fallbackCandidate && l.OnBestPath()
}

// isFallback says c is a direct path worse than IPv6.
func isFallback(c Endpoint) bool { return c.Via == UDP && !c.IsRelay() && !c.IsBest() }

// quietSince is when the peer was last heard on the link, or when the link
// came up if it has not been heard since.
func (l *Link) quietSince() time.Time {
	if rx := l.Counters.LastRx(); rx.After(l.Since) {
		return rx
	}
	return l.Since
}

// fallbackDue is when a link on a direct IPv6 path counts as quiet: half a
// keepalive interval after the peer's keepalive was due. An idle peer
// sends one every interval, so only a dead path (or peer) stays silent.
func (l *Link) fallbackDue(t Timers) time.Time {
	return l.quietSince().Add(t.Keepalive + t.Keepalive/2)
}

// sessionsChanged recomputes rekeyDue and sessionsDue; it runs whenever
// sessions, current or a session's lastUsed changed.
func (l *Link) sessionsChanged(t Timers) {
	if s := l.current; s != nil {
		l.rekeyDue = s.Created.Add(t.RekeyAfter)
		if !s.Initiator {
			l.rekeyDue = l.rekeyDue.Add(t.DeadAfter)
		}
	}
	l.sessionsDue = time.Time{}
	earlier := func(t time.Time) {
		if l.sessionsDue.IsZero() || t.Before(l.sessionsDue) {
			l.sessionsDue = t
		}
	}
	for _, s := range l.sessions {
		earlier(s.Created.Add(t.RejectAfter))
		if l.current != nil && s.Created.Before(l.current.Created) {
			earlier(retiredSince(l.current, s).Add(sessionGrace)) // when dropOldSessions retires s
		}
	}
}

// hasBetterCandidate reports whether betterCandidates has any, without
// building them.
func (l *Link) hasBetterCandidate() bool {
	return int(l.bestCandidate) > l.pathRank()
}

// Up reports whether the link carries traffic.
func (l *Link) Up() bool { return l.up }

// Suspect reports whether the peer stopped answering the link's probes.
func (l *Link) Suspect() bool { return l.suspect }

// Unanswered reports whether the link went down because the peer stopped
// answering its probes — within a second, so possibly a peer held up
// rather than dead.
func (l *Link) Unanswered() bool { return l.unanswered }

// Current is the session used for sending, nil while the link is down.
func (l *Link) Current() *Session { return l.current }

// Sessions are the sessions accepted for receiving.
func (l *Link) Sessions() []*Session { return l.sessions }
