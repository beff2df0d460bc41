// Package dht is burrow's key/value store over the Symphony ring: the
// distributed hash table the IPOP paper builds its self-configuration on
// (section 3: "a machine attempts to perform an atomic write where the DHT
// key is the namespace and requested IP address"; section 4: DHCP and the
// virtual DNS store their state in it). DHCP leases, DNS names and Warrens
// container subnets live here.
//
// # Placement
//
// A key's position is the first 16 bytes of SHA-256 of the key string,
// read as a ring ID (Position). The key lives at the successor of its
// position — the first node clockwise whose ID is ≥ the position, called
// its primary — and is copied to the primary's next r−1 successors
// (replicas; r is Config.Replicas, default 3). A node is primary for the
// arc (predecessor, self].
//
// # Operations and consistency
//
// Every operation travels to the key's primary, which runs the operations
// on one key one at a time, in arrival order:
//
//   - Get returns the live record, or NotFound.
//   - PutIfAbsent creates the record when no live one exists; otherwise it
//     answers Exists with the current value and owner. Because the primary
//     serializes, exactly one of concurrent writers wins.
//   - Put creates or overwrites; overwriting needs the caller to own it.
//   - Delete and Renew need the caller to own the record.
//
// Keys named by Config.Shared or Config.SelfCertifying take writes of
// other members too, on their terms.
//
// The owner is the node ID of the writer. Every record is a lease: it dies
// after its TTL unless its owner renews it.
//
// A write is acknowledged only once every replica the primary currently
// has (up to r−1 successors) stored it, so an acknowledged write survives
// the silent failure of fewer than r adjacent nodes. An answer read from
// the primary's copy (Get, Exists, Denied, NotFound) is likewise given only
// after the replicas confirmed they know nothing newer: a node that has
// just become primary may not yet have heard of a write its predecessor in
// that role accepted. So every operation costs one round trip from the
// primary to its replicas. Timeout means the outcome is unknown: a write
// may or may not have happened. Retries of one request are recognised: a
// PutIfAbsent by the same owner with the same value answers OK again, and
// other writes are answered from a short per-request cache.
//
// Leases are conservative: lifetimes travel as remaining durations, so a
// copy received later lives a little longer than its source, and the
// Expires a client gets is measured from the moment it sent its request.
// No node therefore frees a key before its owner believes the lease ended.
//
// # Versions and conflicts
//
// Each write carries a version (a hybrid logical clock: milliseconds
// shifted left 16 bits, bumped past anything seen) and the version it
// replaces. A replica stores a write only when it knows nothing newer than
// what the write replaces; otherwise it answers with its own copy, and the
// primary adopts that copy, re-replicates it under a fresh version and runs
// the operation again. That is how a primary that missed an acknowledged
// write (a node that just joined, or a stale view) learns it before it can
// hand the key to someone else. Copies that arrive any other way (sync,
// digest, handoff) are merged newest-version-wins, ties broken by content,
// so all copies converge.
//
// # Replicas moving with the ring
//
//   - RingChanged: when the arc a node is primary for grows (its
//     predecessor failed or left, or it just joined), it pulls the gained
//     arc from its r successors and holds operations on those keys until
//     they answered or SyncTimeout passed. A new successor gets a digest at
//     once.
//   - The pull is also a handoff: the old primary of a newcomer's arc
//     learns of the newcomer from its request, before its own view shows
//     it, and from then on sends requests for that arc to the newcomer
//     instead of serving them, so that two nodes do not act as primary
//     for one key at once. The version check above covers what remains
//     (a lost request, views that disagree for other reasons).
//   - Every RefreshInterval a primary sends each replica a digest of
//     (position, version) for its arc; the replica asks for what it lacks
//     and pushes back what it has newer.
//   - Copies a node is no longer refreshed for are dropped after
//     StaleAfter; dead records and tombstones after Grace.
//   - Leave hands the node's arc to its successor before it goes.
//
// # Driving it
//
// A Participant does no I/O, starts no goroutines and reads no clock: the
// node hands it messages (HandleMessage), time (Tick at NextDeadline) and
// ring changes (RingChanged), and it sends through Env. Callbacks run
// inside some call into the participant — possibly before the call that
// issued the operation returns — never concurrently.
package dht

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"burrow/nid"
)

// Status is the outcome of an operation.
type Status uint8

