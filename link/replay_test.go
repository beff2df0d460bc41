package link

import (
	"testing"

	"pgregory.net/rapid"
)

func TestReplayWindowBasics(t *testing.T) {
	var w replayWindow
	for _, c := range []uint64{0, 1, 2, 5, 4, 3} {
		if !w.accept(c) {
			t.Fatalf("fresh counter %d refused", c)
		}
	}
	for _, c := range []uint64{0, 3, 5} {
		if w.accept(c) {
			t.Fatalf("replayed counter %d accepted", c)
		}
	}
	if !w.accept(10_000) {
		t.Fatal("jump ahead refused")
	}
	if w.accept(10_000 - ReplayWindowSize - 1) {
		t.Fatal("counter behind the window accepted")
	}
	if !w.accept(10_000 - ReplayWindowSize) {
		t.Fatal("oldest counter inside the window refused")
	}
}

// TestReplayWindowMatchesReference compares against a set-based oracle.
func TestReplayWindowMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w replayWindow
		seen := map[uint64]bool{}
		var highest uint64
		any := false
		// From zero the ring grows while the counters advance; far from
		// it, the first counter gives it its full size.
		base := uint64(0)
		if rapid.Bool().Draw(t, "far") {
			base = rapid.Uint64Range(0, 1<<62).Draw(t, "base")
		}
		for i, n := 0, rapid.IntRange(1, 400).Draw(t, "n"); i < n; i++ {
			c := base + rapid.Uint64Range(0, 3*replayBits).Draw(t, "c")
			want := !seen[c] && (!any || c > highest || highest-c <= ReplayWindowSize)
			if got := w.accept(c); got != want {
				t.Fatalf("accept(%d) = %v, want %v (highest %d)", c, got, want, highest)
			}
			if want {
				seen[c] = true
				if !any || c > highest {
					highest = c
				}
				any = true
			}
		}
	})
}
