package nid

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func genID(t *rapid.T, label string) ID {
	var id ID
	copy(id[:], rapid.SliceOfN(rapid.Byte(), Size, Size).Draw(t, label))
	return id
}

func TestDistanceAddInverse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genID(t, "a"), genID(t, "b")
		if got := a.Add(a.Distance(b)); got != b {
			t.Fatalf("a + d(a,b) = %v, want %v", got, b)
		}
		if a != b && a.Distance(b).Add(b.Distance(a)) != (ID{}) {
			t.Fatalf("d(a,b) + d(b,a) must wrap to zero")
		}
	})
}

func TestInOpenPartitionsRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from, mid, to, x := genID(t, "from"), genID(t, "mid"), genID(t, "to"), genID(t, "x")
		if !InOpen(mid, from, to) || x == mid || !InOpen(x, from, to) {
			t.Skip("x and mid must be distinct and inside (from, to)")
		}
		// Splitting (from, to) at mid puts x in exactly one half.
		left, right := InOpen(x, from, mid), InOpen(x, mid, to)
		if left == right {
			t.Fatalf("x=%v in both or neither half of (%v, %v) split at %v", x, from, to, mid)
		}
	})
}

func TestParseRoundTrip(t *testing.T) {
	id := FromPublicKey([32]byte{1, 2, 3})
	back, err := Parse(id.String())
	if err != nil || back != id {
		t.Fatalf("Parse(String()) = %v, %v", back, err)
	}
	for _, bad := range []string{"", "zz", id.String()[:31], id.String() + "0", "g" + id.String()[1:]} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted garbage", bad)
		}
	}
}

func TestFractionRoundTrip(t *testing.T) {
	for _, f := range []float64{0, 0.25, 0.5, 0.999} {
		if got := FromFraction(f).Fraction(); got < f-1e-12 || got > f+1e-12 {
			t.Errorf("FromFraction(%v).Fraction() = %v", f, got)
		}
	}
}

func TestGapIsTheShortWayRound(t *testing.T) {
	a, b := FromUint128(0, 10), FromUint128(0, 3)
	if got := a.Gap(b); got != FromUint128(0, 7) {
		t.Fatalf("Gap counter-clockwise = %v, want 7", got)
	}
	if a.Gap(b) != b.Gap(a) {
		t.Fatal("Gap is not symmetric")
	}
	far := FromUint128(1<<63, 0)
	if got := FromUint128(0, 0).Gap(far.Add(FromUint128(0, 1))); got != FromUint128(1<<63-1, 1<<64-1) {
		t.Fatalf("Gap past half the ring = %v, want the way back", got)
	}
	if a.Gap(a) != (ID{}) {
		t.Fatal("Gap to itself is not zero")
	}
}

// Sort agrees with SortFunc on either side of its insertion-sort cutoff,
// with duplicates and IDs that share their first half.
func TestSortMatchesSortFunc(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 80).Draw(t, "n")
		ids := make([]ID, n)
		for i := range ids {
			ids[i] = FromUint128(rapid.Uint64Range(0, 3).Draw(t, "hi"), rapid.Uint64().Draw(t, "lo"))
			if rapid.Bool().Draw(t, "random") {
				ids[i] = genID(t, "id")
			}
		}
		want := slices.Clone(ids)
		slices.SortFunc(want, ID.Compare)
		Sort(ids)
		if !slices.Equal(ids, want) {
			t.Fatalf("Sort = %v, want %v", ids, want)
		}
	})
}
