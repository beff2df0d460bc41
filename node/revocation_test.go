package node

import (
	"slices"
	"testing"
	"time"

	"burrow/dht"
	"burrow/nid"
	"burrow/overlay"
)

// TestARevocationSpreadsAndCutsTheMemberOffEverywhere: handed to one
// member, a revocation reaches every member over the overlay; each keeps
// it once, drops its link to the revoked member and refuses its
// handshakes, so the revoked member ends with no link at all.
func TestARevocationSpreadsAndCutsTheMemberOffEverywhere(t *testing.T) {
	w := newSettledOverlayNet(t, 16, 7, overlay.Params{Successors: 2, LongDistance: 2})
	live := w.live()
	revoked, handedTo := live[4], live[11]
	if len(revoked.node.Adjacency()) == 0 {
		t.Fatal("the member to revoke has no links to lose")
	}
	r, fresh, err := handedTo.node.Revoke([]byte(revocationPrefix+revoked.name), w.now)
	if err != nil || !fresh || r.ID != revoked.node.Self() {
		t.Fatalf("Revoke = %+v, %v, %v; want the revoked member, new, no error", r, fresh, err)
	}
	w.drain()
	for _, n := range live {
		if n == revoked {
			continue
		}
		if got := n.learnedRevocations; len(got) != 1 || got[0].ID != revoked.node.Self() {
			t.Errorf("%s kept revocations %v, want the one of %s once", n.name, got, revoked.name)
		}
		if slices.Contains(n.node.Adjacency(), revoked.node.Self()) {
			t.Errorf("%s is still linked to the revoked %s", n.name, revoked.name)
		}
	}
	// The revoked member goes on trying: every handshake fails.
	w.advance(30*time.Second, 250*time.Millisecond)
	if adj := revoked.node.Adjacency(); len(adj) != 0 {
		t.Errorf("the revoked member has %d links 30 s later, want none", len(adj))
	}
	if _, fresh, err := live[0].node.Revoke([]byte(revocationPrefix+revoked.name), w.now); err != nil || fresh {
		t.Errorf("handing the same revocation again: new %v, err %v; want known, no error", fresh, err)
	}
	if _, _, err := live[0].node.Revoke([]byte("forged"), w.now); err == nil {
		t.Error("a revocation the CA did not sign was honoured")
	}
}

// TestAMemberThatWasAwayLearnsARevocationFromItsFirstLinkBack: a member
// down while a revocation spread gets it with its first link back and
// refuses the revoked member from then on.
func TestAMemberThatWasAwayLearnsARevocationFromItsFirstLinkBack(t *testing.T) {
	w := newTestNet(t, 3, 8)
	w.connect(0, 1)
	w.advance(2*time.Second, 100*time.Millisecond)
	if _, _, err := w.nodes[0].node.Revoke([]byte(revocationPrefix+"n2"), w.now); err != nil {
		t.Fatal(err)
	}
	w.drain()
	if got := w.nodes[1].learnedRevocations; len(got) != 1 {
		t.Fatalf("n1, linked, learned %v", got)
	}
	// The revoked n2 dials n1: refused.
	w.connect(2, 1)
	w.advance(5*time.Second, 100*time.Millisecond)
	if l := w.nodes[1].node.Links().Links()[w.nodes[2].node.Self()]; l != nil && l.Up() {
		t.Fatal("n1 linked to the revoked n2")
	}
	fresh := w.add("late", 8*1000+9, OverlayConfig{Disabled: true})
	w.connect(3, 1)
	w.advance(2*time.Second, 100*time.Millisecond)
	if got := fresh.learnedRevocations; len(got) != 1 || got[0].Name != "n2" {
		t.Fatalf("the member back after the revocation learned %v, want n2's", got)
	}
	if _, err := fresh.node.verifyPeer([]byte("n2"), w.keys["n2"], w.now); err != errRevoked {
		t.Fatalf("the late member's check of n2's certificate: %v, want %v", err, errRevoked)
	}
}

