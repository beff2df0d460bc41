package dht

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"burrow/nid"
)

func testConfig() Config {
	return Config{
		RequestTimeout:  3 * time.Second,
		RetryInterval:   300 * time.Millisecond,
		SyncTimeout:     time.Second,
		RefreshInterval: time.Second,
		StaleAfter:      6 * time.Second,
		Grace:           5 * time.Second,
		MaxValueLen:     64,
		MaxRecords:      1000,
	}
}

// newTestRing builds a consistent ring of n nodes.
func newTestRing(t fataler, seed uint64, n int, cfg Config) *simRing {
	r := newSimRing(t, seed, cfg)
	for range n {
		r.addNode(r.randomID(), true)
	}
	r.run(2 * time.Second)
	return r
}

// wait runs the ring until every outcome is in, failing after a minute.
func (r *simRing) wait(outs ...*outcome) {
	r.t.Helper()
	deadline := r.now.Add(time.Minute)
	for r.now.Before(deadline) {
		if !slices.ContainsFunc(outs, func(o *outcome) bool { return !o.done }) {
			return
		}
		r.run(10 * time.Millisecond)
	}
	r.t.Fatal("operations did not finish")
}

func get(n *simNode, key string) *outcome {
	return n.op(func(p *Participant, now time.Time, cb func(Result)) { p.Get(key, now, cb) })
}

func putIfAbsent(n *simNode, key, value string, ttl time.Duration) *outcome {
	return n.op(func(p *Participant, now time.Time, cb func(Result)) {
		p.PutIfAbsent(key, []byte(value), ttl, now, cb)
	})
}

func put(n *simNode, key, value string, ttl time.Duration) *outcome {
	return n.op(func(p *Participant, now time.Time, cb func(Result)) { p.Put(key, []byte(value), ttl, now, cb) })
}

func del(n *simNode, key string) *outcome {
	return n.op(func(p *Participant, now time.Time, cb func(Result)) { p.Delete(key, now, cb) })
}

func renew(n *simNode, key string, ttl time.Duration) *outcome {
	return n.op(func(p *Participant, now time.Time, cb func(Result)) { p.Renew(key, ttl, now, cb) })
}

func expect(t *testing.T, what string, o *outcome, st Status) {
	t.Helper()
	if !o.done {
		t.Fatalf("%s: no answer", what)
	}
	if o.res.Status != st {
		t.Fatalf("%s: status %v, want %v", what, o.res.Status, st)
	}
}

func TestAloneNodeServesEveryOperation(t *testing.T) {
	r := newTestRing(t, 1, 1, testConfig())
	n := r.live()[0]
	o := putIfAbsent(n, "k", "v1", time.Minute)
	r.wait(o)
	expect(t, "first PutIfAbsent", o, OK)
	if o.res.Owner != n.id || string(o.res.Value) != "v1" || !o.res.Expires.Equal(r.now.Add(time.Minute)) || !o.res.At.Equal(o.at) {
		t.Fatalf("result %+v", o.res)
	}
	o = putIfAbsent(n, "k", "v1", time.Minute)
	r.wait(o)
	expect(t, "PutIfAbsent again by the owner, same value", o, OK)
	o = putIfAbsent(n, "k", "v2", time.Minute)
	r.wait(o)
	expect(t, "PutIfAbsent with another value", o, Exists)
	if string(o.res.Value) != "v1" {
		t.Fatalf("Exists carries %q, want v1", o.res.Value)
	}
	o = put(n, "k", "v3", time.Minute)
	r.wait(o)
	expect(t, "Put by the owner", o, OK)
	o = get(n, "k")
	r.wait(o)
	expect(t, "Get", o, OK)
	if string(o.res.Value) != "v3" {
		t.Fatalf("Get = %q, want v3", o.res.Value)
	}
	o = renew(n, "k", 2*time.Minute)
	r.wait(o)
	expect(t, "Renew", o, OK)
	if !o.res.Expires.Equal(r.now.Add(2 * time.Minute)) {
		t.Fatalf("Renew expires %v, want %v", o.res.Expires, r.now.Add(2*time.Minute))
	}
	o = del(n, "k")
	r.wait(o)
	expect(t, "Delete", o, OK)
	o = get(n, "k")
	r.wait(o)
	expect(t, "Get after Delete", o, NotFound)
	o = del(n, "k")
	r.wait(o)
	expect(t, "Delete again", o, NotFound)
}

