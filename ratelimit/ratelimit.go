// Package ratelimit bounds how often a node does expensive work for a
// remote: a token bucket per source address and one for everybody, in a
// table of bounded size. Time is passed in.
package ratelimit

import (
	"net/netip"
	"time"
)

// Limiter is a token bucket per source and one in total. The table is
// bounded: when it is full, new sources are refused until idle entries
// have been purged, so a spray from spoofed addresses cannot grow memory.
type Limiter struct {
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

// New allows perSourceRate per second from each source and globalRate in
// total, bursting to twice that, tracking at most maxSources sources.
func New(perSourceRate, globalRate float64, maxSources int) *Limiter {
	return &Limiter{
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

// Allow reports whether work for addr may be done now, and takes a token.
func (r *Limiter) Allow(addr netip.Addr, now time.Time) bool {
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
func (r *Limiter) purge(now time.Time) {
	full := time.Duration(r.perSource.burst / r.perSource.rate * float64(time.Second))
	for addr, b := range r.sources {
		if now.Sub(b.last) >= full {
			delete(r.sources, addr)
		}
	}
}