// Statuses.
const (
	OK        Status = iota // done; Value, Owner and Expires describe the record
	Exists                  // PutIfAbsent, or a write of another value to a SelfCertifying key: a live record exists; it is in Value, Owner, Expires
	NotFound                // no live record
	Denied                  // the record belongs to Owner, not to the caller
	TooLarge                // the value exceeds Config.MaxValueLen
	Full                    // the primary holds as many records as it may; from a replica at its cap, the write may still surface, as with Timeout
	Invalid                 // empty or oversize key, or a TTL that is not positive
	Timeout                 // no answer in time; a write may or may not have happened
	Busy                    // too many operations queued on the key; try again later
	Unproven                // a signature failed: on a write, not the origin's or signed over a minute ago; on an answer, not the record owner's; or a SelfCertifying value was not valid
	OverQuota               // the owner holds as many records as one member may
	conflict                // replica ack only: the replica has a copy the primary lacks
	maxStatus
)

var statusNames = [...]string{"ok", "exists", "not-found", "denied", "too-large", "full", "invalid", "timeout", "busy", "unproven", "over-quota", "conflict"}

func (s Status) String() string {
	if s >= maxStatus {
		return fmt.Sprintf("status(%d)", uint8(s))
	}
	return statusNames[s]
}

// Result is what an operation's callback receives.
type Result struct {
	Status Status
	Value  []byte
	Owner  nid.ID
	// Expires is when the record's lease ends, measured from when the
	// request was first sent, so never later than the primary's own view.
	Expires time.Time
	// At is the time of the call that delivered the answer: callers that
	// go on from the callback use it as their now.
	At time.Time
}

// Client is the key/value API the services on top of the DHT use;
// *Participant implements it, and tests may stand in for it.
type Client interface {
	Get(key string, now time.Time, cb func(Result))
	Put(key string, value []byte, ttl time.Duration, now time.Time, cb func(Result))
	PutIfAbsent(key string, value []byte, ttl time.Duration, now time.Time, cb func(Result))
	Renew(key string, ttl time.Duration, now time.Time, cb func(Result))
	Delete(key string, now time.Time, cb func(Result))
}

// Env is what the node provides to its participant.
type Env interface {
	// Self is this node's ID.
	Self() nid.ID
	// Successors returns up to n successors, closest first, without self.
	Successors(n int) []nid.ID
	// Predecessor is the closest node counter-clockwise, if known.
	Predecessor() (nid.ID, bool)
	// Send delivers payload to another node's participant. With exact it
	// goes to the node whose ID is to; otherwise it is routed greedily to
	// the closest node preceding to (or to itself), which forwards further
	// when it is not responsible. Delivery may happen during the call,
	// even back to this participant (a nested call waits for the current
	// one to finish); the payload is only valid during the call.
	Send(to nid.ID, exact bool, payload []byte)
}

// Config tunes a participant; zero fields take the defaults.
type Config struct {
	Replicas    int // r: copies of each key, primary included
	MaxKeyLen   int // bytes, at most 255
	MaxValueLen int // bytes
	// MaxRecords bounds the records a node holds when it accepts a new key
	// as primary; copies it receives as a replica may take it up to four
	// times that before it refuses them too.
	MaxRecords int
	MaxTTL     time.Duration // longer TTLs are cut to this

	RequestTimeout  time.Duration // a client gives up, answering Timeout
	RetryInterval   time.Duration // resend unanswered requests and replications
	SyncTimeout     time.Duration // stop waiting for successors to hand over a gained arc
	RefreshInterval time.Duration // primaries send digests to their replicas
	StaleAfter      time.Duration // drop copies no primary refreshed for this long
	Grace           time.Duration // keep dead records and tombstones this long
	// MaxMessageLen bounds every payload given to Env.Send.
	MaxMessageLen int
	// Auth signs this node's writes and verifies everyone's; nil takes
	// every record on trust.
	Auth Authority
	// OwnerQuota bounds the live records one owner may hold across the
	// ring; each primary enforces its share of it.
	OwnerQuota int
	// Shared, when set, names the keys any authorised member may write,
	// not only the record's owner: for such a key it reports whether the
	// member with this certificate, for this key, may. Others' writes to
	// it are denied.
	Shared func(key string, cert []byte, writer [32]byte, now time.Time) (shared, allowed bool)
	// SelfCertifying, when set, names the keys whose values prove
	// themselves, whoever writes them; nil: none do.
	SelfCertifying SelfCertifying
}