func TestLimitsAreRefused(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRecords = 3
	r := newTestRing(t, 2, 1, cfg)
	n := r.live()[0]
	cases := []struct {
		name string
		o    *outcome
		want Status
	}{
		{"oversize value", putIfAbsent(n, "k", string(make([]byte, 65)), time.Minute), TooLarge},
		{"oversize value by Put", put(n, "k", string(make([]byte, 65)), time.Minute), TooLarge},
		{"empty key", putIfAbsent(n, "", "v", time.Minute), Invalid},
		{"oversize key", get(n, string(make([]byte, DefaultMaxKeyLen+1))), Invalid},
		{"zero TTL", putIfAbsent(n, "k", "v", 0), Invalid},
		{"negative TTL on Renew", renew(n, "k", -time.Second), Invalid},
	}
	r.run(time.Millisecond)
	for _, c := range cases {
		expect(t, c.name, c.o, c.want)
	}
	for i := range 3 {
		o := putIfAbsent(n, fmt.Sprint("k", i), "v", time.Minute)
		r.wait(o)
		expect(t, "within MaxRecords", o, OK)
	}
	o := putIfAbsent(n, "one too many", "v", time.Minute)
	r.wait(o)
	expect(t, "beyond MaxRecords", o, Full)
	o = put(n, "k0", "overwrite", time.Minute)
	r.wait(o)
	expect(t, "overwriting an existing key when full", o, OK)
}

func TestTTLIsCutToMaxTTL(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTTL = time.Hour
	r := newTestRing(t, 3, 1, cfg)
	o := putIfAbsent(r.live()[0], "k", "v", 48*time.Hour)
	r.wait(o)
	expect(t, "PutIfAbsent", o, OK)
	if want := r.now.Add(time.Hour); !o.res.Expires.Equal(want) {
		t.Fatalf("expires %v, want %v", o.res.Expires, want)
	}
}

func TestOnlyTheOwnerDeletesRenewsOrOverwrites(t *testing.T) {
	r := newTestRing(t, 4, 6, testConfig())
	nodes := r.live()
	owner, other := nodes[0], nodes[3]
	o := putIfAbsent(owner, "lease", "mine", time.Minute)
	r.wait(o)
	expect(t, "PutIfAbsent", o, OK)
	for name, o := range map[string]*outcome{
		"Delete by another node":      del(other, "lease"),
		"Renew by another node":       renew(other, "lease", time.Minute),
		"Put by another node":         put(other, "lease", "theirs", time.Minute),
		"PutIfAbsent by another node": putIfAbsent(other, "lease", "mine", time.Minute),
	} {
		r.wait(o)
		want := Denied
		if name == "PutIfAbsent by another node" {
			want = Exists
		}
		expect(t, name, o, want)
		if o.res.Owner != owner.id {
			t.Fatalf("%s: owner %v, want %v", name, o.res.Owner, owner.id)
		}
	}
	o = get(other, "lease")
	r.wait(o)
	expect(t, "Get", o, OK)
	if string(o.res.Value) != "mine" {
		t.Fatalf("value %q after refused writes", o.res.Value)
	}
	o = del(owner, "lease")
	r.wait(o)
	expect(t, "Delete by the owner", o, OK)

	// Each node counts its own operations by result; a signed Renew reads
	// the record first.
	for _, c := range []struct {
		n    *simNode
		want []OperationCount
	}{
		{owner, []OperationCount{{"put-if-absent", "ok", 1}, {"delete", "ok", 1}}},
		{other, []OperationCount{{"get", "ok", 2}, {"put", "denied", 1}, {"put-if-absent", "exists", 1}, {"delete", "denied", 1}, {"renew", "denied", 1}}},
	} {
		if got := c.n.p.Stats().Operations; !slices.Equal(got, c.want) {
			t.Errorf("operations counted %v, want %v", got, c.want)
		}
	}
}

func TestConcurrentPutIfAbsentHasOneWinner(t *testing.T) {
	for seed := range uint64(10) {
		r := newTestRing(t, 100+seed, 12, testConfig())
		var outs []*outcome
		for i, n := range r.live() {
			outs = append(outs, putIfAbsent(n, "contested", fmt.Sprint("value-", i), time.Minute))
		}
		r.wait(outs...)
		var winner *outcome
		for _, o := range outs {
			if o.res.Status == OK {
				if winner != nil {
					t.Fatalf("seed %d: two winners: %q and %q", seed, winner.res.Value, o.res.Value)
				}
				winner = o
			}
		}
		if winner == nil {
			t.Fatalf("seed %d: no winner", seed)
		}
		for _, o := range outs {
			if o.res.Status != OK && (o.res.Status != Exists || !bytes.Equal(o.res.Value, winner.res.Value) || o.res.Owner != winner.res.Owner) {
				t.Fatalf("seed %d: loser got %v %q owner %v; winner %q owner %v", seed, o.res.Status, o.res.Value, o.res.Owner, winner.res.Value, winner.res.Owner)
			}
		}
	}
}

