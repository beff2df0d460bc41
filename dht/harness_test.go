package dht

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"time"

	"burrow/identity"
	"burrow/nid"
	"burrow/overlay"
	"burrow/xeddsa"
)

// simRing is an in-memory ring of participants on virtual time. Each node
// has its own view of the membership, which learns of joins, leaves and
// failures after a random lag, so that neighbours disagree for a while as
// they do on a real overlay. Each node knows s successors and its
// predecessor from its view; routed messages hop greedily over those, and
// a message reaching a dead node is lost. Everything random comes from one
// seed.
// fataler is what the ring needs of a *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

type simRing struct {
	t      fataler
	rng    *rand.Rand
	now    time.Time
	events eventQueue
	seq    uint64
	nodes  map[nid.ID]*simNode
	order  []nid.ID // every node ever created, for deterministic iteration
	cfg    Config

	succs       int           // successors each node knows
	minDelay    time.Duration // per hop
	maxDelay    time.Duration
	detectDelay time.Duration // until neighbours notice a silent failure
	viewLag     time.Duration // spread of when each node learns a change
	joinLag     time.Duration // extra delay before the others learn of a join
	loss        float64       // chance that a message is lost on the way

	delivered, lost int

	// unsigned runs the participants without an Authority; otherwise each
	// node signs with its own key and revoked voids an owner's records.
	unsigned bool
	trust    *identity.Trust
	keys     map[nid.ID]identity.NodeKey
	certs    map[nid.ID][]byte
	revoked  map[nid.ID]bool
	// tamper, when set, sees every message sent and returns what arrives
	// (nil: lost), as a member on the path could.
	tamper func(from nid.ID, m *message) *message
}

type simNode struct {
	ring   *simRing
	id     nid.ID
	p      *Participant
	alive  bool
	view   []nid.ID // sorted members this node believes in, self included
	tickAt time.Time
}

type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newSimRing(t fataler, seed uint64, cfg Config) *simRing {
	return &simRing{
		t:           t,
		rng:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		now:         simEpoch,
		nodes:       make(map[nid.ID]*simNode),
		keys:        make(map[nid.ID]identity.NodeKey),
		certs:       make(map[nid.ID][]byte),
		revoked:     make(map[nid.ID]bool),
		cfg:         cfg,
		succs:       4,
		minDelay:    time.Millisecond,
		maxDelay:    15 * time.Millisecond,
		detectDelay: 300 * time.Millisecond,
		viewLag:     150 * time.Millisecond,
	}
}

// at schedules fn at time t.
func (r *simRing) at(t time.Time, fn func()) {
	r.seq++
	heap.Push(&r.events, &event{at: t, seq: r.seq, fn: fn})
}

// runUntil processes events up to and including time t.
func (r *simRing) runUntil(t time.Time) {
	for len(r.events) > 0 && !r.events[0].at.After(t) {
		e := heap.Pop(&r.events).(*event)
		r.now = e.at
		e.fn()
	}
	r.now = t
}

func (r *simRing) run(d time.Duration) { r.runUntil(r.now.Add(d)) }

// randomID draws a new node: a key pair and the ID it derives, or, for an
// unsigned ring, just an ID.
func (r *simRing) randomID() nid.ID {
	for {
		id := nid.FromUint128(r.rng.Uint64(), r.rng.Uint64())
		if !r.unsigned {
			var seed [32]byte
			copy(seed[:], id[:])
			key, err := identity.GenerateNodeKey(rand.NewChaCha8(seed))
			if err != nil {
				r.t.Fatal(err)
			}
			id = key.ID()
			r.keys[id] = key
			r.certs[id] = r.certify(key.Public)
		}
		if _, taken := r.nodes[id]; !taken && id != (nid.ID{}) {
			return id
		}
	}
}

// signedElsewhere is a live record copy, signed by a member that is not on
// the ring, as a copy of a write the ring never saw would arrive.
func (r *simRing) signedElsewhere(key, value string, version uint64) (*wireRecord, nid.ID) {
	owner, err := identity.GenerateNodeKey(rand.NewChaCha8([32]byte{0xaa}))
	if err != nil {
		r.t.Fatal(err)
	}
	w := &wireRecord{Key: key, Owner: owner.ID(), Version: version, Remaining: 60000, Value: []byte(value)}
	w.Proof = &proof{Key: owner.Public, Stamp: uint64(r.now.UnixMilli()), Until: uint32(r.now.Add(time.Hour).Unix())}
	w.Proof.Sig = xeddsa.Sign(owner.Private, signedContent(nil, key, false, w.Value, w.Proof), [64]byte{})
	return w, owner.ID()
}