// SelfCertifying keys hold statements signed by someone other than their
// writer (the CA's revocation of a member), so that the value, not the
// writer's signature, is what every node checks. Any member may write such
// a key, and only a value Valid there: the primary refuses others, replicas
// refuse such copies and readers such answers. A live record is final: a
// write of another value is answered Exists, Delete and Renew are Denied,
// and a write of the same value renews it in the writer's name. Such
// records count against no member's quota and are not voided with their
// writer's (DropOwner): how many there are is up to whoever signs the
// values, and they say nothing of their writer.
type SelfCertifying interface {
	// Covers reports whether key holds self-certifying values. It is asked
	// of every record when counting or voiding an owner's, so it must be
	// cheap.
	Covers(key string) bool
	// Valid reports whether value may be held under key.
	Valid(key string, value []byte) bool
}

// Defaults.
const (
	DefaultReplicas        = 3
	DefaultMaxKeyLen       = 128
	DefaultMaxValueLen     = 768
	DefaultMaxRecords      = 4096
	DefaultMaxTTL          = 24 * time.Hour
	DefaultRequestTimeout  = 5 * time.Second
	DefaultRetryInterval   = time.Second
	DefaultSyncTimeout     = 2 * time.Second
	DefaultRefreshInterval = 10 * time.Second
	DefaultGrace           = time.Minute
	DefaultMaxMessageLen   = 1100
	DefaultOwnerQuota      = 1024

	// maxHops bounds how often a request is forwarded; a loop between
	// disagreeing views dies out and the client retries.
	maxHops = 32
	// maxQueued bounds operations waiting behind a key's pending write,
	// and maxDeferred those waiting for a sync.
	maxQueued   = 64
	maxDeferred = 1024
	// maxWireTTL is the longest lifetime the wire's 32-bit milliseconds hold.
	maxWireTTL = time.Duration(1<<32-1) * time.Millisecond
)

func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Replicas, DefaultReplicas)
	def(&c.MaxKeyLen, DefaultMaxKeyLen)
	def(&c.MaxValueLen, DefaultMaxValueLen)
	def(&c.MaxRecords, DefaultMaxRecords)
	def(&c.MaxMessageLen, DefaultMaxMessageLen)
	def(&c.OwnerQuota, DefaultOwnerQuota)
	defD(&c.MaxTTL, DefaultMaxTTL)
	defD(&c.RequestTimeout, DefaultRequestTimeout)
	defD(&c.RetryInterval, DefaultRetryInterval)
	defD(&c.SyncTimeout, DefaultSyncTimeout)
	defD(&c.RefreshInterval, DefaultRefreshInterval)
	defD(&c.StaleAfter, 6*c.RefreshInterval)
	defD(&c.Grace, DefaultGrace)
	switch {
	case c.MaxKeyLen > maxWireKey:
		return c, errors.New("dht: MaxKeyLen above 255")
	case c.MaxTTL > maxWireTTL:
		return c, errors.New("dht: MaxTTL above 49 days")
	case 2+recordLen(&wireRecord{Key: string(make([]byte, c.MaxKeyLen)), Value: make([]byte, c.MaxValueLen)})+8 > c.MaxMessageLen:
		return c, errors.New("dht: a record of MaxKeyLen and MaxValueLen does not fit MaxMessageLen")
	case c.StaleAfter <= c.RefreshInterval:
		return c, errors.New("dht: StaleAfter must exceed RefreshInterval")
	}
	return c, nil
}

// Position is where key lives on the ring: the first 16 bytes of its
// SHA-256.
func Position(key string) nid.ID {
	sum := sha256.Sum256([]byte(key))
	return nid.ID(sum[:nid.Size])
}

// Stats counts what a participant holds and did, for status output.
type Stats struct {
	Records       int // copies held, tombstones included
	Primary       int // of which in the arc this node is primary for
	PendingRounds int // writes and checks waiting for replicas
	ClientOps     int // own operations waiting for an answer
	Syncing       int // gained arcs still being handed over
	Conflicts     uint64
	Malformed     uint64 // messages that failed to decode
	Forged        uint64 // requests, copies and answers refused: signature failed, a request signed too long ago or older than its owner's last write, or a SelfCertifying value not valid
	Forwarded     uint64
	Operations    []OperationCount `json:",omitempty"` // this node's own finished operations
}

// OperationCount counts finished operations of one kind with one result.
type OperationCount struct {
	Op, Result string
	N          uint64
}

