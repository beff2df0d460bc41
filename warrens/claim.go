package warrens

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"burrow/dht"
	"burrow/nid"
)

// Key is the DHT key that claims subnet p.
func Key(p netip.Prefix) string { return "subnet:" + p.String() }

// State is where a claim stands.
type State uint8

// States.
const (
	Claiming  State = iota // a candidate is being written
	Claimed                // the subnet is ours; its lease is renewed
	Exhausted              // every candidate up to MaxAttempts was taken
)

func (s State) String() string {
	return [...]string{"claiming", "claimed", "exhausted"}[s]
}

// Collision is a candidate subnet found held by another node.
type Collision struct {
	Prefix netip.Prefix
	Holder nid.ID
}

// Status reports a claim, for status output.
type Status struct {
	Family     Family
	State      State
	Prefix     netip.Prefix // claimed, or being tried
	Attempt    int          // counter appended to the machine id; 0 for none
	Expires    time.Time    // of the lease, when claimed
	Collisions []Collision
}

// ClaimConfig configures a Claimer; zero durations take defaults.
type ClaimConfig struct {
	MachineID   string
	Family      Family
	TTL         time.Duration // lease of the claim, renewed at a third
	Retry       time.Duration // after a DHT timeout
	MaxAttempts int           // candidates tried before giving up
}

// Defaults.
const (
	DefaultTTL         = 10 * time.Minute
	DefaultRetry       = 5 * time.Second
	DefaultMaxAttempts = 64
)

// Claimer claims one subnet in the DHT and keeps it. It is driven like the
// rest of the core: Start, then Tick at NextDeadline; answers from the KV
// arrive through its callbacks. onChange, if set, is called whenever the
// state or the prefix changes — the node then (re)configures its bridge.
type Claimer struct {
	cfg      ClaimConfig
	kv       dht.Client
	self     nid.ID
	log      *slog.Logger
	onChange func(Status)

	st       Status
	inFlight bool
	next     time.Time // when to write or renew next; zero while waiting for the KV
	now      time.Time // latest time seen, for scheduling
}

// NewClaimer creates a claimer for this node.
func NewClaimer(cfg ClaimConfig, kv dht.Client, self nid.ID, log *slog.Logger, onChange func(Status)) (*Claimer, error) {
	if cfg.MachineID == "" {
		return nil, errors.New("warrens: machine id required")
	}
	if cfg.Family != IPv4 && cfg.Family != IPv6 {
		return nil, errors.New("warrens: family must be IPv4 or IPv6")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Claimer{cfg: cfg, kv: kv, self: self, log: log, onChange: onChange}
	c.st.Family = cfg.Family
	c.st.Prefix = c.candidate()
	return c, nil
}

func (c *Claimer) candidate() netip.Prefix {
	return Subnet(c.cfg.Family, NodeHash(Candidate(c.cfg.MachineID, c.st.Attempt)))
}

// Status reports the claim.
func (c *Claimer) Status() Status {
	s := c.st
	s.Collisions = append([]Collision(nil), c.st.Collisions...)
	return s
}

// Start writes the first candidate.
func (c *Claimer) Start(now time.Time) {
	c.now = now
	c.claim(now)
}

// NextDeadline is when Tick should run next; zero when nothing is due.
func (c *Claimer) NextDeadline() time.Time { return c.next }

// Tick renews the lease or retries a claim when due.
func (c *Claimer) Tick(now time.Time) {
	c.now = later(c.now, now)
	if c.inFlight || c.next.IsZero() || now.Before(c.next) {
		return
	}
	if c.st.State == Claimed {
		c.renew(now)
		return
	}
	c.claim(now)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (c *Claimer) claim(now time.Time) {
	prefix := c.st.Prefix
	c.inFlight, c.next = true, time.Time{}
	c.kv.PutIfAbsent(Key(prefix), []byte(c.self.String()), c.cfg.TTL, now, func(res dht.Result) {
		c.inFlight, c.now = false, later(c.now, res.At)
		// A retry or a restart finds our own record: the DHT answers OK
		// to the same owner writing the same value.
		switch res.Status {
		case dht.OK:
			c.claimed(res.Expires)
		case dht.Exists:
			c.collided(prefix, res.Owner)
		default:
			c.log.Warn("warrens: claiming subnet failed; retrying", "prefix", prefix, "status", res.Status)
			c.next = c.now.Add(c.cfg.Retry)
		}
	})
}

func (c *Claimer) renew(now time.Time) {
	prefix := c.st.Prefix
	c.inFlight, c.next = true, time.Time{}
	c.kv.Renew(Key(prefix), c.cfg.TTL, now, func(res dht.Result) {
		c.inFlight, c.now = false, later(c.now, res.At)
		switch res.Status {
		case dht.OK:
			c.st.Expires = res.Expires
			c.next = c.renewAt()
		case dht.NotFound:
			// The lease lapsed; the subnet may still be free.
			c.log.Warn("warrens: subnet lease lapsed; claiming it again", "prefix", prefix)
			c.setState(Claiming)
			c.next = c.now
		case dht.Denied:
			c.log.Error("warrens: subnet taken over by another node after our lease lapsed", "prefix", prefix, "holder", res.Owner)
			c.collided(prefix, res.Owner)
		default:
			c.next = c.now.Add(c.cfg.Retry)
			if !c.st.Expires.IsZero() && c.next.After(c.st.Expires) {
				c.next = c.now
			}
		}
	})
}

func (c *Claimer) claimed(expires time.Time) {
	c.st.Expires = expires
	c.next = c.renewAt()
	c.log.Info("warrens: subnet claimed", "prefix", c.st.Prefix, "attempt", c.st.Attempt)
	c.setState(Claimed)
}

// renewAt is a third of the way into the lease.
func (c *Claimer) renewAt() time.Time {
	return c.st.Expires.Add(-c.cfg.TTL * 2 / 3)
}

// collided records that prefix belongs to holder and moves to the next
// candidate.
func (c *Claimer) collided(prefix netip.Prefix, h nid.ID) {
	c.st.Collisions = append(c.st.Collisions, Collision{Prefix: prefix, Holder: h})
	c.st.Expires = time.Time{}
	if c.st.Attempt+1 >= c.cfg.MaxAttempts {
		c.log.Error("warrens: every candidate subnet is taken", "family", c.cfg.Family, "attempts", c.cfg.MaxAttempts)
		c.next = time.Time{}
		c.setState(Exhausted)
		return
	}
	c.st.Attempt++
	c.st.Prefix = c.candidate()
	c.log.Warn("warrens: subnet collision; trying the next candidate", "taken", prefix, "holder", h, "next", c.st.Prefix, "attempt", c.st.Attempt)
	c.st.State = Claiming
	c.notify()
	c.claim(c.now)
}

func (c *Claimer) setState(s State) {
	if c.st.State == s {
		return
	}
	c.st.State = s
	c.notify()
}

func (c *Claimer) notify() {
	if c.onChange != nil {
		c.onChange(c.Status())
	}
}
