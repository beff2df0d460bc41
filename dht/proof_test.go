package dht

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"burrow/identity"
	"burrow/nid"
	"burrow/xeddsa"
)

// forge sends a write request from attacker's node as if origin made it,
// with the given proof and the attacker's certificate, routed to the key's
// primary.
func forge(attacker *simNode, origin nid.ID, o op, key, value string, pr *proof) {
	m := message{Type: msgRequest, ID: 1 << 62, Origin: origin, Op: o, Hops: maxHops, TTL: 60000, Key: key, Proof: pr,
		Cert: attacker.ring.certs[attacker.id]}
	if value != "" {
		m.Value = []byte(value)
	}
	attacker.call(func() { attacker.Send(Position(key), false, m.append(nil)) })
}

func primaryOf(r *simRing, key string) *simNode {
	return r.nodes[r.responsibleSet(Position(key), 1)[0]]
}

func mustRead(t *testing.T, r *simRing, n *simNode, key, want string, owner nid.ID) {
	t.Helper()
	o := settle(t, r, "Get "+key, get(n, key), OK)
	if string(o.res.Value) != want || o.res.Owner != owner {
		t.Fatalf("Get %s = %q by %v, want %q by %v", key, o.res.Value, o.res.Owner, want, owner)
	}
}

func TestNoMemberWritesInAnotherMembersName(t *testing.T) {
	r := newTestRing(t, 21, 8, testConfig())
	nodes := r.live()
	victim, attacker := nodes[1], nodes[5]
	settle(t, r, "the victim's write", putIfAbsent(victim, "name:db", "10.0.0.7", time.Minute), OK)

	attackerKey := r.keys[attacker.id]
	signedByAttacker := &proof{Key: attackerKey.Public, Stamp: uint64(r.now.UnixMilli()), Until: uint32(r.now.Add(time.Minute).Unix())}
	signedByAttacker.Sig = xeddsa.Sign(attackerKey.Private, signedContent(nil, "name:db", false, []byte("10.6.6.6"), signedByAttacker), [64]byte{})
	deletion := &proof{Key: attackerKey.Public, Stamp: uint64(r.now.UnixMilli())}
	deletion.Sig = xeddsa.Sign(attackerKey.Private, signedContent(nil, "name:db", true, nil, deletion), [64]byte{})
	primary := primaryOf(r, "name:db")
	before := primary.p.Stats().Forged
	for _, f := range []struct {
		op    op
		value string
		proof *proof
	}{
		{opPut, "10.6.6.6", nil},              // no signature at all
		{opPut, "10.6.6.6", signedByAttacker}, // the attacker's own signature, the victim's name
		{opDelete, "", deletion},
		{opRenew, "10.6.6.6", signedByAttacker},
	} {
		forge(attacker, victim.id, f.op, "name:db", f.value, f.proof)
		r.run(time.Second)
	}
	if got := primary.p.Stats().Forged - before; got != 4 {
		t.Fatalf("the primary counted %d forged requests, want 4", got)
	}
	mustRead(t, r, nodes[3], "name:db", "10.0.0.7", victim.id)

	// In its own name the attacker is told the record is someone else's.
	settle(t, r, "the attacker's Put in its own name", put(attacker, "name:db", "10.6.6.6", time.Minute), Denied)
	settle(t, r, "the attacker's Delete in its own name", del(attacker, "name:db"), Denied)
	mustRead(t, r, nodes[3], "name:db", "10.0.0.7", victim.id)
}

func TestReplayedWritesCannotRollARecordBack(t *testing.T) {
	r := newTestRing(t, 22, 6, testConfig())
	nodes := r.live()
	owner, attacker := nodes[0], nodes[3]
	var captured []message
	r.tamper = func(from nid.ID, m *message) *message {
		if m.Type == msgRequest && m.Origin == owner.id && m.Op == opPut {
			captured = append(captured, *m)
		}
		return m
	}
	settle(t, r, "first Put", put(owner, "lease", "first", time.Minute), OK)
	r.run(time.Second)
	settle(t, r, "second Put", put(owner, "lease", "second", time.Minute), OK)
	if len(captured) == 0 {
		t.Fatal("captured no request")
	}
	replay := func() {
		m := captured[0]
		m.ID += 1 << 40 // not a retry the primary's answer cache would recognise
		m.Hops = maxHops
		attacker.call(func() { attacker.Send(Position(m.Key), false, m.append(nil)) })
		r.run(time.Second)
	}
	replay()
	mustRead(t, r, nodes[4], "lease", "second", owner.id)

	settle(t, r, "Delete", del(owner, "lease"), OK)
	replay()
	settle(t, r, "Get after a replay of a write older than the deletion", get(nodes[4], "lease"), NotFound)

	// Past the clock skew a replay is refused for its age alone, even
	// where the tombstone is gone.
	r.run(2 * maxClockSkew)
	before := primaryOf(r, "lease").p.Stats().Forged
	replay()
	if primaryOf(r, "lease").p.Stats().Forged == before {
		t.Fatal("an old signed request was not refused as unproven")
	}
	settle(t, r, "Get after a late replay", get(nodes[4], "lease"), NotFound)
}

