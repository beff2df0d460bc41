package warrens

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"burrow/dht"
	"burrow/dht/dhttest"
	"burrow/nid"

	"pgregory.net/rapid"
)

func TestNodeHashIsFNV1a64(t *testing.T) {
	// Reference values of the 64-bit FNV-1a hash.
	for in, want := range map[string]uint64{
		"":       0xcbf29ce484222325,
		"a":      0xaf63dc4c8601ec8c,
		"foobar": 0x85944171f73967e8,
	} {
		if got := NodeHash(in); got != want {
			t.Errorf("NodeHash(%q) = %#x, want %#x", in, got, want)
		}
	}
}

func TestSubnetLayouts(t *testing.T) {
	const hash = 0xabcd_ef01_2345_6789
	cases := []struct {
		family                   Family
		subnet, tun, bridge      string
		firstContainer, lastHost string
	}{
		{IPv6, "fd53:7769:726c:abcd:ef01:2345:6789:0/112", "fd53:7769:726c:abcd:ef01:2345:6789:1", "fd53:7769:726c:abcd:ef01:2345:6789:2",
			"fd53:7769:726c:abcd:ef01:2345:6789:10", "fd53:7769:726c:abcd:ef01:2345:6789:ffff"},
		// Node identifier 0xabc: 10 . 83 . 0xab . 0xc0.
		{IPv4, "10.83.171.192/28", "10.83.171.193", "10.83.171.194", "10.83.171.200", "10.83.171.207"},
	}
	for _, c := range cases {
		p := Subnet(c.family, hash)
		if p.String() != c.subnet {
			t.Errorf("%v subnet %v, want %v", c.family, p, c.subnet)
		}
		first, last := Containers(p)
		for name, got := range map[string]netip.Addr{c.tun: Tun(p), c.bridge: Bridge(p), c.firstContainer: first, c.lastHost: last} {
			if got.String() != name {
				t.Errorf("%v: got %v, want %v", c.family, got, name)
			}
		}
	}
}

func TestGlobalIdentifierSpellsSwirl(t *testing.T) {
	a := Subnet(IPv6, 0).Addr().As16()
	if got := fmt.Sprintf("%x", a[1:6]); got != "537769726c" {
		t.Fatalf("IPv6 global identifier %s, want the hex of \"Swirl\"", got)
	}
	if b := Subnet(IPv4, 0).Addr().As4(); b[1] != 'S' {
		t.Fatalf("IPv4 global identifier %d, want 'S'", b[1])
	}
}

func TestEverySubnetIsAWarrensSubnetHoldingItsDevices(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hash := rapid.Uint64().Draw(t, "hash")
		for _, f := range []Family{IPv4, IPv6} {
			p := Subnet(f, hash)
			if !IsWarrens(p) || p != p.Masked() {
				t.Fatalf("%v is not a masked Warrens subnet", p)
			}
			first, last := Containers(p)
			for _, a := range []netip.Addr{Tun(p), Bridge(p), first, last} {
				if !p.Contains(a) {
					t.Fatalf("%v outside %v", a, p)
				}
			}
			if !(Bridge(p).Less(first) && first.Less(last)) {
				t.Fatalf("devices and containers overlap in %v", p)
			}
		}
		// The IPv6 subnet carries the whole hash; the IPv4 one its top 12 bits.
		a6 := Subnet(IPv6, hash).Addr().As16()
		if got := uint64(a6[6])<<56 | uint64(a6[7])<<48 | uint64(a6[8])<<40 | uint64(a6[9])<<32 |
			uint64(a6[10])<<24 | uint64(a6[11])<<16 | uint64(a6[12])<<8 | uint64(a6[13]); got != hash {
			t.Fatalf("IPv6 node identifier %#x, want %#x", got, hash)
		}
		a4 := Subnet(IPv4, hash).Addr().As4()
		if got := uint64(a4[2])<<4 | uint64(a4[3])>>4; got != hash>>52 {
			t.Fatalf("IPv4 node identifier %#x, want %#x", got, hash>>52)
		}
	})
}

func TestIsWarrensRejectsOtherPrefixes(t *testing.T) {
	for _, s := range []string{"10.84.1.0/28", "10.83.1.0/24", "10.83.1.8/28", "fd00::/112", "fd53:7769:726c::/64", "::ffff:10.83.1.0/124"} {
		if IsWarrens(netip.MustParsePrefix(s)) {
			t.Errorf("IsWarrens(%s) = true", s)
		}
	}
}

func TestParseMachineID(t *testing.T) {
	id, err := ParseMachineID([]byte("0123456789abcdef0123456789abcdef\n"))
	if err != nil || id != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("ParseMachineID = %q, %v", id, err)
	}
	for _, bad := range []string{"", "0123", "0123456789ABCDEF0123456789ABCDEF", "0123456789abcdef0123456789abcdeg"} {
		if _, err := ParseMachineID([]byte(bad)); err == nil {
			t.Errorf("ParseMachineID(%q) accepted", bad)
		}
	}
}

func TestCandidateAppendsTheAttempt(t *testing.T) {
	if Candidate("m", 0) != "m" || Candidate("m", 3) != "m-3" {
		t.Fatal(Candidate("m", 0), Candidate("m", 3))
	}
}

// claimRig runs claimers against one shared, slow store.
type claimRig struct {
	t        *testing.T
	store    *dhttest.Store
	now      time.Time
	claimers []*Claimer
	changes  map[*Claimer][]Status
}

func newClaimRig(t *testing.T, seed uint64) *claimRig {
	s := dhttest.NewStore(seed)
	s.MaxDelay = 300 * time.Millisecond
	return &claimRig{t: t, store: s, now: time.Unix(1_700_000_000, 0), changes: make(map[*Claimer][]Status)}
}

func (r *claimRig) add(machineID string, f Family, self nid.ID, ttl time.Duration) *Claimer {
	var c *Claimer
	c, err := NewClaimer(ClaimConfig{MachineID: machineID, Family: f, TTL: ttl, MaxAttempts: 8}, r.store.Client(self), self, nil,
		func(s Status) { r.changes[c] = append(r.changes[c], s) })
	if err != nil {
		r.t.Fatal(err)
	}
	r.claimers = append(r.claimers, c)
	return c
}

func (r *claimRig) run(d time.Duration) {
	end := r.now.Add(d)
	for r.now.Before(end) {
		r.now = r.now.Add(50 * time.Millisecond)
		r.store.Advance(r.now)
		for _, c := range r.claimers {
			c.Tick(r.now)
		}
	}
}

// collidingIPv4 finds two machine ids whose IPv4 subnets collide on the
// first attempt but not on the second.
func collidingIPv4(t *testing.T) (string, string) {
	seen := make(map[netip.Prefix]string)
	for i := range 100000 {
		m := fmt.Sprintf("%032x", i)
		p := Subnet(IPv4, NodeHash(m))
		if other, ok := seen[p]; ok && Subnet(IPv4, NodeHash(Candidate(other, 1))) != Subnet(IPv4, NodeHash(Candidate(m, 1))) {
			return other, m
		}
		seen[p] = m
	}
	t.Fatal("no IPv4 collision found")
	return "", ""
}

func TestSimultaneousClaimsOfOneSubnetHaveOneWinner(t *testing.T) {
	m1, m2 := collidingIPv4(t)
	for seed := range uint64(20) {
		r := newClaimRig(t, seed)
		a := r.add(m1, IPv4, nid.ID{1}, time.Minute)
		b := r.add(m2, IPv4, nid.ID{2}, time.Minute)
		shared := a.Status().Prefix
		if b.Status().Prefix != shared {
			t.Fatal("the machine ids do not collide")
		}
		a.Start(r.now)
		b.Start(r.now)
		r.run(5 * time.Second)
		sa, sb := a.Status(), b.Status()
		if sa.State != Claimed || sb.State != Claimed {
			t.Fatalf("seed %d: states %v, %v", seed, sa.State, sb.State)
		}
		if sa.Prefix == sb.Prefix {
			t.Fatalf("seed %d: both claimed %v", seed, sa.Prefix)
		}
		winner, loser, loserID := sa, sb, nid.ID{2}
		if sb.Prefix == shared {
			winner, loser, loserID = sb, sa, nid.ID{1}
		}
		if winner.Prefix != shared || winner.Attempt != 0 || len(winner.Collisions) != 0 {
			t.Fatalf("seed %d: winner %+v", seed, winner)
		}
		if loser.Attempt != 1 || len(loser.Collisions) != 1 || loser.Collisions[0].Prefix != shared || loser.Collisions[0].Holder == loserID {
			t.Fatalf("seed %d: loser %+v", seed, loser)
		}
		for _, s := range []Status{sa, sb} {
			_, owner, ok := r.store.Lookup(Key(s.Prefix), r.now)
			if !ok || (owner != nid.ID{1} && owner != nid.ID{2}) {
				t.Fatalf("seed %d: %v not held in the DHT", seed, s.Prefix)
			}
		}
	}
}