// holders returns the live nodes holding a live copy of key, and the copy.
func (r *simRing) holders(key string) map[nid.ID]*record {
	out := make(map[nid.ID]*record)
	for _, n := range r.live() {
		if rec := n.p.records[key]; rec != nil && rec.live(r.now) {
			out[n.id] = rec
		}
	}
	return out
}

func TestAcknowledgedWriteIsOnEveryReplica(t *testing.T) {
	r := newTestRing(t, 5, 10, testConfig())
	for i := range 20 {
		key := fmt.Sprint("key-", i)
		o := putIfAbsent(r.live()[i%10], key, "v", time.Minute)
		r.wait(o)
		expect(t, key, o, OK)
		held := r.holders(key)
		for _, id := range r.responsibleSet(Position(key), 3) {
			rec := held[id]
			if rec == nil || string(rec.value) != "v" {
				t.Fatalf("%s: replica %v lacks the acknowledged write", key, id.Short())
			}
		}
	}
}

func TestLeaseExpiresAndFreesTheKey(t *testing.T) {
	r := newTestRing(t, 6, 5, testConfig())
	a, b := r.live()[0], r.live()[2]
	o := putIfAbsent(a, "short", "a", time.Second)
	r.wait(o)
	expect(t, "PutIfAbsent", o, OK)
	r.runUntil(o.res.Expires.Add(100 * time.Millisecond))
	o = get(b, "short")
	r.wait(o)
	expect(t, "Get after expiry", o, NotFound)
	o = renew(a, "short", time.Second)
	r.wait(o)
	expect(t, "Renew after expiry", o, NotFound)
	o = putIfAbsent(b, "short", "b", time.Minute)
	r.wait(o)
	expect(t, "PutIfAbsent by another node after expiry", o, OK)
}

func writeKeys(t *testing.T, r *simRing, n int) map[string]string {
	t.Helper()
	want := make(map[string]string)
	var outs []*outcome
	nodes := r.live()
	for i := range n {
		key, value := fmt.Sprint("key-", i), fmt.Sprint("value-", i)
		want[key] = value
		outs = append(outs, putIfAbsent(nodes[i%len(nodes)], key, value, time.Hour))
	}
	r.wait(outs...)
	for _, o := range outs {
		expect(t, "write", o, OK)
	}
	return want
}

// checkPlacement asserts that every key is readable and held by exactly the
// nodes that are responsible for it now, with one version.
func checkPlacement(t *testing.T, r *simRing, want map[string]string) {
	t.Helper()
	for _, key := range sortedKeys(want) {
		o := get(r.live()[0], key)
		r.wait(o)
		if o.res.Status != OK || string(o.res.Value) != want[key] {
			t.Fatalf("%s: Get = %v %q, want %q", key, o.res.Status, o.res.Value, want[key])
		}
		held := r.holders(key)
		var version uint64
		for _, id := range r.responsibleSet(Position(key), r.cfg.Replicas) {
			rec := held[id]
			if rec == nil {
				t.Fatalf("%s: responsible node %v holds no copy", key, id.Short())
			}
			if version != 0 && rec.version != version {
				t.Fatalf("%s: replicas disagree on the version", key)
			}
			version = rec.version
		}
	}
}

func TestReplicasFollowFailuresOfFewerThanRAdjacentNodes(t *testing.T) {
	cfg := testConfig()
	cfg.Replicas = 3
	r := newTestRing(t, 7, 12, cfg)
	want := writeKeys(t, r, 40)
	for round := range 4 {
		// Two adjacent nodes at once, then time to repair.
		m := r.live()
		i := r.rng.IntN(len(m))
		r.fail(m[i])
		r.fail(m[(i+1)%len(m)])
		r.run(10 * time.Second)
		r.addNode(r.randomID(), false)
		r.run(5 * time.Second)
		checkPlacement(t, r, want)
		_ = round
	}
}

func TestJoinsTakeOverTheirArc(t *testing.T) {
	r := newTestRing(t, 8, 4, testConfig())
	want := writeKeys(t, r, 30)
	for range 8 {
		r.addNode(r.randomID(), false)
		r.run(500 * time.Millisecond)
	}
	r.run(10 * time.Second)
	checkPlacement(t, r, want)
}

