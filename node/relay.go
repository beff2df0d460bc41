package node

import (
	"sort"
	"sync"
	"time"

	"burrow/nid"
)

// relayBudget caps the bytes per second this node relays for others and
// shares them fairly among the relayed pairs (from, to), for all
// data-path workers. A rate of 0 relays nothing.
//
// Each pair that relayed within the last relayActiveWindow is active, and
// is guaranteed a fair share of the rate (rate / active pairs) through a
// bucket of its own: what fits in it always passes, even when other pairs
// have used up the whole rate, so one heavy pair cannot starve the others.
// What exceeds a pair's share passes only while the node's bucket has
// tokens left — the share of pairs that do not use theirs — so the rate
// is not wasted while one pair is alone. Both buckets hold a burst, so
// short bursts pass rather than being dropped. There is no queue: the
// data path holds no datagram and waits for no timer, so past its burst
// a pair over its share is dropped, not delayed.
type relayBudget struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	burst  float64
	tokens float64 // the node's bucket; negative after guaranteed shares overdrew it
	last   int64
	// pairs holds each relayed pair's share and count, bounded: pairs past
	// maxRelayPairs share one entry and are not itemized.
	pairs    map[[2]nid.ID]*relayPair
	overflow relayPair
	// active counts the pairs active at the last sweep, plus those that
	// became active since.
	active    int
	lastSweep int64
}

// relayPair is one relayed pair's share of the budget.
type relayPair struct {
	tokens    float64
	last      int64 // when it last relayed
	datagrams uint64
}

const (
	maxRelayPairs = 256
	// relayActiveWindow is how long a pair that relayed keeps its share.
	relayActiveWindow = int64(time.Second)
	// minPairBurst is the least burst a pair's share holds, so that a
	// small burst passes even among many pairs.
	minPairBurst = 64 << 10
)

func newRelayBudget(rate float64) *relayBudget {
	burst := max(rate/4, 256<<10)
	return &relayBudget{rate: rate, burst: burst, tokens: burst, pairs: make(map[[2]nid.ID]*relayPair)}
}

// RelayedPair counts what this node relayed from one member to another.
type RelayedPair struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Datagrams uint64 `json:"datagrams"`
}

func (b *relayBudget) snapshot() []RelayedPair {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]RelayedPair, 0, len(b.pairs))
	for k, p := range b.pairs {
		out = append(out, RelayedPair{From: k[0].String(), To: k[1].String(), Datagrams: p.datagrams})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From+out[i].To < out[j].From+out[j].To })
	return out
}

// take says whether n bytes from one member to another may be relayed at
// now, and counts them when they may.
func (b *relayBudget) take(from, to nid.ID, n int, now int64) bool {
	if b.rate <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if dt := seconds(now - b.last); dt > 0 && b.last != 0 {
		b.tokens = min(b.burst, b.tokens+dt*b.rate)
	}
	b.last = now
	if now-b.lastSweep >= relayActiveWindow {
		b.sweep(now)
	}
	p := b.pair(from, to)
	if p.last == 0 || now-p.last >= relayActiveWindow {
		b.active++
		p.tokens = b.pairBurst() // a pair starting (again) may burst
	} else if dt := seconds(now - p.last); dt > 0 {
		p.tokens = min(b.pairBurst(), p.tokens+dt*b.rate/float64(b.active))
	}
	p.last = now
	size := float64(n)
	switch {
	case p.tokens >= size: // within the pair's fair share
		p.tokens -= size
		b.tokens = max(b.tokens-size, -b.burst)
	case b.tokens >= size: // beyond it, out of what other pairs leave
		b.tokens -= size
	default:
		return false
	}
	p.datagrams++
	return true
}

// pairBurst is what a pair's share holds: its part of the node's burst.
func (b *relayBudget) pairBurst() float64 {
	return max(b.burst/float64(max(b.active, 1)), minPairBurst)
}

// pair is the share of a pair, an entry of its own while there is room.
func (b *relayBudget) pair(from, to nid.ID) *relayPair {
	key := [2]nid.ID{from, to}
	if p, ok := b.pairs[key]; ok {
		return p
	}
	if len(b.pairs) >= maxRelayPairs {
		return &b.overflow
	}
	p := &relayPair{}
	b.pairs[key] = p
	return p
}

// sweep counts the pairs still active.
func (b *relayBudget) sweep(now int64) {
	b.lastSweep = now
	b.active = 0
	for _, p := range b.pairs {
		if p.last != 0 && now-p.last < relayActiveWindow {
			b.active++
		}
	}
	if p := &b.overflow; p.last != 0 && now-p.last < relayActiveWindow {
		b.active++
	}
}

func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }
