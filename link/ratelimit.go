package link

import (
	"net/netip"
	"time"
)

// rateLimiter bounds how many handshakes we answer: a token bucket per
// source address and one for everybody. A handshake costs several X25519
// operations, so without it a spray of initiations would stall the node.
// The table is bounded: when it is full, unknown sources share the global
// bucket only after a purge of idle entries.
type rateLimiter struct {
	perSource rateBucketConfig
	global    bucket
	globalCfg rateBucketConfig
	sources   map[netip.Addr]*bucket
	max       int
}

type rateBucketConfig struct {
	rate  float64 // tokens per second
	burst float64
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(perSourceRate, globalRate float64, maxSources int) *rateLimiter {
	return &rateLimiter{
		perSource: rateBucketConfig{perSourceRate, 2 * perSourceRate},
		globalCfg: rateBucketConfig{globalRate, 2 * globalRate},
		sources:   make(map[netip.Addr]*bucket),
		max:       maxSources,
	}
}

func (c rateBucketConfig) take(b *bucket, now time.Time) bool {
	if b.last.IsZero() {
		b.tokens = c.burst
	} else if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(c.burst, b.tokens+dt*c.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// allow reports whether a handshake from addr may be processed now.
func (r *rateLimiter) allow(addr netip.Addr, now time.Time) bool {
	b, ok := r.sources[addr]
	if !ok {
		if len(r.sources) >= r.max {
			r.purge(now)
			if len(r.sources) >= r.max {
				return false
			}
		}
		b = &bucket{}
		r.sources[addr] = b
	}
	return r.perSource.take(b, now) && r.globalCfg.take(&r.global, now)
}

// purge forgets sources whose bucket has refilled: they are back to the
// state a new entry would have.
func (r *rateLimiter) purge(now time.Time) {
	full := time.Duration(r.perSource.burst / r.perSource.rate * float64(time.Second))
	for addr, b := range r.sources {
		if now.Sub(b.last) >= full {
			delete(r.sources, addr)
		}
	}
}