// Participant is one node's share of the DHT. It is not safe for
// concurrent use.
type Participant struct {
	env  Env
	cfg  Config
	self nid.ID

	records map[string]*record
	byPos   map[nid.ID]*record
	keys    map[string]*keyState // keys with a pending write or queued operations

	ops    map[uint64]*clientOp
	nextID uint64

	syncs    []*syncState
	deferred []*request

	pred     nid.ID
	hasPred  bool
	handoffs []handoff
	replicas []nid.ID // the successors last used as replicas

	answers   map[answerKey]*answer // recent write answers, for retries
	answerLog []answerKey           // answers in the order they expire

	nextRefresh time.Time
	nextSweep   time.Time

	// work and done make every entry point re-entrancy safe: a call made
	// from inside another (through Env.Send or a callback) is queued and
	// run by the outermost one.
	work   []func()
	done   []func()
	inside bool

	buf       []byte
	authBuf   []byte
	lastStamp uint64 // the last proof's stamp, so that each is newer
	// checked remembers signatures verified lately, by a hash of what they
	// sign and themselves; checkedLog holds them oldest first.
	checked    map[[32]byte]bool
	checkedLog [][32]byte
	stats      Stats
	finished   [maxOp][maxStatus]uint64 // own operations by kind and result
}

// New creates the participant of the node env describes. now seeds request
// IDs so that a restarted node does not reuse recent ones. It starts as if
// alone: call RingChanged as soon as the node has neighbours, which makes
// it pull its arc from its successors.
func New(env Env, cfg Config, now time.Time) (*Participant, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Participant{
		env:     env,
		cfg:     cfg,
		self:    env.Self(),
		records: make(map[string]*record),
		byPos:   make(map[nid.ID]*record),
		keys:    make(map[string]*keyState),
		ops:     make(map[uint64]*clientOp),
		nextID:  uint64(now.UnixNano()),
		answers: make(map[answerKey]*answer),
		checked: make(map[[32]byte]bool),
	}
	p.nextRefresh = now.Add(cfg.RefreshInterval)
	p.nextSweep = now
	return p, nil
}

// run executes f now, or after the call in progress when called from
// inside one, then delivers the callbacks that became due.
func (p *Participant) run(f func()) {
	p.work = append(p.work, f)
	if p.inside {
		return
	}
	p.inside = true
	defer func() { p.inside = false }()
	for len(p.work) > 0 || len(p.done) > 0 {
		if len(p.work) > 0 {
			w := p.work[0]
			p.work[0] = nil
			p.work = p.work[1:]
			w()
			continue
		}
		d := p.done[0]
		p.done[0] = nil
		p.done = p.done[1:]
		d()
	}
	p.work, p.done = p.work[:0], p.done[:0]
}

// HandleMessage processes a DHT message the node received from another
// node's participant.
func (p *Participant) HandleMessage(from nid.ID, payload []byte, now time.Time) {
	m, err := parseMessage(payload)
	if err != nil {
		p.stats.Malformed++
		return
	}
	p.run(func() { p.handle(from, &m, now) })
}

// Tick runs timeouts, retries, expiry and replica maintenance due by now.
func (p *Participant) Tick(now time.Time) { p.run(func() { p.tick(now) }) }

// RingChanged tells the participant that the successors or the
// predecessor changed.
func (p *Participant) RingChanged(now time.Time) { p.run(func() { p.ringChanged(now) }) }

// Leave hands the records this node is primary for to its successor; call
// it before a graceful departure, then drop the participant.
func (p *Participant) Leave(now time.Time) { p.run(func() { p.leave(now) }) }

// Get reads key.
func (p *Participant) Get(key string, now time.Time, cb func(Result)) {
	p.start(opGet, key, nil, 0, now, cb)
}

// Put writes key, creating it or overwriting it if the caller owns it.
func (p *Participant) Put(key string, value []byte, ttl time.Duration, now time.Time, cb func(Result)) {
	p.start(opPut, key, value, ttl, now, cb)
}

// PutIfAbsent creates key unless a live record exists (answering Exists
// with it). Of concurrent callers exactly one gets OK.
func (p *Participant) PutIfAbsent(key string, value []byte, ttl time.Duration, now time.Time, cb func(Result)) {
	p.start(opPutIfAbsent, key, value, ttl, now, cb)
}