func TestLeavesHandOffTheirArc(t *testing.T) {
	r := newTestRing(t, 9, 12, testConfig())
	want := writeKeys(t, r, 30)
	for range 6 {
		m := r.live()
		r.leave(m[r.rng.IntN(len(m))])
		r.run(5 * time.Second)
	}
	checkPlacement(t, r, want)
}

// TestPrimaryThatMissedAWriteLearnsItFromAReplica sets up the situation the
// version check exists for: a replica holds an acknowledged record its
// primary never saw (as when a primary joined and its views lagged). A
// PutIfAbsent by someone else must answer Exists, not hand the key out.
func TestPrimaryThatMissedAWriteLearnsItFromAReplica(t *testing.T) {
	for name, version := range map[string]uint64{
		"older clock":        5 << 16,
		"clock an hour fast": uint64(simEpoch.Add(time.Hour).UnixMilli()) << 16,
	} {
		r := newTestRing(t, 10, 6, testConfig())
		key := "missed"
		set := r.responsibleSet(Position(key), 3)
		primary, replica := r.nodes[set[0]], r.nodes[set[1]]
		earlier, owner := r.signedElsewhere(key, "first", version)
		replica.call(func() { replica.p.merge(earlier, r.now) })
		if primary.p.records[key] != nil {
			t.Fatal("the primary must not have the record for this test")
		}
		o := putIfAbsent(r.live()[0], key, "second", time.Minute)
		r.wait(o)
		expect(t, name+": PutIfAbsent on a key the primary missed", o, Exists)
		if string(o.res.Value) != "first" || o.res.Owner != owner {
			t.Fatalf("%s: Exists carries %q owner %v, want the replica's record", name, o.res.Value, o.res.Owner)
		}
		if c := primary.p.Stats().Conflicts; c != 1 {
			t.Fatalf("%s: %d conflicts, want one round to learn the record", name, c)
		}
		r.run(3 * time.Second)
		for _, id := range set {
			rec := r.nodes[id].p.records[key]
			if rec == nil || string(rec.value) != "first" {
				t.Fatalf("%s: replica %v did not converge on the surviving record", name, id.Short())
			}
		}
	}
}

// TestNewcomerTakesOverBeforeItsSuccessorSeesIt: a node joins in front of
// the primary of a key, and the old primary's view stays stale for seconds.
// The newcomer's sync request tells the old primary to hand the arc over
// at once, so that writes on the old primary go to the newcomer and the
// two never serve the key side by side.
func TestNewcomerTakesOverBeforeItsSuccessorSeesIt(t *testing.T) {
	r := newTestRing(t, 13, 6, testConfig())
	key := "moving"
	old := r.nodes[r.responsibleSet(Position(key), 1)[0]]
	o := putIfAbsent(old, key, "first", time.Minute)
	r.wait(o)
	expect(t, "PutIfAbsent before the join", o, OK)
	r.joinLag = 5 * time.Second
	newcomer := r.addNode(Position(key), false)
	r.run(1500 * time.Millisecond) // the newcomer's sync is done; no one knows it yet
	if slices.Contains(old.view, newcomer.id) {
		t.Fatal("the old primary learned of the newcomer too early for this test")
	}
	o = put(old, key, "second", time.Minute)
	r.wait(o)
	expect(t, "Put through the old primary", o, OK)
	if rec := newcomer.p.records[key]; rec == nil || string(rec.value) != "second" {
		t.Fatalf("the newcomer does not hold the write: %+v", rec)
	}
	for _, n := range r.live() {
		if c := n.p.Stats().Conflicts; c != 0 {
			t.Fatalf("%v counted %d conflicts: two primaries served the key", n.id.Short(), c)
		}
	}
}

func TestRetriedDeleteIsAnsweredOnce(t *testing.T) {
	r := newTestRing(t, 11, 5, testConfig())
	r.minDelay, r.maxDelay = 200*time.Millisecond, 400*time.Millisecond // slower than RetryInterval
	n := r.live()[1]
	o := putIfAbsent(n, "k", "v", time.Minute)
	r.wait(o)
	expect(t, "PutIfAbsent", o, OK)
	o = del(n, "k")
	r.wait(o)
	expect(t, "Delete retried by the client", o, OK)
}

