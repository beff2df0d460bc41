package codel

import (
	"testing"
	"time"
)

const (
	target   = Target
	interval = Interval
)

// run feeds c a packet every step from start for length, each having
// waited sojourn(t), and returns the times of the drops.
func run(c *CoDel, start, length, step time.Duration, sojourn func(time.Duration) time.Duration) []time.Duration {
	var drops []time.Duration
	for t := start; t < start+length; t += step {
		if c.Drop(t, sojourn(t)) {
			drops = append(drops, t)
		}
	}
	return drops
}

func constant(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

func TestAShortQueueIsNeverDropped(t *testing.T) {
	c := New(target, interval)
	if drops := run(c, time.Second, time.Second, 10*time.Microsecond, constant(target-time.Microsecond)); len(drops) != 0 {
		t.Fatalf("dropped %d packets from a queue below target", len(drops))
	}
}

func TestABurstShorterThanAnIntervalIsNeverDropped(t *testing.T) {
	c := New(target, interval)
	burst := func(t time.Duration) time.Duration {
		if t%(50*time.Millisecond) < interval-time.Millisecond {
			return 5 * time.Millisecond
		}
		return 0
	}
	if drops := run(c, time.Second, time.Second, 10*time.Microsecond, burst); len(drops) != 0 {
		t.Fatalf("dropped %d packets of bursts shorter than an interval", len(drops))
	}
}

// A standing queue is dropped from an interval after it formed, then at
// interval/√count: faster and faster while it stays.
func TestAStandingQueueIsDroppedFasterAndFaster(t *testing.T) {
	c := New(target, interval)
	start := time.Second
	drops := run(c, start, 200*time.Millisecond, 10*time.Microsecond, constant(3*time.Millisecond))
	if len(drops) < 5 {
		t.Fatalf("%d drops in 200 ms of a standing queue: %v", len(drops), drops)
	}
	if first := drops[0] - start; first < interval || first > interval+20*time.Microsecond {
		t.Errorf("first drop %v after the queue formed; want one interval, %v", first, interval)
	}
	for i := 2; i < len(drops); i++ {
		if gap, before := drops[i]-drops[i-1], drops[i-1]-drops[i-2]; gap > before {
			t.Errorf("drop %d came %v after the one before, which came %v after its own: the drops should speed up", i, gap, before)
		}
	}
	if c.Drops.Load() != uint64(len(drops)) {
		t.Errorf("Drops %d, dropped %d", c.Drops.Load(), len(drops))
	}
}

// Once the queue is below target, dropping stops at once; a queue that
// comes back soon after resumes near the rate that controlled it.
func TestDroppingStopsWithTheQueueAndResumesNearItsRate(t *testing.T) {
	c := New(target, interval)
	start := time.Second
	first := run(c, start, 300*time.Millisecond, 10*time.Microsecond, constant(3*time.Millisecond))
	if drops := run(c, start+300*time.Millisecond, 50*time.Millisecond, 10*time.Microsecond, constant(0)); len(drops) != 0 {
		t.Fatalf("%d drops after the queue emptied", len(drops))
	}
	again := run(c, start+350*time.Millisecond, 100*time.Millisecond, 10*time.Microsecond, constant(3*time.Millisecond))
	if len(again) < 2 {
		t.Fatalf("the queue came back, %d drops", len(again))
	}
	lastGap := first[len(first)-1] - first[len(first)-2]
	if gap := again[1] - again[0]; gap > 2*lastGap {
		t.Errorf("resumed with drops %v apart; the queue was controlled with drops %v apart", gap, lastGap)
	}
}