// Delete removes key; only its owner may.
func (p *Participant) Delete(key string, now time.Time, cb func(Result)) {
	p.start(opDelete, key, nil, 0, now, cb)
}

// Renew extends key's lease to ttl from now; only its owner may. With an
// Authority the owner signs the record again, value included, so Renew
// reads the record first.
func (p *Participant) Renew(key string, ttl time.Duration, now time.Time, cb func(Result)) {
	if p.cfg.Auth == nil || p.checkRequest(opRenew, key, nil, ttl) != OK {
		p.start(opRenew, key, nil, ttl, now, cb)
		return
	}
	p.start(opGet, key, nil, 0, now, func(res Result) {
		switch {
		case res.Status == OK && res.Owner != p.self:
			res = Result{Status: Denied, Owner: res.Owner, At: res.At}
		case res.Status == OK:
			p.start(opRenew, key, res.Value, ttl, res.At, cb)
			return
		}
		p.finished[opRenew][res.Status]++
		if cb != nil {
			cb(res)
		}
	})
}

// Stats reports counters and sizes.
func (p *Participant) Stats() Stats {
	s := p.stats
	s.Records = len(p.records)
	for _, r := range p.records {
		if p.isPrimary(r.pos) {
			s.Primary++
		}
	}
	for _, ks := range p.keys {
		if ks.round != nil {
			s.PendingRounds++
		}
	}
	s.ClientOps = len(p.ops)
	s.Syncing = len(p.syncs)
	for o := opGet; o < maxOp; o++ {
		for st := OK; st < maxStatus; st++ {
			if n := p.finished[o][st]; n > 0 {
				s.Operations = append(s.Operations, OperationCount{opNames[o], st.String(), n})
			}
		}
	}
	return s
}

// NextDeadline is when Tick should next run; the zero time when nothing is
// scheduled.
func (p *Participant) NextDeadline(now time.Time) time.Time {
	var next time.Time
	at := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	at(p.nextRefresh)
	if len(p.records) > 0 || len(p.answers) > 0 {
		at(p.nextSweep)
	}
	for _, o := range p.ops {
		at(o.nextRetry)
		at(o.deadline)
	}
	for _, ks := range p.keys {
		if rd := ks.round; rd != nil {
			at(rd.nextRetry)
			at(rd.deadline)
		}
	}
	for _, s := range p.syncs {
		at(s.nextRetry)
		at(s.deadline)
	}
	if next.IsZero() {
		return next
	}
	if next.Before(now) {
		return now
	}
	return next
}

func (p *Participant) handle(from nid.ID, m *message, now time.Time) {
	switch m.Type {
	case msgRequest:
		p.handleRequest(requestFromMessage(m, now), now)
	case msgResponse:
		p.handleResponse(m, now)
	case msgReplicate:
		p.handleReplicate(from, m, now)
	case msgReplicaAck:
		p.handleReplicaAck(from, m, now)
	case msgSyncRequest:
		p.handleSyncRequest(from, m, now)
	case msgRecords:
		p.handleRecords(from, m, now)
	case msgDigest:
		p.handleDigest(from, m, now)
	case msgWant:
		p.handleWant(from, m, now)
	case msgCheck:
		p.handleCheck(from, m, now)
	}
}

// send encodes m and hands it to the node.
func (p *Participant) send(to nid.ID, exact bool, m *message) {
	p.buf = m.append(p.buf[:0])
	p.env.Send(to, exact, p.buf)
}

// isPrimary reports whether pos is in (predecessor, self]. Without a
// predecessor a node is primary for everything only while it is alone.
func (p *Participant) isPrimary(pos nid.ID) bool {
	if pos == p.self {
		return true
	}
	if _, gone := p.handedOff(pos); gone {
		return false
	}
	if !p.hasPred {
		return len(p.env.Successors(1)) == 0
	}
	return nid.InOpen(pos, p.pred, p.self)
}

// handoff is part of this node's arc that a newly joined predecessor took
// over by asking for it, before this node's view shows the newcomer.
type handoff struct {
	from, to nid.ID // the arc (from, to]; to is the newcomer
	until    time.Time
}

// handedOff returns the newcomer now responsible for pos, if any.
func (p *Participant) handedOff(pos nid.ID) (nid.ID, bool) {
	for _, h := range p.handoffs {
		if pos == h.to || nid.InOpen(pos, h.from, h.to) {
			return h.to, true
		}
	}
	return nid.ID{}, false
}