// certify issues a certificate for public from the ring's CA, made on
// first use.
func (r *simRing) certify(public [32]byte) []byte {
	if r.trust == nil {
		ca, err := identity.NewCA("dht-test", rand.NewChaCha8([32]byte{0xca}))
		if err != nil {
			r.t.Fatal(err)
		}
		if r.trust, err = identity.NewTrust(ca); err != nil {
			r.t.Fatal(err)
		}
	}
	c, err := identity.SignCertificate(r.trust.CAs[0], identity.Certificate{Name: "n" + nid.FromPublicKey(public).Short(), PublicKey: public,
		NotBefore: simEpoch.Add(-time.Hour), NotAfter: simEpoch.Add(365 * 24 * time.Hour)})
	if err != nil {
		r.t.Fatal(err)
	}
	return c.Marshal()
}

// testAuthority signs with a node's key and honours the ring's CA and
// revocations.
type testAuthority struct {
	key  identity.NodeKey
	cert []byte
	ring *simRing
}

func (a *testAuthority) PublicKey() [32]byte { return a.key.Public }

func (a *testAuthority) Certificate() []byte { return a.cert }

func (a *testAuthority) Member(cert []byte, key [32]byte, now time.Time) bool {
	_, err := a.ring.trust.VerifyPeer(cert, key, now)
	return err == nil && !a.ring.revoked[nid.FromPublicKey(key)]
}

func (a *testAuthority) Sign(msg []byte) [SignatureSize]byte {
	return xeddsa.Sign(a.key.Private, msg, [64]byte{})
}

func (a *testAuthority) Verify(key [32]byte, msg []byte, sig [SignatureSize]byte) bool {
	return !a.ring.revoked[nid.FromPublicKey(key)] && xeddsa.Verify(key, msg, sig)
}