func TestReplicasAndReadersRefuseAlteredCopies(t *testing.T) {
	r := newTestRing(t, 23, 8, testConfig())
	nodes := r.live()
	owner := nodes[2]
	settle(t, r, "write", putIfAbsent(owner, "subnet:10.9.0.0/24", "mine", time.Minute), OK)

	// A node pushes an altered copy, the owner's proof kept, at a newer
	// version to every holder of the key.
	set := r.responsibleSet(Position("subnet:10.9.0.0/24"), 3)
	primary := r.nodes[set[0]]
	altered := primary.p.records["subnet:10.9.0.0/24"].wire(r.now)
	altered.Value = []byte("stolen")
	altered.Version += 1 << 20
	for _, id := range set {
		h := r.nodes[id]
		h.call(func() {
			h.p.HandleMessage(nodes[6].id, (&message{Type: msgRecords, Total: 1, Records: []wireRecord{altered}}).append(nil), r.now)
		})
		if got := h.p.records["subnet:10.9.0.0/24"]; !bytes.Equal(got.value, []byte("mine")) {
			t.Fatalf("holder %v stored the altered copy %q", id, got.value)
		}
		if h.p.Stats().Forged == 0 {
			t.Fatalf("holder %v did not count the altered copy", id)
		}
	}

	// An answer altered on its way back is refused by the reader.
	r.tamper = func(from nid.ID, m *message) *message {
		if m.Type == msgResponse && m.Status == OK {
			m.Value = []byte("stolen")
		}
		return m
	}
	reader := nodes[0]
	if reader == primary {
		reader = nodes[1]
	}
	settle(t, r, "Get through a node that alters answers", get(reader, "subnet:10.9.0.0/24"), Unproven)
}

func TestOneMemberCannotClaimEveryKey(t *testing.T) {
	cfg := testConfig()
	cfg.OwnerQuota = 16
	r := newTestRing(t, 24, 4, cfg)
	nodes := r.live()
	greedy, other := nodes[0], nodes[2]
	statuses := map[Status]int{}
	for i := range 300 {
		o := putIfAbsent(greedy, fmt.Sprint("dhcp:10.0.0.0/16:10.0.", i/250, ".", i%250), "greedy", time.Minute)
		r.wait(o)
		statuses[o.res.Status]++
	}
	// Each of the 4 primaries takes at most its share of 16 doubled, and
	// never fewer than minOwnerQuota: no more than 4·8 + 2·16 in all.
	if statuses[OK] < cfg.OwnerQuota || statuses[OK] > 4*minOwnerQuota+2*cfg.OwnerQuota || statuses[OverQuota] != 300-statuses[OK] {
		t.Fatalf("statuses %v: want between %d and %d OK, the rest over quota", statuses, cfg.OwnerQuota, 4*minOwnerQuota+2*cfg.OwnerQuota)
	}
	settle(t, r, "another member's write", putIfAbsent(other, "dhcp:10.0.0.0/16:10.0.9.9", "other", time.Minute), OK)
}

func TestRevokedOwnersRecordsAreVoid(t *testing.T) {
	r := newTestRing(t, 25, 6, testConfig())
	nodes := r.live()
	owner := nodes[1]
	settle(t, r, "write", putIfAbsent(owner, "name:laptop", "10.0.0.9", time.Minute), OK)
	r.revoked[owner.id] = true
	for _, n := range nodes {
		n.call(func() { n.p.DropOwner(owner.id) })
	}
	settle(t, r, "Get after the owner's revocation", get(nodes[4], "name:laptop"), NotFound)
	settle(t, r, "the revoked owner writing again", putIfAbsent(owner, "name:laptop", "10.0.0.9", time.Minute), Unproven)
	settle(t, r, "another member taking the name", putIfAbsent(nodes[3], "name:laptop", "10.0.0.10", time.Minute), OK)
}

