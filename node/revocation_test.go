package node

import (
	"slices"
	"testing"
	"time"

	"burrow/overlay"
)

// TestARevocationSpreadsAndCutsTheMemberOffEverywhere: handed to one
// member, a revocation reaches every member over the overlay; each keeps
// it once, drops its link to the revoked member and refuses its
// handshakes, so the revoked member ends with no link at all.
func TestARevocationSpreadsAndCutsTheMemberOffEverywhere(t *testing.T) {
	w := newOverlayNet(t, 16, 7, overlay.Params{Successors: 2, LongDistance: 2})
	w.settle(t, 60*time.Second)
	w.advance(10*time.Second, 250*time.Millisecond)
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
