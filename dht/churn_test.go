package dht

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"burrow/nid"

	"pgregory.net/rapid"
)

// hold is one node's belief that it holds a key, from the answer that
// granted it until its lease ends (or it started deleting).
type hold struct {
	node  nid.ID
	key   string
	value string
	from  time.Time
	until time.Time
}

type nodeKey struct {
	node nid.ID
	key  string
}

// churnRun drives many clients contending for a few keys while nodes join,
// fail silently (fewer than r adjacent at a time) and leave gracefully, and
// checks the DHT's promises as it goes.
type churnRun struct {
	t       churnT
	r       *simRing
	keys    []string
	holds   []*hold
	current map[nodeKey]*hold
	busy    map[nodeKey]bool
	wrote   map[nodeKey]bool // the node ever tried to write the key
	writers map[nodeKey]bool // the node may write the key; the others only try to delete it
	counter int
	acquire bool // clients still take new leases and delete
	ttl     time.Duration
	stats   map[string]int
}

func (c *churnRun) fatalf(format string, args ...any) {
	c.t.Fatalf("t=%v: %s", c.r.now.Sub(simEpoch), fmt.Sprintf(format, args...))
}

// step is one client action of node n, then the next one is scheduled.
func (c *churnRun) step(n *simNode) {
	r := c.r
	if !n.alive {
		return
	}
	defer r.at(r.now.Add(100*time.Millisecond+time.Duration(r.rng.Int64N(int64(500*time.Millisecond)))), func() { c.step(n) })
	if !c.acquire {
		return
	}
	key := c.keys[r.rng.IntN(len(c.keys))]
	nk := nodeKey{n.id, key}
	if c.busy[nk] {
		return
	}
	h := c.current[nk]
	switch {
	case h != nil && r.rng.IntN(8) == 0:
		c.delete(n, h)
	case h == nil && c.writers[nk]:
		c.putIfAbsent(n, key)
	case h == nil && !c.wrote[nk]:
		c.foreignDelete(n, key)
	}
}

func (c *churnRun) putIfAbsent(n *simNode, key string) {
	r := c.r
	nk := nodeKey{n.id, key}
	c.counter++
	value := fmt.Sprintf("%s-%d", n.id.Short(), c.counter)
	c.busy[nk], c.wrote[nk] = true, true
	n.call(func() {
		n.p.PutIfAbsent(key, []byte(value), c.ttl, r.now, func(res Result) {
			c.busy[nk] = false
			c.stats["put-"+res.Status.String()]++
			switch res.Status {
			case OK:
				if string(res.Value) != value || res.Owner != n.id {
					c.fatalf("PutIfAbsent OK for %s carries %q owner %v", key, res.Value, res.Owner.Short())
				}
				c.grant(n, key, value, res.Expires)
			case Exists:
				if res.Owner == n.id {
					// An earlier attempt whose answer was lost did win.
					c.grant(n, key, string(res.Value), res.Expires)
				}
			}
		})
	})
}

func (c *churnRun) grant(n *simNode, key, value string, until time.Time) {
	r := c.r
	if !until.After(r.now) {
		return
	}
	h := &hold{node: n.id, key: key, value: value, from: r.now, until: until}
	c.holds = append(c.holds, h)
	c.current[nodeKey{n.id, key}] = h
	c.scheduleRenew(n, h)
}

func (c *churnRun) scheduleRenew(n *simNode, h *hold) {
	r := c.r
	at := h.until.Add(-c.ttl * 5 / 8)
	if at.Before(r.now) {
		at = r.now.Add(200 * time.Millisecond)
	}
	r.at(at, func() { c.renew(n, h) })
}

