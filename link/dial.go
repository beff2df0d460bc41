package link

import (
	"slices"
	"time"

	"burrow/nid"
)

// Dial is a standing wish to have a link to an endpoint: the Manager keeps
// retrying, with backoff, while no link to that peer is up.
type Dial struct {
	// Endpoints are tried together; relayed ones only from the second
	// attempt on, one more per attempt (see attemptEndpoints).
	Endpoints []Endpoint
	Key       *[32]byte // if set, only this static key is accepted
	Peer      nid.ID    // expected, or learned from the first successful handshake
	known     bool
	attempts  int // give up after this many failed attempts; 0 = never
	tries     int
	untilUp   bool

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
	// UntilUp ends the dial once a link to Peer is up, whoever dialed: a
	// dial otherwise stands, and dials again whenever the link closes.
	UntilUp bool
}

// AddDial asks for a link to endpoint.
func (m *Manager) AddDial(endpoints []Endpoint, opts DialOptions, now time.Time) *Dial {
	d := &Dial{Endpoints: endpoints, Key: opts.Key, attempts: opts.Attempts, untilUp: opts.UntilUp, next: now, backoff: m.timers.HandshakeRetry}
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

// endDialsUntilUp drops the dials to peer that stand only until it is
// linked.
func (m *Manager) endDialsUntilUp(peer nid.ID) {
	for _, d := range slices.Clone(m.dials) {
		if d.untilUp && d.known && d.Peer == peer {
			m.RemoveDial(d)
		}
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

// attemptEndpoints are the endpoints the next attempt tries: direct ones
// first, then one relayed endpoint more per attempt, in their order (the
// first from the start when nothing is direct), so that a direct path
// wins when there is one and the preferred relay before the others.
func (d *Dial) attemptEndpoints() []Endpoint {
	relayed := d.tries
	if !slices.ContainsFunc(d.Endpoints, func(ep Endpoint) bool { return !ep.IsRelay() }) {
		relayed = max(relayed, 1)
	}
	var out []Endpoint
	for _, ep := range d.Endpoints {
		if !ep.IsRelay() {
			out = append(out, ep)
		} else if relayed > 0 {
			out = append(out, ep)
			relayed--
		}
	}
	return out
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
