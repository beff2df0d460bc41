package ratelimit

import (
	"net/netip"
	"testing"
	"time"
)

func TestPerSourceAndTotalLimits(t *testing.T) {
	l := New(10, 100, 1000)
	now := time.Unix(0, 0)
	a := netip.MustParseAddr("192.0.2.1")
	allowed := 0
	for range 100 {
		if l.Allow(a, now) {
			allowed++
		}
	}
	if allowed != 20 {
		t.Fatalf("one source got %d at once, want its burst of 20", allowed)
	}
	if !l.Allow(a, now.Add(time.Second)) {
		t.Fatal("tokens do not refill")
	}
	total := 0
	for i := range 1000 {
		if l.Allow(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), now.Add(time.Second)) {
			total++
		}
	}
	if total > 200 {
		t.Fatalf("%d allowed from many sources at once, over the total burst", total)
	}
}

func TestTableStaysBounded(t *testing.T) {
	l := New(1, 1e9, 100)
	now := time.Unix(0, 0)
	for i := range 10000 {
		l.Allow(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), now)
	}
	if len(l.sources) > 100 {
		t.Fatalf("table grew to %d sources", len(l.sources))
	}
}
