// Package dhttest is an in-memory stand-in for the burrow DHT with the
// same client API as dht.Participant, for testing what is built on it
// (DHCP leases, DNS names, subnet claims) without a ring.
//
// One Store is shared by many Clients, each with its own node ID as owner.
// Operations are not answered during the call: each is applied atomically
// and answered when Advance reaches a time drawn at random (from a seed)
// within MaxDelay of its issue, so concurrent callers interleave in many
// orders. The owner, lease and size rules are the DHT's.
package dhttest

import (
	"bytes"
	"container/heap"
	"math/rand/v2"
	"sort"
	"time"

	"burrow/dht"
	"burrow/nid"
)

// Store holds the records and the operations in flight.
type Store struct {
	// MaxDelay bounds how long an operation takes; zero answers at the
	// next Advance.
	MaxDelay time.Duration
	// LoseAnswers is the chance that an operation is applied but answered
	// Timeout, as when the DHT's answer is lost.
	LoseAnswers float64
	// MaxValueLen refuses larger values with TooLarge; zero means the
	// DHT's default.
	MaxValueLen int

	rng     *rand.Rand
	now     time.Time
	records map[string]*record
	queue   opQueue
	seq     uint64
}

type record struct {
	value   []byte
	owner   nid.ID
	expires time.Time
}

type op struct {
	at    time.Time
	seq   uint64
	apply func() dht.Result
	cb    func(dht.Result)
}

type opQueue []*op

func (q opQueue) Len() int { return len(q) }
func (q opQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q opQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *opQueue) Push(x any)   { *q = append(*q, x.(*op)) }
func (q *opQueue) Pop() any {
	old := *q
	o := old[len(old)-1]
	*q = old[:len(old)-1]
	return o
}

// NewStore makes an empty store whose interleavings come from seed.
func NewStore(seed uint64) *Store {
	return &Store{rng: rand.New(rand.NewPCG(seed, 1)), records: make(map[string]*record)}
}

// Advance applies and answers every operation due by now, in time order.
// Callbacks may issue more operations; those due by now run too.
func (s *Store) Advance(now time.Time) {
	if now.After(s.now) {
		s.now = now
	}
	for len(s.queue) > 0 && !s.queue[0].at.After(s.now) {
		o := heap.Pop(&s.queue).(*op)
		res := o.apply()
		if s.LoseAnswers > 0 && s.rng.Float64() < s.LoseAnswers {
			res = dht.Result{Status: dht.Timeout}
		}
		res.At = o.at
		o.cb(res)
	}
}

// Pending is the number of operations not answered yet.
func (s *Store) Pending() int { return len(s.queue) }

// NextDue is when the next operation is answered; zero when none is
// pending.
func (s *Store) NextDue() time.Time {
	if len(s.queue) == 0 {
		return time.Time{}
	}
	return s.queue[0].at
}

// Keys lists the keys with a live record at now, sorted.
func (s *Store) Keys(now time.Time) []string {
	var keys []string
	for k, r := range s.records {
		if now.Before(r.expires) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Lookup returns the live record of key at now.
func (s *Store) Lookup(key string, now time.Time) (value []byte, owner nid.ID, ok bool) {
	r := s.records[key]
	if r == nil || !now.Before(r.expires) {
		return nil, nid.ID{}, false
	}
	return bytes.Clone(r.value), r.owner, true
}

// Set writes a record directly, as if owner had put it at now.
func (s *Store) Set(key string, value []byte, owner nid.ID, ttl time.Duration, now time.Time) {
	s.records[key] = &record{value: bytes.Clone(value), owner: owner, expires: now.Add(ttl)}
}

// Client is one node's handle on the store; it implements the DHT client
// API with its ID as owner.
type Client struct {
	s  *Store
	id nid.ID
}

// Client returns the handle of node id.
func (s *Store) Client(id nid.ID) *Client { return &Client{s: s, id: id} }

func (c *Client) enqueue(now time.Time, cb func(dht.Result), apply func(at time.Time) dht.Result) {
	s := c.s
	at := now
	if s.MaxDelay > 0 {
		at = now.Add(time.Duration(s.rng.Int64N(int64(s.MaxDelay) + 1)))
	}
	s.seq++
	heap.Push(&s.queue, &op{at: at, seq: s.seq, cb: cb, apply: func() dht.Result { return apply(at) }})
}

func (c *Client) live(key string, at time.Time) *record {
	r := c.s.records[key]
	if r == nil || !at.Before(r.expires) {
		return nil
	}
	return r
}

func (c *Client) tooLarge(value []byte) bool {
	limit := c.s.MaxValueLen
	if limit == 0 {
		limit = dht.DefaultMaxValueLen
	}
	return len(value) > limit
}

func found(r *record, st dht.Status) dht.Result {
	return dht.Result{Status: st, Value: bytes.Clone(r.value), Owner: r.owner, Expires: r.expires}
}

// Get reads key.
func (c *Client) Get(key string, now time.Time, cb func(dht.Result)) {
	c.enqueue(now, cb, func(at time.Time) dht.Result {
		if r := c.live(key, at); r != nil {
			return found(r, dht.OK)
		}
		return dht.Result{Status: dht.NotFound}
	})
}

// Put creates or, for its owner, overwrites key.
func (c *Client) Put(key string, value []byte, ttl time.Duration, now time.Time, cb func(dht.Result)) {
	value = bytes.Clone(value)
	c.enqueue(now, cb, func(at time.Time) dht.Result {
		if c.tooLarge(value) {
			return dht.Result{Status: dht.TooLarge}
		}
		if r := c.live(key, at); r != nil && r.owner != c.id {
			return dht.Result{Status: dht.Denied, Owner: r.owner}
		}
		r := &record{value: value, owner: c.id, expires: at.Add(ttl)}
		c.s.records[key] = r
		return found(r, dht.OK)
	})
}

// PutIfAbsent creates key unless a live record exists.
func (c *Client) PutIfAbsent(key string, value []byte, ttl time.Duration, now time.Time, cb func(dht.Result)) {
	value = bytes.Clone(value)
	c.enqueue(now, cb, func(at time.Time) dht.Result {
		if c.tooLarge(value) {
			return dht.Result{Status: dht.TooLarge}
		}
		if r := c.live(key, at); r != nil {
			if r.owner == c.id && bytes.Equal(r.value, value) {
				return found(r, dht.OK)
			}
			return found(r, dht.Exists)
		}
		r := &record{value: value, owner: c.id, expires: at.Add(ttl)}
		c.s.records[key] = r
		return found(r, dht.OK)
	})
}

// Delete removes key if the client owns it.
func (c *Client) Delete(key string, now time.Time, cb func(dht.Result)) {
	c.enqueue(now, cb, func(at time.Time) dht.Result {
		r := c.live(key, at)
		switch {
		case r == nil:
			return dht.Result{Status: dht.NotFound}
		case r.owner != c.id:
			return dht.Result{Status: dht.Denied, Owner: r.owner}
		}
		delete(c.s.records, key)
		return dht.Result{Status: dht.OK, Owner: c.id}
	})
}

// Renew extends key's lease if the client owns it.
func (c *Client) Renew(key string, ttl time.Duration, now time.Time, cb func(dht.Result)) {
	c.enqueue(now, cb, func(at time.Time) dht.Result {
		r := c.live(key, at)
		switch {
		case r == nil:
			return dht.Result{Status: dht.NotFound}
		case r.owner != c.id:
			return dht.Result{Status: dht.Denied, Owner: r.owner}
		}
		r.expires = at.Add(ttl)
		return found(r, dht.OK)
	})
}