func (c *churnRun) renew(n *simNode, h *hold) {
	r := c.r
	nk := nodeKey{n.id, h.key}
	if !n.alive || c.current[nk] != h || !r.now.Before(h.until) {
		if c.current[nk] == h && !r.now.Before(h.until) {
			delete(c.current, nk)
		}
		return
	}
	if c.busy[nk] {
		r.at(r.now.Add(100*time.Millisecond), func() { c.renew(n, h) })
		return
	}
	c.busy[nk] = true
	before := h.until
	n.call(func() {
		n.p.Renew(h.key, c.ttl, r.now, func(res Result) {
			c.busy[nk] = false
			c.stats["renew-"+res.Status.String()]++
			switch res.Status {
			case OK:
				if res.Owner != n.id || string(res.Value) != h.value {
					c.fatalf("Renew of %s by %v answered owner %v value %q, held %q", h.key, n.id.Short(), res.Owner.Short(), res.Value, h.value)
				}
				if res.Expires.After(h.until) {
					h.until = res.Expires
				}
			case NotFound, Denied:
				if r.now.Before(before) {
					c.fatalf("acknowledged lease on %s by %v lost: Renew answered %v (owner %v) before its expiry %v",
						h.key, n.id.Short(), res.Status, res.Owner.Short(), before.Sub(simEpoch))
				}
			}
			if c.current[nk] == h {
				c.scheduleRenew(n, h)
			}
		})
	})
}

func (c *churnRun) delete(n *simNode, h *hold) {
	r := c.r
	nk := nodeKey{n.id, h.key}
	if r.now.Before(h.until) {
		h.until = r.now // the holder stops relying on it now
	}
	delete(c.current, nk)
	c.busy[nk] = true
	n.call(func() {
		// Any answer is fine: a retry after a lost answer may find the key
		// deleted already, or taken by someone else since.
		n.p.Delete(h.key, r.now, func(res Result) {
			c.busy[nk] = false
			c.stats["delete-"+res.Status.String()]++
		})
	})
}

// foreignDelete tries to delete a key this node never wrote: it must be
// refused.
func (c *churnRun) foreignDelete(n *simNode, key string) {
	r := c.r
	nk := nodeKey{n.id, key}
	c.busy[nk] = true
	n.call(func() {
		n.p.Delete(key, r.now, func(res Result) {
			c.busy[nk] = false
			c.stats["foreign-delete-"+res.Status.String()]++
			if res.Status == OK {
				c.fatalf("%v deleted %s, which it never wrote", n.id.Short(), key)
			}
			if res.Status == Denied && res.Owner == n.id {
				c.fatalf("Denied names the caller as owner")
			}
		})
	})
}

// checkExclusive asserts that no two nodes ever believed they held the
// same key at the same time.
func (c *churnRun) checkExclusive() {
	for _, key := range c.keys {
		var hs []*hold
		for _, h := range c.holds {
			if h.key == key && h.until.After(h.from) {
				hs = append(hs, h)
			}
		}
		slices.SortFunc(hs, func(a, b *hold) int { return a.from.Compare(b.from) })
		for i := range hs {
			for j := i + 1; j < len(hs) && hs[j].from.Before(hs[i].until); j++ {
				if hs[i].node != hs[j].node {
					c.fatalf("duplicated lease on %s: %v held %q [%v, %v) and %v held %q from %v",
						key, hs[i].node.Short(), hs[i].value, hs[i].from.Sub(simEpoch), hs[i].until.Sub(simEpoch),
						hs[j].node.Short(), hs[j].value, hs[j].from.Sub(simEpoch))
				}
			}
		}
	}
}

// checkFinal asserts that every lease still held is readable with its
// value, and that the responsible nodes agree on each key.
func (c *churnRun) checkFinal() {
	r := c.r
	for _, key := range c.keys {
		var held *hold
		for _, h := range c.current {
			if h.key == key && h.until.After(r.now.Add(time.Second)) && r.nodes[h.node].alive {
				held = h
			}
		}
		o := get(r.live()[r.rng.IntN(len(r.live()))], key)
		deadline := r.now.Add(time.Minute)
		for !o.done && r.now.Before(deadline) {
			r.run(10 * time.Millisecond)
		}
		if held != nil && (o.res.Status != OK || string(o.res.Value) != held.value || o.res.Owner != held.node) {
			c.fatalf("%s held by %v with %q until %v, but Get answers %v %q owner %v",
				key, held.node.Short(), held.value, held.until.Sub(simEpoch), o.res.Status, o.res.Value, o.res.Owner.Short())
		}
		var first *record
		for i, id := range r.responsibleSet(Position(key), r.cfg.Replicas) {
			rec := r.nodes[id].p.records[key]
			if rec != nil && !rec.live(r.now) {
				rec = nil
			}
			if i == 0 {
				first = rec
				continue
			}
			switch {
			case (rec == nil) != (first == nil):
				c.fatalf("%s: responsible nodes disagree on whether it exists", key)
			case rec != nil && (string(rec.value) != string(first.value) || rec.owner != first.owner):
				c.fatalf("%s ends with two values: %q and %q", key, first.value, rec.value)
			case rec != nil && rec.version != first.version && !c.renewing(key):
				c.fatalf("%s: responsible nodes hold versions %x and %x with no write in flight", key, first.version, rec.version)
			}
		}
	}
}