func TestIPv6CollisionMovesToTheNextCandidate(t *testing.T) {
	r := newClaimRig(t, 1)
	holder := nid.ID{9}
	taken := Subnet(IPv6, NodeHash("machine"))
	r.store.Set(Key(taken), []byte(holder.String()), holder, time.Hour, r.now)
	c := r.add("machine", IPv6, nid.ID{1}, time.Minute)
	c.Start(r.now)
	r.run(3 * time.Second)
	s := c.Status()
	want := Subnet(IPv6, NodeHash("machine-1"))
	if s.State != Claimed || s.Prefix != want || s.Attempt != 1 {
		t.Fatalf("status %+v, want %v claimed on attempt 1", s, want)
	}
	if len(s.Collisions) != 1 || s.Collisions[0] != (Collision{Prefix: taken, Holder: holder}) {
		t.Fatalf("collisions %+v", s.Collisions)
	}
	if got := r.changes[c]; len(got) != 2 || got[0].State != Claiming || got[0].Prefix != want || got[1].State != Claimed {
		t.Fatalf("changes reported: %+v", got)
	}
}

func TestRestartedNodeGetsItsSubnetBack(t *testing.T) {
	r := newClaimRig(t, 2)
	first := r.add("machine", IPv4, nid.ID{1}, time.Minute)
	first.Start(r.now)
	r.run(2 * time.Second)
	again := r.add("machine", IPv4, nid.ID{1}, time.Minute)
	again.Start(r.now)
	r.run(2 * time.Second)
	if s := again.Status(); s.State != Claimed || s.Prefix != first.Status().Prefix || len(s.Collisions) != 0 {
		t.Fatalf("after restart: %+v, before: %+v", s, first.Status())
	}
}

func TestRenewalKeepsTheClaimPastManyTTLs(t *testing.T) {
	r := newClaimRig(t, 3)
	c := r.add("machine", IPv4, nid.ID{1}, 3*time.Second)
	c.Start(r.now)
	r.run(30 * time.Second)
	s := c.Status()
	if _, owner, ok := r.store.Lookup(Key(s.Prefix), r.now); s.State != Claimed || !ok || owner != (nid.ID{1}) {
		t.Fatalf("claim lapsed: %+v", s)
	}
	if !s.Expires.After(r.now) {
		t.Fatalf("lease expiry %v in the past", s.Expires)
	}
}

func TestClaimTakenOverAfterItsLeaseLapsedMovesOn(t *testing.T) {
	r := newClaimRig(t, 4)
	c := r.add("machine", IPv6, nid.ID{1}, 30*time.Second)
	c.Start(r.now)
	r.run(time.Second)
	p := c.Status().Prefix
	// Another node holds the subnet now, as if ours had expired unseen.
	r.store.Set(Key(p), []byte(nid.ID{7}.String()), nid.ID{7}, time.Hour, r.now)
	r.run(30 * time.Second)
	s := c.Status()
	if s.State != Claimed || s.Prefix == p || s.Attempt != 1 || s.Collisions[0].Holder != (nid.ID{7}) {
		t.Fatalf("status %+v", s)
	}
}

func TestExhaustedWhenEveryCandidateIsTaken(t *testing.T) {
	r := newClaimRig(t, 5)
	other := nid.ID{8}
	for i := range 8 {
		r.store.Set(Key(Subnet(IPv4, NodeHash(Candidate("machine", i)))), []byte(other.String()), other, time.Hour, r.now)
	}
	c := r.add("machine", IPv4, nid.ID{1}, time.Minute)
	c.Start(r.now)
	r.run(5 * time.Second)
	if s := c.Status(); s.State != Exhausted || len(s.Collisions) != 8 || !c.NextDeadline().IsZero() {
		t.Fatalf("status %+v", s)
	}
}

func TestTimeoutsAreRetried(t *testing.T) {
	r := newClaimRig(t, 6)
	r.store.LoseAnswers = 0.7
	c := r.add("machine", IPv4, nid.ID{1}, time.Minute)
	c.Start(r.now)
	r.run(2 * time.Minute)
	if s := c.Status(); s.State != Claimed || s.Attempt != 0 {
		t.Fatalf("status %+v: a lost answer must not count as a collision", s)
	}
}

// The node hands its DHT participant over as the dht.Client.
var _ dht.Client = (*dht.Participant)(nil)

func TestNewClaimerValidates(t *testing.T) {
	s := dhttest.NewStore(1)
	if _, err := NewClaimer(ClaimConfig{Family: IPv4}, s.Client(nid.ID{}), nid.ID{}, nil, nil); err == nil {
		t.Error("accepted an empty machine id")
	}
	if _, err := NewClaimer(ClaimConfig{MachineID: "m", Family: 5}, s.Client(nid.ID{}), nid.ID{}, nil, nil); err == nil {
		t.Error("accepted family 5")
	}
}

func TestRangeHoldsEverySubnet(t *testing.T) {
	for _, h := range []uint64{0, 1, 0xdeadbeefcafe, ^uint64(0)} {
		for _, f := range []Family{IPv4, IPv6} {
			if p := Subnet(f, h); !Range(f).Contains(p.Addr()) {
				t.Errorf("range %v does not hold subnet %v", Range(f), p)
			}
		}
	}
}
