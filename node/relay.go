package node

import (
	"sort"
	"sync"
	"sync/atomic"
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
// short bursts pass rather than being dropped. Past its burst, a pair
// over its share is paced: its datagrams wait, in order, in a short queue
// of its own (relayQueueBytes) until its share allows them, and only what
// overflows that queue is dropped. The data path releases them as
// datagrams pass, and the core's tick when nothing does.
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
	// waiting are the pairs with datagrams queued, oldest queue first;
	// queuedPairs is its length, read without the lock by the data path,
	// which looks for released datagrams after every relayed one.
	waiting     []*relayPair
	queuedPairs atomic.Int32
}

// relayPair is one relayed pair's share of the budget.
type relayPair struct {
	key       [2]nid.ID
	tokens    float64
	last      int64 // when it last relayed
	datagrams uint64
	// queue holds the datagrams waiting for the pair's share: slots made
	// the first time the pair waits, queued of them in use from head.
	queue        [][]byte
	head, queued int
	queuedBytes  int
}

const (
	// relayQueueBytes is what a pair may have waiting: a few milliseconds
	// at a member's rate, so a burst is paced, not a standing queue.
	relayQueueBytes = 64 << 10
	relayQueueSlots = 48
	relaySlotLen    = 2048 // a datagram on any underlay path
	maxRelayPairs   = 256
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

// relayVerdict is what becomes of a datagram offered to the budget.
type relayVerdict uint8

const (
	relayNow relayVerdict = iota
	relayQueued
	relayDropped
)

// admit decides about a datagram from one member to another: relayed now,
// queued behind the pair's earlier ones or until its share allows, or
// dropped when the pair's queue is full (or the node relays nothing).
func (b *relayBudget) admit(from, to nid.ID, plain []byte, now int64) relayVerdict {
	if b.rate <= 0 {
		return relayDropped
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pair(from, to)
	if p.queued == 0 && b.takeLocked(p, len(plain), now) {
		return relayNow
	}
	if p == &b.overflow || len(plain) > relaySlotLen || p.queued == relayQueueSlots || p.queuedBytes+len(plain) > relayQueueBytes {
		return relayDropped
	}
	if p.queue == nil {
		p.queue = make([][]byte, relayQueueSlots)
		for i := range p.queue {
			p.queue[i] = make([]byte, 0, relaySlotLen)
		}
	}
	if p.queued == 0 {
		b.waiting = append(b.waiting, p)
		b.queuedPairs.Store(int32(len(b.waiting)))
	}
	slot := &p.queue[(p.head+p.queued)%relayQueueSlots]
	*slot = append((*slot)[:0], plain...)
	p.queued++
	p.queuedBytes += len(plain)
	return relayQueued
}

// release copies into buf the oldest queued datagram whose pair's share
// allows it now, counting it, and returns it with its pair; ok is false
// when none may go yet.
func (b *relayBudget) release(buf []byte, now int64) (plain []byte, from, to nid.ID, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range b.waiting {
		slot := p.queue[p.head]
		if !b.takeLocked(p, len(slot), now) {
			continue
		}
		plain = append(buf[:0], slot...)
		p.head = (p.head + 1) % relayQueueSlots
		p.queued--
		p.queuedBytes -= len(slot)
		if p.queued == 0 {
			b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
			b.queuedPairs.Store(int32(len(b.waiting)))
		}
		return plain, p.key[0], p.key[1], true
	}
	return nil, nid.ID{}, nid.ID{}, false
}

// hasWaiting reports whether datagrams wait for their pair's share.
func (b *relayBudget) hasWaiting() bool { return b.queuedPairs.Load() > 0 }

// takeLocked says whether n bytes of pair p may be relayed at now, and
// counts them when they may; b.mu is held.
func (b *relayBudget) takeLocked(p *relayPair, n int, now int64) bool {
	if dt := seconds(now - b.last); dt > 0 && b.last != 0 {
		b.tokens = min(b.burst, b.tokens+dt*b.rate)
	}
	b.last = max(b.last, now)
	if now-b.lastSweep >= relayActiveWindow {
		b.sweep(now)
	}
	if p.last == 0 || now-p.last >= relayActiveWindow {
		b.active++
		p.tokens = b.pairBurst() // a pair starting (again) may burst
	} else if dt := seconds(now - p.last); dt > 0 {
		p.tokens = min(b.pairBurst(), p.tokens+dt*b.rate/float64(b.active))
	}
	p.last = max(p.last, now)
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
	p := &relayPair{key: key}
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

// relayReleaseEvery is how often the core releases waiting relayed
// datagrams when no datagram passing through the data path does.
const relayReleaseEvery = time.Millisecond

// releaseRelayed sends what waits in the relay's queues and may go now,
// for the pairs whose traffic stopped.
func (n *Node) releaseRelayed(now time.Time) {
	if !n.dp.relay.hasWaiting() {
		return
	}
	if n.relayer == nil {
		n.relayer = &Worker{Tx: NewTxBatch(0, TxBufLen(relaySlotLen), func(msgs []TxMsg) {
			for _, m := range msgs {
				n.out.SendDatagram(m.To, m.Buf)
			}
		})}
	}
	n.dp.releaseRelayed(n.relayer, n.snap.Load(), now.UnixNano())
	n.relayer.Tx.Flush()
}

func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }
