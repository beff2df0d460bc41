package node

import (
	"sync"
	"time"
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
}

func newRelayBudget(rate float64) *relayBudget {
	return &relayBudget{rate: rate, burst: max(rate/4, 256<<10), tokens: max(rate/4, 256<<10)}
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