// members is the true membership: every live node.
func (r *simRing) members() []nid.ID {
	var out []nid.ID
	for _, id := range r.order {
		if r.nodes[id].alive {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, nid.ID.Compare)
	return out
}

func (r *simRing) live() []*simNode {
	var out []*simNode
	for _, id := range r.members() {
		out = append(out, r.nodes[id])
	}
	return out
}

// addNode creates a node that knows the true membership at once; the others
// learn of it after a lag. The first nodes of a ring are added with
// instant=true so that the ring starts consistent.
func (r *simRing) addNode(id nid.ID, instant bool) *simNode {
	n := &simNode{ring: r, id: id, alive: true}
	n.view = append(r.members(), id)
	slices.SortFunc(n.view, nid.ID.Compare)
	r.nodes[id] = n
	r.order = append(r.order, id)
	cfg := r.cfg
	if key, ok := r.keys[id]; ok {
		cfg.Auth = &testAuthority{key: key, cert: r.certs[id], ring: r}
	}
	p, err := New(n, cfg, r.now)
	if err != nil {
		r.t.Fatal(err)
	}
	n.p = p
	for _, other := range r.live() {
		if other == n {
			continue
		}
		if instant {
			other.learn(id, true)
		} else {
			o := other
			r.at(r.now.Add(r.joinLag+r.lag()), func() { o.learn(id, true) })
		}
	}
	n.call(func() { p.RingChanged(r.now) })
	return n
}

func (r *simRing) lag() time.Duration {
	return time.Duration(r.rng.Int64N(int64(r.viewLag) + 1))
}

// fail stops a node silently; the others notice after detectDelay plus lag.
func (r *simRing) fail(n *simNode) {
	n.alive = false
	for _, other := range r.live() {
		o := other
		r.at(r.now.Add(r.detectDelay+r.lag()), func() { o.learn(n.id, false) })
	}
}

// leave departs gracefully: a handoff, then an announcement the others
// hear after a lag.
func (r *simRing) leave(n *simNode) {
	n.call(func() { n.p.Leave(r.now) })
	n.alive = false
	for _, other := range r.live() {
		o := other
		r.at(r.now.Add(r.lag()), func() { o.learn(n.id, false) })
	}
}

// learn adds or removes id from n's view and tells the participant when
// its neighbourhood changed.
func (n *simNode) learn(id nid.ID, present bool) {
	if !n.alive || present && !n.ring.nodes[id].alive {
		return // news of a join that arrives after the node already left
	}
	beforeSucc, beforePred := n.Successors(n.ring.succs), n.pred()
	i, found := slices.BinarySearchFunc(n.view, id, nid.ID.Compare)
	switch {
	case present && !found:
		n.view = slices.Insert(n.view, i, id)
	case !present && found:
		n.view = slices.Delete(n.view, i, i+1)
	default:
		return
	}
	if !slices.Equal(beforeSucc, n.Successors(n.ring.succs)) || beforePred != n.pred() {
		n.call(func() { n.p.RingChanged(n.ring.now) })
	}
}

// call runs f on a live node and schedules its next tick.
func (n *simNode) call(f func()) {
	if !n.alive {
		return
	}
	f()
	n.reschedule()
}

func (n *simNode) reschedule() {
	r := n.ring
	d := n.p.NextDeadline(r.now)
	if d.IsZero() || (!n.tickAt.IsZero() && !d.Before(n.tickAt)) {
		return
	}
	n.tickAt = d
	r.at(d, func() {
		if !n.tickAt.Equal(d) {
			return // superseded by an earlier tick
		}
		n.tickAt = time.Time{}
		n.call(func() { n.p.Tick(r.now) })
	})
}

// Env.

func (n *simNode) Self() nid.ID { return n.id }

func (n *simNode) Successors(k int) []nid.ID {
	k = min(k, n.ring.succs, len(n.view)-1)
	if k <= 0 {
		return nil
	}
	i, _ := slices.BinarySearchFunc(n.view, n.id, nid.ID.Compare)
	out := make([]nid.ID, 0, k)
	for j := 1; j <= k; j++ {
		out = append(out, n.view[(i+j)%len(n.view)])
	}
	return out
}

func (n *simNode) pred() nid.ID {
	if len(n.view) < 2 {
		return nid.ID{}
	}
	i, _ := slices.BinarySearchFunc(n.view, n.id, nid.ID.Compare)
	return n.view[(i+len(n.view)-1)%len(n.view)]
}

func (n *simNode) Predecessor() (nid.ID, bool) {
	p := n.pred()
	return p, p != (nid.ID{})
}

func (n *simNode) Send(to nid.ID, exact bool, payload []byte) {
	r := n.ring
	msg := slices.Clone(payload)
	delay := r.hopDelay()
	dest := to
	if !exact {
		var ok bool
		dest, ok = r.routeFrom(n, to, &delay)
		if !ok {
			r.lost++
			return
		}
	}
	from := n.id
	if r.rng.Float64() < r.loss {
		r.lost++
		return
	}
	if r.tamper != nil {
		m, err := parseMessage(msg)
		if err != nil {
			r.t.Fatal(err)
		}
		changed := r.tamper(from, &m)
		if changed == nil {
			r.lost++
			return
		}
		msg = changed.append(nil)
	}
	r.at(r.now.Add(delay), func() {
		d := r.nodes[dest]
		if d == nil || !d.alive {
			r.lost++
			return
		}
		r.delivered++
		d.call(func() { d.p.HandleMessage(from, msg, r.now) })
	})
}

func (r *simRing) hopDelay() time.Duration {
	return r.minDelay + time.Duration(r.rng.Int64N(int64(r.maxDelay-r.minDelay)+1))
}

// routeFrom walks greedy hops from n toward key over each hop's own view,
// adding a delay per hop; a hop onto a dead node loses the message.
func (r *simRing) routeFrom(n *simNode, key nid.ID, delay *time.Duration) (nid.ID, bool) {
	cur := n
	for range 256 {
		cands := cur.Successors(r.succs)
		if p, ok := cur.Predecessor(); ok {
			cands = append(cands, p)
		}
		next := overlay.NextHop(cur.id, cands, key)
		if next == cur.id {
			return cur.id, true
		}
		nn := r.nodes[next]
		if nn == nil || !nn.alive {
			return nid.ID{}, false
		}
		*delay += r.hopDelay()
		cur = nn
	}
	return nid.ID{}, false
}

// responsibleSet is the truth: the first r live nodes at or after pos.
func (r *simRing) responsibleSet(pos nid.ID, replicas int) []nid.ID {
	m := r.members()
	i, _ := slices.BinarySearchFunc(m, pos, nid.ID.Compare)
	var out []nid.ID
	for j := 0; j < min(replicas, len(m)); j++ {
		out = append(out, m[(i+j)%len(m)])
	}
	return out
}

// do runs an operation on n and returns a pointer the result lands in.
type outcome struct {
	done bool
	res  Result
	at   time.Time
}

func (n *simNode) op(f func(p *Participant, now time.Time, cb func(Result))) *outcome {
	o := &outcome{}
	n.call(func() {
		f(n.p, n.ring.now, func(res Result) { o.done, o.res, o.at = true, res, n.ring.now })
	})
	return o
}
