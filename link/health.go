package link

import (
	"fmt"
	"sync/atomic"
	"time"

	"burrow/wire"
)

// A link that carries traffic must notice a dead peer in round trips, not
// after DeadAfter of silence: flows through it stall for as long as it
// takes. Every data message sent starts a wait that any authenticated
// message from the peer ends. A wait longer than probeAfter sends a probe,
// which the peer answers at once; a probe unanswered for suspectAfter makes
// the link suspect, and the data path moves its unicast to backup next
// hops; a wait longer than downAfter takes the link down. Each threshold
// is a multiple of the link's measured round trip with a floor, so a slow
// path is not mistaken for a dead one. Idle links send no probes: their
// keepalives and DeadAfter stay as they were.
const (
	probeAfterRTTs   = 2
	probeAfterFloor  = 10 * time.Millisecond
	suspectAfterRTTs = 4
	suspectFloor     = 25 * time.Millisecond
	downAfterRTTs    = 16
	downFloor        = 500 * time.Millisecond
)

// health is the liveness state of a link, shared by the data path (which
// sends and receives) and the core (which probes and takes links down).
type health struct {
	waiting atomic.Int64 // unix ns of the first data sent since the peer was last heard; 0 when none
	// firstProbe is the first probe sent during the wait: suspicion runs
	// from it, however many probes follow.
	firstProbe atomic.Int64
	probed     atomic.Int64 // unix ns of the last probe sent
	srtt       atomic.Int64 // smoothed probe round trip, ns
	reported   atomic.Bool  // the data path told the core the link is suspect
}

// probing records a probe sent at now and reports whether it is the first
// of the wait.
func (h *health) probing(now int64) bool {
	h.probed.Store(now)
	first := h.firstProbe.Load()
	return first < h.waiting.Load() && h.firstProbe.CompareAndSwap(first, now)
}

// heard ends the wait: the peer is alive. The wait's probe is answered
// with it: a wait that begins at the same instant (the data path reads
// the clock once per batch) must not take it for its own, or it would be
// suspect, unprobed, as soon as suspectAfter passed.
func (h *health) heard() {
	if h.waiting.Load() != 0 {
		h.waiting.Store(0)
		h.firstProbe.Store(0)
	}
}

func (h *health) rtt() time.Duration { return time.Duration(h.srtt.Load()) }

// thresholds are the link's liveness thresholds at its current round trip.
func (h *health) thresholds() (probeAfter, suspectAfter, downAfter time.Duration) {
	rtt := h.rtt()
	return max(probeAfterRTTs*rtt, probeAfterFloor), max(suspectAfterRTTs*rtt, suspectFloor), max(downAfterRTTs*rtt, downFloor)
}

// SentData records a data message sent at now and reports whether a
// probe should go out with it: the peer has been silent for probeAfter
// while we sent, and no probe has been sent since the silence began.
func (c *Counters) SentData(now int64) (probe bool) {
	h := &c.health
	since := h.waiting.Load()
	if since == 0 {
		h.waiting.CompareAndSwap(0, now)
		return false
	}
	probeAfter, _, _ := h.thresholds()
	return now-since >= int64(probeAfter) && h.firstProbe.Load() < since && h.probing(now)
}

// Suspect reports whether a probe has gone unanswered for suspectAfter:
// the data path should stop sending on this link and use a backup.
func (c *Counters) Suspect(now int64) bool {
	h := &c.health
	since := h.waiting.Load()
	if since == 0 {
		return false
	}
	first := h.firstProbe.Load()
	_, suspectAfter, _ := h.thresholds()
	return first >= since && now-first >= int64(suspectAfter)
}

// ReportSuspect reports whether the caller is the first to notice the
// link is suspect since the core last looked, so that the core is told
// once, not for every packet.
func (c *Counters) ReportSuspect() bool { return c.health.reported.CompareAndSwap(false, true) }

// ProbeAnswered records the round trip of a probe sent at stamp (unix ns),
// answered at now.
func (c *Counters) ProbeAnswered(stamp, now int64) {
	rtt := now - stamp
	if rtt <= 0 || rtt > int64(time.Minute) {
		return // not a stamp of ours
	}
	h := &c.health
	if old := h.srtt.Load(); old > 0 {
		rtt = old + (rtt-old)/8
	}
	h.srtt.Store(rtt)
}

// ProbeRTT is the link's smoothed round trip, measured by its probes (or
// its handshake until the first probe is answered).
func (c *Counters) ProbeRTT() time.Duration { return c.health.rtt() }

// Suspect is the data path's report that l's peer stopped answering: the
// link leaves the flood adjacency and is probed from here on, until the
// peer answers (it is healthy again) or downAfter passes (it goes down).
func (m *Manager) Suspect(l *Link, now time.Time) {
	if l.suspect {
		return
	}
	if m.links[l.Peer.ID] != l || !l.up || l.Counters.health.waiting.Load() == 0 {
		l.Counters.health.reported.Store(false) // gone, or answered since it was reported
		return
	}
	l.suspect = true
	m.Probe(l, now)
	m.tryFallback(l, now)
	m.events.LinkHealth(l)
}

// Probe sends l's peer a probe, which it answers at once.
func (m *Manager) Probe(l *Link, now time.Time) {
	l.Counters.health.probing(now.UnixNano())
	if s := l.current; s != nil {
		var probe [wire.ProbeLen]byte
		m.sendOn(l, s, wire.AppendProbe(probe[:0], false, now.UnixNano()), now)
	}
}

// tickSuspect probes a suspect link, clears it when the peer answered and
// takes it down when the peer stayed silent for downAfter (longer while
// a fallback handshake is in flight, see downAt). It reports
// whether the link went down.
func (m *Manager) tickSuspect(l *Link, now time.Time) bool {
	h := &l.Counters.health
	since := h.waiting.Load()
	if since == 0 {
		l.suspect = false
		h.reported.Store(false)
		m.events.LinkHealth(l)
		return false
	}
	probeAfter, _, _ := h.thresholds()
	if !now.Before(l.downAt()) {
		silent := now.Sub(time.Unix(0, since))
		l.unanswered = true
		m.Down(l, fmt.Sprintf("no answer to probes for %v", silent.Round(time.Millisecond)))
		return true
	}
	if now.UnixNano()-h.probed.Load() >= int64(probeAfter) {
		m.Probe(l, now)
	}
	return false
}

// suspectDeadline is when tickSuspect must look at a suspect link again.
func (l *Link) suspectDeadline() time.Time {
	h := &l.Counters.health
	probeAfter, _, _ := h.thresholds()
	next := time.Unix(0, h.probed.Load()).Add(probeAfter)
	if h.waiting.Load() != 0 {
		if down := l.downAt(); down.Before(next) {
			next = down
		}
	}
	return next
}

// downAt is when a suspect link goes down: downAfter into the peer's
// silence, or, while a fallback handshake for it is in flight, when that
// is tried again. Its answer moves the link without a gap; on a loaded
// machine it came a little after downAfter, and the link went down only
// to be dialed again.
func (l *Link) downAt() time.Time {
	h := &l.Counters.health
	_, _, downAfter := h.thresholds()
	down := time.Unix(0, h.waiting.Load()).Add(downAfter)
	if p := l.rekey; p != nil && p.fallback && p.retryAt.After(down) {
		down = p.retryAt
	}
	return down
}