// A member that makes up keys of its own, to hold records beyond its
// quota or under names no one can trace, gets nothing: primaries count
// records against certified members.
func TestKeysOfAMembersOwnMakingHoldNothing(t *testing.T) {
	r := newTestRing(t, 26, 6, testConfig())
	nodes := r.live()
	attacker := nodes[2]
	puppet, err := identity.GenerateNodeKey(rand.NewChaCha8([32]byte{0x66}))
	if err != nil {
		t.Fatal(err)
	}
	pr := &proof{Key: puppet.Public, Stamp: uint64(r.now.UnixMilli()), Until: uint32(r.now.Add(time.Minute).Unix())}
	pr.Sig = xeddsa.Sign(puppet.Private, signedContent(nil, "name:puppet", false, []byte("10.0.0.66"), pr), [64]byte{})
	primary := primaryOf(r, "name:puppet")
	before := primary.p.Stats().Forged
	forge(attacker, puppet.ID(), opPutIfAbsent, "name:puppet", "10.0.0.66", pr) // with the attacker's certificate
	r.run(time.Second)
	if primary.p.Stats().Forged == before {
		t.Fatal("the primary did not refuse a key without a certificate of its own")
	}
	settle(t, r, "Get of the puppet's record", get(nodes[4], "name:puppet"), NotFound)
}

// settle waits for o and checks its status, naming the operation as what.
func settle(t *testing.T, r *simRing, what string, o *outcome, st Status) *outcome {
	t.Helper()
	r.wait(o)
	expect(t, what, o, st)
	return o
}

// TestSharedKeysTakeAnyAuthorisedWriter: a key the configuration shares
// (a network-wide setting) is written and overwritten by any member it
// authorises, whoever wrote it before, and by no one else.
func TestSharedKeysTakeAnyAuthorisedWriter(t *testing.T) {
	authorised := map[string]bool{}
	cfg := testConfig()
	cfg.Shared = func(key string, cert []byte, _ [32]byte, now time.Time) (bool, bool) {
		return strings.HasPrefix(key, "net:"), authorised[string(cert)]
	}
	r := newTestRing(t, 27, 8, cfg)
	nodes := r.live()
	admin1, admin2, member, reader := nodes[1], nodes[4], nodes[6], nodes[2]
	authorised[string(r.certs[admin1.id])], authorised[string(r.certs[admin2.id])] = true, true

	settle(t, r, "the first admin's Put", put(admin1, "net:settings", "mtu=1400", time.Minute), OK)
	settle(t, r, "the second admin's Put over it", put(admin2, "net:settings", "mtu=1300", time.Minute), OK)
	mustRead(t, r, reader, "net:settings", "mtu=1300", admin2.id)
	settle(t, r, "a member's Put", put(member, "net:settings", "mtu=9000", time.Minute), Denied)
	settle(t, r, "a member's Delete", del(member, "net:settings"), Denied)
	settle(t, r, "a member's Put of a key of its own", put(member, "net:other", "x", time.Minute), Denied)
	mustRead(t, r, reader, "net:settings", "mtu=1300", admin2.id)
	settle(t, r, "the first admin's Delete", del(admin1, "net:settings"), OK)
	settle(t, r, "Get after it", get(reader, "net:settings"), NotFound)
	// Other keys keep their owner.
	settle(t, r, "a name", put(member, "name:m", "10.0.0.9", time.Minute), OK)
	settle(t, r, "an admin's Put over it", put(admin1, "name:m", "10.6.6.6", time.Minute), Denied)
}

// revocationRecords is the rule the node gives its DHT: revoked:<node ID>
// holds the CA's revocation of that node and nothing else.
type revocationRecords struct{ ring *simRing }

func (revocationRecords) Covers(key string) bool { return strings.HasPrefix(key, "revoked:") }

func (v revocationRecords) Valid(key string, value []byte) bool {
	rev, err := v.ring.trust.ParseAndVerifyRevocation(value)
	return err == nil && key == "revoked:"+rev.Node.String()
}