// clientOp is an operation this node started and waits on.
type clientOp struct {
	msg       message
	pos       nid.ID
	start     time.Time
	deadline  time.Time
	nextRetry time.Time
	cb        func(Result)
}

func (p *Participant) start(o op, key string, value []byte, ttl time.Duration, now time.Time, cb func(Result)) {
	if cb == nil {
		cb = func(Result) {}
	}
	p.run(func() {
		refuse := func(st Status) {
			p.finished[o][st]++
			p.done = append(p.done, func() { cb(Result{Status: st, At: now}) })
		}
		if st := p.checkRequest(o, key, value, ttl); st != OK {
			refuse(st)
			return
		}
		ttl = min(ttl, p.cfg.MaxTTL)
		p.nextID++
		c := &clientOp{
			msg: message{
				Type: msgRequest, ID: p.nextID, Origin: p.self, Op: o, Hops: maxHops,
				TTL: uint32(ttl / time.Millisecond), Key: key, Value: append([]byte(nil), value...),
			},
			pos:       Position(key),
			start:     now,
			deadline:  now.Add(p.cfg.RequestTimeout),
			nextRetry: now.Add(p.cfg.RetryInterval),
			cb:        cb,
		}
		if p.cfg.Auth != nil && o != opGet {
			c.msg.Proof = p.sign(key, o == opDelete, value, ttl, now)
			c.msg.Cert = p.cfg.Auth.Certificate()
			if len(c.msg.append(nil)) > p.cfg.MaxMessageLen {
				refuse(TooLarge) // the certificate leaves too little room for the value
				return
			}
		}
		p.ops[c.msg.ID] = c
		p.issue(c, now)
	})
}

// checkRequest applies the limits a request must meet wherever it is seen.
func (p *Participant) checkRequest(o op, key string, value []byte, ttl time.Duration) Status {
	switch {
	case len(key) == 0 || len(key) > p.cfg.MaxKeyLen:
		return Invalid
	case len(value) > p.cfg.MaxValueLen:
		return TooLarge
	case (o == opPut || o == opPutIfAbsent || o == opRenew) && ttl < time.Millisecond:
		return Invalid
	}
	return OK
}

// issue sends a client operation toward its primary, or runs it here.
func (p *Participant) issue(c *clientOp, now time.Time) {
	if p.isPrimary(c.pos) {
		m := c.msg
		p.handleRequest(requestFromMessage(&m, now), now)
		return
	}
	p.route(c.pos, &c.msg)
}

// route sends a request on toward pos's primary: to the successor when pos
// falls between self and it, otherwise greedily through the overlay.
func (p *Participant) route(pos nid.ID, m *message) {
	if to, ok := p.handedOff(pos); ok {
		p.send(to, true, m)
		return
	}
	if succ := p.env.Successors(1); len(succ) > 0 && (pos == succ[0] || nid.InOpen(pos, p.self, succ[0])) {
		p.send(succ[0], true, m)
		return
	}
	p.send(pos, false, m)
}

func (p *Participant) handleResponse(m *message, now time.Time) {
	c := p.ops[m.ID]
	if c == nil {
		return // answered already, or timed out
	}
	st := m.Status
	if (st == OK || st == Exists) && !p.verified(c.msg.Key, c.msg.Op == opDelete, m.Value, m.Owner, m.Proof) {
		st = Unproven // an answer its owner did not sign: some node on the way made it up
	}
	p.finish(c, st, m.Value, m.Owner, m.Remaining, now)
}

// finish completes a client operation.
func (p *Participant) finish(c *clientOp, st Status, value []byte, owner nid.ID, remaining uint32, now time.Time) {
	delete(p.ops, c.msg.ID)
	p.finished[c.msg.Op][st]++
	res := Result{Status: st, Value: value, Owner: owner, At: now}
	if remaining > 0 {
		res.Expires = c.start.Add(time.Duration(remaining) * time.Millisecond)
	}
	cb := c.cb
	p.done = append(p.done, func() { cb(res) })
}

func (p *Participant) tickClients(now time.Time) {
	for _, id := range sortedOpIDs(p.ops) {
		c := p.ops[id]
		switch {
		case !now.Before(c.deadline):
			p.finish(c, Timeout, nil, nid.ID{}, 0, now)
		case !now.Before(c.nextRetry):
			c.nextRetry = now.Add(p.cfg.RetryInterval)
			p.issue(c, now)
		}
	}
}
