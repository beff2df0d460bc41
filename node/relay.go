package node

import (
	"sort"
	"sync"
	"time"

	"burrow/nid"
)

// relayBudget caps the bytes per second this node relays for others, with
// a token bucket shared by all data-path workers. A rate of 0 relays
// nothing.
type relayBudget struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	last   int64
	// pairs counts relayed datagrams per (from, to), bounded: pairs past
	// maxRelayPairs are not itemized.
	pairs map[[2]nid.ID]uint64
}

const maxRelayPairs = 256

func newRelayBudget(rate float64) *relayBudget {
	return &relayBudget{rate: rate, burst: max(rate/4, 256<<10), tokens: max(rate/4, 256<<10), pairs: make(map[[2]nid.ID]uint64)}
}

func (b *relayBudget) count(from, to nid.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := [2]nid.ID{from, to}
	if _, ok := b.pairs[key]; ok || len(b.pairs) < maxRelayPairs {
		b.pairs[key]++
	}
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
	for k, v := range b.pairs {
		out = append(out, RelayedPair{From: k[0].String(), To: k[1].String(), Datagrams: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From+out[i].To < out[j].From+out[j].To })
	return out
}

func (b *relayBudget) take(n int, now int64) bool {
	if b.rate <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if dt := time.Duration(now - b.last).Seconds(); dt > 0 && b.last != 0 {
		b.tokens = min(b.burst, b.tokens+dt*b.rate)
	}
	b.last = now
	if b.tokens < float64(n) {
		return false
	}
	b.tokens -= float64(n)
	return true
}