// TestARevocationRecordIsCheckedAndFinal: any member may store the CA's
// revocation of a node under that node's key, and nothing else there: a
// revocation by another CA, of another node, or garbage is refused by
// the primary, and copies of such values or of a deletion by the nodes
// that hold the record. Once stored, another revocation does not replace
// it and no one deletes it, and it outlives the revocation of the member
// that wrote it.
func TestARevocationRecordIsCheckedAndFinal(t *testing.T) {
	cfg := testConfig()
	cfg.MaxValueLen = DefaultMaxValueLen
	var rule revocationRecords
	cfg.SelfCertifying = &rule
	r := newTestRing(t, 28, 8, cfg)
	rule.ring = r
	nodes := r.live()
	revoked := nodes[7].id
	key := "revoked:" + revoked.String()
	ca := r.trust.CAs[0]
	revoke := func(ca *identity.CA, id nid.ID, at time.Time) string {
		rev, err := identity.SignRevocation(ca, id, "laptop", at)
		if err != nil {
			t.Fatal(err)
		}
		return string(rev.Marshal())
	}
	valid := revoke(ca, revoked, r.now)
	otherCA, err := identity.NewCA(ca.Network, rand.NewChaCha8([32]byte{0xcb}))
	if err != nil {
		t.Fatal(err)
	}
	primary := primaryOf(r, key)
	before := primary.p.Stats().Forged
	for what, value := range map[string]string{
		"another CA's revocation":           revoke(otherCA, revoked, r.now),
		"a revocation of another node":      revoke(ca, nodes[6].id, r.now),
		"a revocation changed in its name":  strings.Replace(valid, "laptop", "lapdog", 1),
		"something that is no revocation":   "revoked",
		"no value at all (an empty record)": "",
	} {
		settle(t, r, "Put of "+what, put(nodes[2], key, value, time.Minute), Unproven)
	}
	if primary.p.Stats().Forged == before {
		t.Error("the primary did not count the forged values")
	}
	settle(t, r, "Get after the forged writes", get(nodes[0], key), NotFound)

	settle(t, r, "the revocation", putIfAbsent(nodes[2], key, valid, time.Minute), OK)
	later := revoke(ca, revoked, r.now.Add(time.Hour))
	if o := settle(t, r, "another revocation of the node over it", put(nodes[3], key, later, time.Minute), Exists); string(o.res.Value) != valid {
		t.Fatalf("the answer holds %q, want the stored revocation", o.res.Value)
	}
	settle(t, r, "its writer's Delete", del(nodes[2], key), Denied)
	settle(t, r, "its writer's Renew", renew(nodes[2], key, time.Minute), Denied)
	settle(t, r, "another member's PutIfAbsent of the same revocation", putIfAbsent(nodes[4], key, valid, time.Minute), OK)
	settle(t, r, "another member's Put of the same revocation", put(nodes[3], key, valid, time.Minute), OK)
	mustRead(t, r, nodes[0], key, valid, nodes[3].id)

	// Every holder refuses copies that would replace it with a forged
	// value or a deletion, at any version.
	forged := r.nodes[r.responsibleSet(Position(key), 1)[0]].p.records[key].wire(r.now)
	forged.Value, forged.Version = []byte(revoke(otherCA, revoked, r.now)), forged.Version+1<<20
	tombstone := forged
	tombstone.Value, tombstone.Dead = []byte(valid), true // the revocation itself, marked deleted
	for _, id := range r.responsibleSet(Position(key), 3) {
		h := r.nodes[id]
		before := h.p.Stats().Forged
		h.call(func() {
			h.p.HandleMessage(nodes[6].id, (&message{Type: msgRecords, Total: 1, Records: []wireRecord{forged, tombstone}}).append(nil), r.now)
		})
		if got := h.p.records[key]; got.dead || string(got.value) != valid {
			t.Fatalf("holder %v replaced the revocation with a copy (dead %v)", id, got.dead)
		}
		if h.p.Stats().Forged < before+2 {
			t.Fatalf("holder %v did not count both forged copies (%d, was %d)", id, h.p.Stats().Forged, before)
		}
	}

	// The member that wrote it last is revoked in turn: its records are
	// void, but not the CA's statement it stored.
	r.revoked[nodes[3].id] = true
	for _, n := range nodes {
		n.call(func() { n.p.DropOwner(nodes[3].id) })
	}
	mustRead(t, r, nodes[0], key, valid, nodes[3].id)
}

// TestTheLargestRevocationFitsOneWrite: the CA's largest revocation fits a
// record, and its write request fits a message even from a member with
// the largest certificate the CA signs.
func TestTheLargestRevocationFitsOneWrite(t *testing.T) {
	if identity.MaxRevocationSize > DefaultMaxValueLen {
		t.Fatalf("a revocation of up to %d bytes, records of up to %d", identity.MaxRevocationSize, DefaultMaxValueLen)
	}
	m := message{Type: msgRequest, Op: opPut, Key: "revoked:" + nid.ID{}.String(), Value: make([]byte, identity.MaxRevocationSize),
		Proof: &proof{}, Cert: make([]byte, identity.MaxCertificateSize)}
	if n := len(m.append(nil)); n > DefaultMaxMessageLen {
		t.Fatalf("the largest write of a revocation is %d bytes, messages at most %d", n, DefaultMaxMessageLen)
	}
}