// TestAMemberThatMissedARevocationFindsItInTheDHT: a member up for over
// a minute and away while a revocation spread (the flood's copies to it
// were lost; its links stayed up, so no neighbour tells it again) does not
// know the revoked node. When that node links to it, the member reads the
// revocation every member stored in the DHT under the node's key, cuts it
// off and keeps the revocation.
func TestAMemberThatMissedARevocationFindsItInTheDHT(t *testing.T) {
	w := newSettledOverlayNet(t, 12, 9, overlay.Params{Successors: 2, LongDistance: 1})
	live := w.live()
	revoked, handedTo := live[3], live[8]
	key := revocationKey(revoked.node.Self())
	// The member away holds no copy of the key (so the record is stored
	// while it is away) and has no link to the revoked node.
	holders := map[*testNode]bool{}
	first, _ := slices.BinarySearchFunc(live, dht.Position(key), func(n *testNode, pos nid.ID) int { return n.node.Self().Compare(pos) })
	for i := range dht.DefaultReplicas {
		holders[live[(first+i)%len(live)]] = true
	}
	var away *testNode
	for _, n := range live {
		if n != revoked && n != handedTo && !holders[n] && !slices.Contains(n.node.Adjacency(), revoked.node.Self()) {
			away = n
			break
		}
	}
	if away == nil {
		t.Fatal("no member to be away")
	}
	w.down[away] = true
	if _, _, err := handedTo.node.Revoke([]byte(revocationPrefix+revoked.name), w.now); err != nil {
		t.Fatal(err)
	}
	w.drain()
	delete(w.down, away)
	if len(away.learnedRevocations) != 0 {
		t.Fatalf("%s, away, learned %v", away.name, away.learnedRevocations)
	}
	var stored dht.Result
	live[0].node.WithDHT(w.now, func(c dht.Client) { c.Get(key, w.now, func(r dht.Result) { stored = r }) })
	w.drain()
	if stored.Status != dht.OK || string(stored.Value) != revocationPrefix+revoked.name {
		t.Fatalf("the DHT holds %v %q under %s, want the revocation", stored.Status, stored.Value, key)
	}

	away.node.rev.lookUpsFrom = w.now // as if it had been up for a minute
	w.connect(slices.Index(w.nodes, revoked), slices.Index(w.nodes, away))
	w.advance(revocationLookupDelay+2*time.Second, 100*time.Millisecond)
	if got := away.learnedRevocations; len(got) != 1 || got[0].ID != revoked.node.Self() {
		t.Fatalf("%s, linked to the revoked %s, learned %v", away.name, revoked.name, got)
	}
	if !slices.Contains(away.node.svc.kv.Stats().Operations, dht.OperationCount{Op: "get", Result: "ok", N: 1}) {
		t.Errorf("%s did not read the revocation from the DHT: %v", away.name, away.node.svc.kv.Stats().Operations)
	}
	if slices.Contains(away.node.Adjacency(), revoked.node.Self()) {
		t.Errorf("%s is still linked to the revoked %s", away.name, revoked.name)
	}
}

// TestRevocationLookupsAreBoundedPerPeerAndInAll: links made in a node's
// first minute are not looked up, links to one peer that come and go read
// its revocation key once per revocationLookupEvery, a link gone before
// revocationLookupDelay reads nothing, and the peers remembered as read,
// or waiting to be, stay at most maxRevocationLookups.
func TestRevocationLookupsAreBoundedPerPeerAndInAll(t *testing.T) {
	w := newTestNet(t, 1, 10)
	n := w.nodes[0].node
	n.lookUpLater(nid.ID{9}, w.now.Add(revocationLookupsAfter-time.Second))
	if len(n.rev.toLookUp) != 0 {
		t.Fatalf("a link made in the node's first minute waits to be looked up: %v", n.rev.toLookUp)
	}
	w.now = w.now.Add(revocationLookupsAfter)
	reads := func() uint64 {
		var c uint64
		for _, o := range n.svc.kv.Stats().Operations {
			if o.Op == "get" {
				c += o.N
			}
		}
		return c
	}
	peer := nid.ID{7}
	for _, c := range []struct {
		after time.Duration
		want  uint64
	}{{0, 1}, {time.Minute, 1}, {revocationLookupEvery - time.Second, 1}, {revocationLookupEvery, 2}} {
		n.lookUpRevocation(peer, w.now.Add(c.after))
		if got := reads(); got != c.want {
			t.Fatalf("%v after the first lookup: %d reads, want %d", c.after, got, c.want)
		}
	}
	for i := range maxRevocationLookups + 10 {
		n.lookUpRevocation(nid.ID{1, byte(i >> 8), byte(i)}, w.now.Add(revocationLookupEvery))
	}
	if len(n.rev.lookedUp) != maxRevocationLookups || len(n.rev.lookups) != maxRevocationLookups {
		t.Fatalf("%d peers remembered (%d in order), want at most %d", len(n.rev.lookedUp), len(n.rev.lookups), maxRevocationLookups)
	}
	before := reads()
	n.lookUpLater(nid.ID{8}, w.now) // no link to it is up
	n.lookUpsDue(w.now.Add(revocationLookupDelay))
	if reads() != before || len(n.rev.toLookUp) != 0 {
		t.Fatalf("a peer whose link is gone was read (%d reads, was %d) or still waits (%d)", reads(), before, len(n.rev.toLookUp))
	}
	for i := range maxRevocationLookups + 10 {
		n.lookUpLater(nid.ID{2, byte(i >> 8), byte(i)}, w.now)
	}
	if len(n.rev.toLookUp) != maxRevocationLookups {
		t.Fatalf("%d peers wait to be read, want at most %d", len(n.rev.toLookUp), maxRevocationLookups)
	}
}