func TestNextDeadlineCoversPendingWork(t *testing.T) {
	r := newTestRing(t, 12, 3, testConfig())
	n := r.live()[0]
	putIfAbsent(n, "k", "v", time.Minute)
	d := n.p.NextDeadline(r.now)
	if d.IsZero() || d.After(r.now.Add(r.cfg.RetryInterval)) {
		t.Fatalf("NextDeadline %v with a request in flight; want within %v", d, r.cfg.RetryInterval)
	}
}

func TestNewRejectsImpossibleConfig(t *testing.T) {
	env := newSimRing(t, 1, Config{})
	n := &simNode{ring: env, id: nid.ID{1}}
	for _, cfg := range []Config{
		{MaxKeyLen: 256},
		{MaxValueLen: 4000},
		{MaxTTL: 60 * 24 * time.Hour},
		{RefreshInterval: time.Minute, StaleAfter: time.Second},
	} {
		if _, err := New(n, cfg, simEpoch); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
}

// syncEnv delivers every message during Send, the way a node might when
// the destination is itself or a direct neighbour.
type syncEnv struct {
	self  nid.ID
	ring  []nid.ID
	peers map[nid.ID]*Participant
	now   time.Time
}

func (e *syncEnv) Self() nid.ID { return e.self }
func (e *syncEnv) Successors(n int) []nid.ID {
	i := slices.Index(e.ring, e.self)
	var out []nid.ID
	for j := 1; j < len(e.ring) && j <= n; j++ {
		out = append(out, e.ring[(i+j)%len(e.ring)])
	}
	return out
}
func (e *syncEnv) Predecessor() (nid.ID, bool) {
	i := slices.Index(e.ring, e.self)
	return e.ring[(i+len(e.ring)-1)%len(e.ring)], len(e.ring) > 1
}
func (e *syncEnv) Send(to nid.ID, exact bool, payload []byte) {
	dest := to
	if !exact { // the closest node preceding to, or to itself
		dest = e.ring[len(e.ring)-1]
		for _, id := range e.ring {
			if id.Compare(to) <= 0 {
				dest = id
			}
		}
	}
	e.peers[dest].HandleMessage(e.self, payload, e.now)
}

func TestSynchronousDeliveryIsSafe(t *testing.T) {
	ring := []nid.ID{nid.FromUint128(1<<62, 0), nid.FromUint128(2<<62, 0), nid.FromUint128(3<<62, 0)}
	peers := make(map[nid.ID]*Participant)
	for _, id := range ring {
		p, err := New(&syncEnv{self: id, ring: ring, peers: peers, now: simEpoch}, testConfig(), simEpoch)
		if err != nil {
			t.Fatal(err)
		}
		peers[id] = p
	}
	for _, id := range ring {
		peers[id].RingChanged(simEpoch)
	}
	var got []Result
	record := func(r Result) { got = append(got, r) }
	for i, id := range ring {
		peers[id].PutIfAbsent(fmt.Sprint("key-", i%2), []byte(id.Short()), time.Minute, simEpoch, record)
	}
	peers[ring[0]].Get("key-1", simEpoch, record)
	if len(got) != 4 {
		t.Fatalf("%d answers, want 4", len(got))
	}
	if got[0].Status != OK || got[1].Status != OK || got[2].Status != Exists || got[3].Status != OK || string(got[3].Value) != ring[1].Short() {
		t.Fatalf("answers %+v", got)
	}
}

// Reads of one key that queue at its primary behind a read's check with
// the replicas share that check, so a key every node reads is answered
// many reads per round trip, and none is refused as busy.
func TestReadsOfOneKeyShareACheck(t *testing.T) {
	r := newTestRing(t, 7, 12, testConfig())
	o := put(r.live()[0], "hot", "v", time.Hour)
	r.wait(o)
	expect(t, "put", o, OK)
	checks := 0
	r.tamper = func(from nid.ID, m *message) *message {
		if m.Type == msgCheck {
			checks++
		}
		return m
	}
	var reads []*outcome
	for range 4 {
		for _, n := range r.live() {
			reads = append(reads, get(n, "hot"))
		}
	}
	r.wait(reads...)
	for _, o := range reads {
		if o.res.Status != OK || string(o.res.Value) != "v" {
			t.Fatalf("a read got %v %q", o.res.Status, o.res.Value)
		}
	}
	rounds := checks / (r.live()[0].p.cfg.Replicas - 1)
	t.Logf("%d reads, %d checks with the replicas (%d rounds)", len(reads), checks, rounds)
	if rounds > len(reads)/4 {
		t.Fatalf("%d reads took %d check rounds", len(reads), rounds)
	}
}