// renewing reports whether some node has a write of key in flight.
func (c *churnRun) renewing(key string) bool {
	for _, n := range c.r.live() {
		if ks := n.p.keys[key]; ks != nil && ks.round != nil {
			return true
		}
	}
	return false
}

type churnT interface {
	fataler
	Fatalf(format string, args ...any)
}

type churnParams struct {
	seed                    uint64
	nodes, keys, departures int
	joins                   int
	loss                    float64
	// signed runs the ring with signatures; they change no outcome but
	// cost most of the run's time, so most cases go without.
	signed bool
}

func TestChurnKeepsAcknowledgedWritesAndLeasesExclusive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		runChurn(t, churnParams{
			seed:       rapid.Uint64().Draw(t, "seed"),
			nodes:      rapid.IntRange(6, 30).Draw(t, "nodes"),
			keys:       rapid.IntRange(1, 5).Draw(t, "keys"),
			departures: rapid.IntRange(0, 9).Draw(t, "departure groups"),
			joins:      rapid.IntRange(0, 12).Draw(t, "joins"),
			loss:       rapid.SampledFrom([]float64{0, 0.01, 0.05}).Draw(t, "loss"),
			signed:     rapid.IntRange(0, 4).Draw(t, "signed unless") == 0,
		})
	})
}

func runChurn(t churnT, pr churnParams) *simRing {
	seed, nodes, keys, departures, joins := pr.seed, pr.nodes, pr.keys, pr.departures, pr.joins
	cfg := testConfig()
	cfg.Replicas = 3
	r := newSimRing(t, seed, cfg)
	r.unsigned = !pr.signed
	for range nodes {
		r.addNode(r.randomID(), true)
	}
	c := &churnRun{
		t: t, r: r, acquire: true, ttl: 4 * time.Second,
		current: make(map[nodeKey]*hold), busy: make(map[nodeKey]bool),
		wrote: make(map[nodeKey]bool), writers: make(map[nodeKey]bool),
		stats: make(map[string]int),
	}
	for i := range keys {
		c.keys = append(c.keys, fmt.Sprint("lease-", i))
	}
	start := func(n *simNode) {
		for _, k := range c.keys {
			c.writers[nodeKey{n.id, k}] = r.rng.IntN(4) != 0
		}
		r.at(r.now.Add(time.Duration(r.rng.Int64N(int64(time.Second)))), func() { c.step(n) })
	}
	for _, n := range r.live() {
		start(n)
	}

	// Departure groups are spaced so that replicas are repaired in
	// between: detection, view lag, sync and two refresh rounds.
	const active = 30 * time.Second
	gap := active / time.Duration(departures+1)
	for i := range departures {
		r.at(simEpoch.Add(gap*time.Duration(i+1)), func() {
			live := r.live()
			if len(live) <= cfg.Replicas+2 {
				return
			}
			first := r.rng.IntN(len(live))
			if r.rng.IntN(3) == 0 {
				r.leave(live[first])
				return
			}
			for j := range 1 + r.rng.IntN(cfg.Replicas-1) {
				r.fail(live[(first+j)%len(live)])
			}
		})
	}
	for range joins {
		r.at(simEpoch.Add(time.Duration(r.rng.Int64N(int64(active)))), func() { start(r.addNode(r.randomID(), false)) })
	}
	r.runUntil(simEpoch.Add(active))
	c.acquire = false // leases are kept alive, no new ones taken
	r.run(15 * time.Second)
	c.checkExclusive()
	c.checkFinal()
	if c.stats["put-ok"] == 0 {
		t.Fatalf("no lease was ever granted: %v", c.stats)
	}
	return r
}
