package node

import (
	"testing"
	"time"

	"burrow/nid"
)

// relayRun offers the budget datagrams of size bytes for each pair at the
// given rates (bytes per second) for d, in 1 ms steps, and returns what
// passed per pair in bytes per second.
// take is admit's share check alone, for tests of the shares: whether n
// bytes from one member to another may be relayed at now, counted when
// they may, never queued.
func (b *relayBudget) take(from, to nid.ID, n int, now int64) bool {
	if b.rate <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeLocked(b.pair(from, to), n, now)
}

func relayRun(b *relayBudget, start int64, d time.Duration, size int, offered map[[2]nid.ID]float64) map[[2]nid.ID]float64 {
	step := time.Millisecond
	owed := map[[2]nid.ID]float64{}
	passed := map[[2]nid.ID]float64{}
	for t := time.Duration(0); t < d; t += step {
		now := start + int64(t)
		for pair, rate := range offered {
			owed[pair] += rate * step.Seconds()
			for owed[pair] >= float64(size) {
				owed[pair] -= float64(size)
				if b.take(pair[0], pair[1], size, now) {
					passed[pair] += float64(size)
				}
			}
		}
	}
	for pair := range passed {
		passed[pair] /= d.Seconds()
	}
	return passed
}

func relayPairOf(a, b uint64) [2]nid.ID {
	return [2]nid.ID{nid.FromUint128(0, a), nid.FromUint128(0, b)}
}

// One pair offering ten times the rate cannot starve another that offers
// less than its fair share: the light pair gets all it offers, the heavy
// one the rest, and together they stay near the rate.
func TestRelayBudgetGivesEachPairItsFairShare(t *testing.T) {
	const rate = 10 << 20
	b := newRelayBudget(rate)
	heavy, light := relayPairOf(1, 2), relayPairOf(3, 4)
	start := int64(time.Hour)
	// The first seconds spend the bursts; judge the steady state after.
	relayRun(b, start, 5*time.Second, 1400, map[[2]nid.ID]float64{heavy: 10 * rate, light: rate / 4})
	got := relayRun(b, start+int64(5*time.Second), 5*time.Second, 1400, map[[2]nid.ID]float64{heavy: 10 * rate, light: rate / 4})
	t.Logf("heavy pair %.2f MB/s, light pair %.2f MB/s, rate %.2f MB/s", got[heavy]/1e6, got[light]/1e6, rate/1e6)
	if got[light] < 0.95*rate/4 {
		t.Errorf("the light pair got %.0f of the %.0f B/s it offered, beside a heavy pair", got[light], float64(rate/4))
	}
	if got[heavy] < 0.6*rate {
		t.Errorf("the heavy pair got %.0f B/s; the light pair leaves it most of %d", got[heavy], rate)
	}
	if total := got[heavy] + got[light]; total > 1.05*rate {
		t.Errorf("relayed %.0f B/s in all, over the rate %d", total, rate)
	}
}

// Two heavy pairs split the rate about evenly, and a pair alone gets all
// of it.
func TestRelayBudgetSplitsTheRateAmongHeavyPairs(t *testing.T) {
	const rate = 10 << 20
	b := newRelayBudget(rate)
	x, y := relayPairOf(1, 2), relayPairOf(2, 1)
	start := int64(time.Hour)
	alone := relayRun(b, start, 3*time.Second, 1400, map[[2]nid.ID]float64{x: 4 * rate})
	if alone[x] < 0.95*rate || alone[x] > 1.2*rate {
		t.Errorf("a pair alone got %.0f B/s of %d", alone[x], rate)
	}
	relayRun(b, start+int64(3*time.Second), 2*time.Second, 1400, map[[2]nid.ID]float64{x: 4 * rate, y: 4 * rate})
	both := relayRun(b, start+int64(5*time.Second), 5*time.Second, 1400, map[[2]nid.ID]float64{x: 4 * rate, y: 4 * rate})
	t.Logf("alone %.2f MB/s; two heavy pairs %.2f and %.2f MB/s; rate %.2f MB/s", alone[x]/1e6, both[x]/1e6, both[y]/1e6, rate/1e6)
	if both[y] < 0.4*rate || both[x] < 0.4*rate {
		t.Errorf("two heavy pairs got %.0f and %.0f B/s of %d", both[x], both[y], rate)
	}
	if total := both[x] + both[y]; total > 1.05*rate {
		t.Errorf("relayed %.0f B/s in all, over the rate %d", total, rate)
	}
}

// A burst well above the rate but within the burst passes whole, even
// while a heavy pair keeps the relay's own bucket empty.
func TestRelayBudgetAbsorbsABurst(t *testing.T) {
	const rate = 10 << 20
	b := newRelayBudget(rate)
	heavy, bursty := relayPairOf(1, 2), relayPairOf(3, 4)
	start := int64(time.Hour)
	relayRun(b, start, 2*time.Second, 1400, map[[2]nid.ID]float64{heavy: 10 * rate})
	now := start + int64(2*time.Second)
	if b.tokens >= 1400 {
		t.Fatalf("the heavy pair left %.0f bytes in the relay's bucket", b.tokens)
	}
	for i := range 45 { // 63 KB at once
		if !b.take(bursty[0], bursty[1], 1400, now) {
			t.Fatalf("datagram %d of a 63 KB burst dropped beside a heavy pair", i)
		}
	}
	if b := newRelayBudget(0); b.take(bursty[0], bursty[1], 1, now) {
		t.Fatal("a node that does not relay relayed")
	}
}

// The ranking of relays for a pair is the same from either end, and spreads
// pairs over the relays.
func TestRelayRankSpreadsPairs(t *testing.T) {
	relays := []nid.ID{nid.FromUint128(7, 1), nid.FromUint128(7, 2), nid.FromUint128(7, 3)}
	first := map[nid.ID]int{}
	const pairs = 300
	for i := range uint64(pairs) {
		a, b := nid.FromUint128(i, 11), nid.FromUint128(i, 13)
		best := relays[0]
		for _, r := range relays {
			if relayRank(a, b, r) != relayRank(b, a, r) {
				t.Fatal("the two ends of a pair rank a relay differently")
			}
			if relayRank(a, b, r) > relayRank(a, b, best) {
				best = r
			}
		}
		first[best]++
	}
	for _, r := range relays {
		if first[r] < pairs/3*7/10 {
			t.Errorf("relay %s is first for %d of %d pairs; want about a third", r.Short(), first[r], pairs)
		}
	}
}

// Admitting a datagram of a pair already seen allocates nothing.
func TestRelayBudgetTakeDoesNotAllocate(t *testing.T) {
	b := newRelayBudget(10 << 20)
	pair := relayPairOf(1, 2)
	now := int64(time.Hour)
	b.take(pair[0], pair[1], 1400, now)
	if n := testing.AllocsPerRun(1000, func() {
		now += int64(time.Microsecond)
		b.take(pair[0], pair[1], 1400, now)
	}); n != 0 {
		t.Fatalf("take allocates %.1f times per datagram", n)
	}
}

// A pair past its share is paced, not dropped: what exceeds its burst
// waits in order in the pair's queue, leaves as the share allows, and
// only what overflows the queue is dropped.
func TestRelayBudgetPacesAPairPastItsShare(t *testing.T) {
	const rate, size = 1 << 20, 1400
	b := newRelayBudget(rate)
	from, to := relayPairOf(1, 2)[0], relayPairOf(1, 2)[1]
	start := int64(time.Hour)
	verdicts := map[relayVerdict]int{}
	var queuedSeq []byte
	for seq := range 300 { // 420 KB at once, beyond the 256 KiB burst
		dgram := make([]byte, size)
		dgram[0] = byte(seq)
		v := b.admit(from, to, dgram, start)
		verdicts[v]++
		if v == relayQueued {
			queuedSeq = append(queuedSeq, byte(seq))
		}
	}
	if verdicts[relayNow] == 0 || verdicts[relayQueued] == 0 || verdicts[relayQueued]*size > relayQueueBytes {
		t.Fatalf("verdicts %v: want the burst now, then a queue of at most %d bytes", verdicts, relayQueueBytes)
	}
	if _, _, _, ok := b.release(nil, start); ok {
		t.Fatal("a queued datagram left before its share allowed it")
	}
	var released []byte
	var last int64
	for now := start; now < start+int64(time.Second); now += int64(time.Millisecond) {
		for {
			plain, f, tt, ok := b.release(nil, now)
			if !ok {
				break
			}
			if f != from || tt != to {
				t.Fatalf("released for %v→%v, queued for %v→%v", f, tt, from, to)
			}
			released, last = append(released, plain[0]), now
		}
	}
	if string(released) != string(queuedSeq) {
		t.Fatalf("released in the order %v, queued %v", released, queuedSeq)
	}
	// The queue drains at the pair's share: no faster than the rate.
	if took, want := time.Duration(last-start), time.Duration(float64(len(queuedSeq)*size)/rate*float64(time.Second)); took < want*9/10 {
		t.Fatalf("%d queued datagrams left within %v; at %d B/s that takes %v", len(queuedSeq), took, rate, want)
	}
	t.Logf("%v; the queue of %d datagrams drained in %v", verdicts, len(queuedSeq), time.Duration(last-start))
	if b.hasWaiting() {
		t.Fatal("datagrams still wait after a second")
	}
}
